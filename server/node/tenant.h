// server/node/tenant.h: one open tenant as the node holds it: its database and indexes, the ring
// of recent changes that subscriptions resume from, its idempotency keys, and the counts its
// quotas and the registry read. A Tenant lives in a shared_ptr; whoever holds one keeps the tenant
// open (node-http.md §11 "references"), and the registry closes it only when it alone holds it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/database.h"
#include "engine/hooks.h"
#include "index/index_set.h"

namespace fenec::node {

// One landed block as subscriptions see it.
struct ChangeEntry {
    engine::Seq first;
    engine::Seq last;
    std::vector<engine::CollectionChange> changes;
};

// Something parked on the tenant's changes (a subscription, a held request): told once per
// landed block, from under the engine's writer lock, so it must only enqueue.
class ChangeWatcher {
  public:
    virtual ~ChangeWatcher() = default;
    virtual void wake() = 0;
};

class Tenant final : public engine::ChangeListener {
  public:
    Tenant(std::string name, size_t ring_max) : name_(std::move(name)), ring_max_(ring_max) {}
    // How the registry makes one: held by a shared_ptr that self() can be had from, so a write
    // answered after its fsync keeps its tenant open until it is answered (outcome.cc).
    static std::shared_ptr<Tenant> make(std::string name, size_t ring_max) {
        auto t = std::make_shared<Tenant>(std::move(name), ring_max);
        t->self_ = t;
        return t;
    }
    std::shared_ptr<Tenant> self() const { return self_.lock(); }

    const std::string& name() const { return name_; }
    engine::Database& db() { return *db_; }
    index::IndexSet& indexes() { return *indexes_; }

    // Set once by the registry as it opens the tenant, before anyone else sees it.
    void attach(std::unique_ptr<index::IndexSet> indexes, std::unique_ptr<engine::Database> db);
    std::unique_ptr<engine::Database> detach_db() { return std::move(db_); }
    // The database's seq as it was attached: a close that finds it unchanged has nothing to
    // checkpoint (Registry::close_tenant).
    engine::Seq opened_seq() const { return opened_seq_; }

    // engine::ChangeListener. on_block: under the writer lock; only enqueues. Both wake every
    // watcher: held requests run again at landing, streams and Fenec-After reads look again once
    // what landed is durable.
    void on_block(const engine::BlockSummary& summary) override;
    void on_durable(engine::Seq) override;

    // What subscribers and Fenec-After may be told (INVARIANTS N22): the durable seq, which a
    // power cut cannot take back; under --sync off (nothing durable until close, by the
    // operator's choice) the landed seq.
    engine::Seq visible_seq() const;
    // Waits (the group commit, or an fsync of its own) until `seq` is visible; an error when the
    // tenant is latched read-only after a failed write.
    engine::Status wait_visible(engine::Seq seq);

    // The visible entries after `cursor`, or false when the ring does not reach back to it (a
    // reseed).
    bool changes_after(engine::Seq cursor, std::vector<ChangeEntry>& out) const;
    engine::Seq ring_floor() const;

    void watch(const std::shared_ptr<ChangeWatcher>& w);
    void unwatch(const ChangeWatcher* w);

    // Idempotency keys (node-http.md §5.7): key and user to the row holding the stored answer.
    // Built from `_idempotency` as the tenant opens, kept current by the writes that add rows.
    std::optional<engine::DocId> key_row(const std::string& user_key) const;
    void remember_key(const std::string& user_key, engine::DocId row);
    // At most one request per key at a time: claim waits while another holds it.
    void claim_key(const std::string& user_key);
    void release_key(const std::string& user_key);

    // What the tenant holds in memory (node-http.md §11): the engine's figure (documents, id
    // maps, indexes, graphs), as every landed block leaves it and as the registry refreshes it
    // (at open, once a second) while it holds a reference, so reading it never touches a
    // database that is closing; and the change ring and idempotency keys held here.
    uint64_t memory_bytes() const {
        return db_memory_.load(std::memory_order_relaxed) +
               ring_bytes_.load(std::memory_order_relaxed) +
               keys_bytes_.load(std::memory_order_relaxed);
    }
    void refresh_memory() { set_memory(db_memory_, db_ ? db_->usage().memory_bytes : 0); }
    // While `total` is set, memory_bytes() is counted in it, every change of it added as it is
    // made: the registry's sum over its open tenants (Registry::memory_bytes), kept without a
    // walk. Set by the registry as the tenant fills its slot, cleared (null) as it leaves it; a
    // change and a charge's start or end never interleave (memory_mu_), so the sum never drifts.
    void charge_memory_to(std::atomic<uint64_t>* total);

    // Held requests with the same text and parameters queue (node-http.md §5.5): only the oldest
    // runs on a wake. `held_join` returns whether `w` is first; `held_leave` removes it and
    // returns the new first, to be woken.
    bool held_join(const std::string& key, const std::shared_ptr<ChangeWatcher>& w);
    bool held_first(const std::string& key, const ChangeWatcher* w) const;
    std::shared_ptr<ChangeWatcher> held_leave(const std::string& key, const ChangeWatcher* w);

    // Wakes every watcher as a landed block would: held requests run again (and answer a freeze
    // or a deletion 503), reads waiting on Fenec-After look again.
    void wake_all();

    // A write admitted and not yet answered (§8.2: a freeze answers only once writes in flight
    // were). Taken before the admission check, so a freeze that sets its mark and then counts
    // zero has missed none: a write counted after that finds the mark.
    class WriteTicket {
      public:
        explicit WriteTicket(Tenant& t) : t_(&t) { t.writes_in_flight_.fetch_add(1); }
        WriteTicket(WriteTicket&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
        WriteTicket(const WriteTicket&) = delete;
        WriteTicket& operator=(const WriteTicket&) = delete;
        WriteTicket& operator=(WriteTicket&&) = delete;
        ~WriteTicket() {
            if (t_) t_->write_done();
        }

      private:
        Tenant* t_;
    };
    WriteTicket admit_write() { return WriteTicket(*this); }
    // Waits until no write is in flight, at most `wait_ms`; false at the bound.
    bool wait_writes(int64_t wait_ms);

    // When it was last used: written by the registry only, under its lock, as it moves the
    // tenant to the newest end of its least-recently-used list (Registry::touch).
    std::atomic<int64_t> last_used_ms{0};
    std::atomic<uint32_t> streams{0};
    std::atomic<uint32_t> requests{0};
    // Being taken out of service (a deletion, an image put in its place): writes and held
    // requests are answered 503 rather than run (Registry::take_out).
    std::atomic<bool> leaving{false};
    // The node's own quotas on those counts (quota.cc, node-http.md §7); quota_none: no limit.
    // quota_mu orders a quota's change (side file, then these and the engine's limits).
    static constexpr uint64_t quota_none = UINT64_MAX;
    std::atomic<uint64_t> streams_max{quota_none};
    std::atomic<uint64_t> requests_max{quota_none};
    std::mutex quota_mu;
    // The quota applied, as its side file holds it (`{}`: none), under quota_mu: what GET
    // answers, so a quota whose side file was not kept is never reported as if it were applied.
    std::string quota_applied = "{}";

  private:
    void write_done();
    void wake_watchers();
    // `part` (one of the three below) set to `bytes`, and the charge moved with it.
    void set_memory(std::atomic<uint64_t>& part, uint64_t bytes);

    const std::string name_;
    std::weak_ptr<Tenant> self_;  // make()'s
    const size_t ring_max_;
    std::atomic<uint64_t> db_memory_{0};
    std::atomic<uint64_t> ring_bytes_{0};  // written under mu_
    std::atomic<uint64_t> keys_bytes_{0};  // written under keys_mu_
    // Taken inside mu_ and keys_mu_, never the other way round: the three parts change under it.
    std::mutex memory_mu_;
    std::atomic<uint64_t>* memory_total_ = nullptr;  // under memory_mu_
    std::unique_ptr<index::IndexSet> indexes_;
    std::unique_ptr<engine::Database> db_;

    mutable std::mutex mu_;
    std::deque<ChangeEntry> ring_;
    engine::Seq floor_;  // the ring holds every block after this seq
    engine::Seq opened_seq_;  // set by attach, before anyone else sees the tenant
    std::vector<std::weak_ptr<ChangeWatcher>> watchers_;

    mutable std::mutex held_mu_;
    std::map<std::string, std::deque<std::weak_ptr<ChangeWatcher>>> held_;

    mutable std::mutex keys_mu_;
    std::condition_variable keys_cv_;
    std::map<std::string, engine::DocId> keys_;
    std::set<std::string> keys_in_flight_;

    std::atomic<int64_t> writes_in_flight_{0};
    std::mutex writes_mu_;
    std::condition_variable writes_cv_;
};

}  // namespace fenec::node
