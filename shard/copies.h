// shard/copies.h: a tenant's copies (router.md §8): the standby of its node's pair, or with
// --replicas a replica of its own placed by `place_replica` (shard/placement.h); attached,
// detached, kept in step with creates, deletes and moves, repaired (§8.3), and counted.
//
// Attach (§8.2) is, in this order: the copy's node told to follow the primary (`from`, the
// tenant's `lineage`, the directory's `authority` and `term`); the recorded quota sent to it;
// only then, for a replica of its own, the `replicas` row, synced. Detach is the copy deleted on
// its node and the row cleared even when the node did not answer. A copy's failure never fails
// the operation that made it: it is logged and the tenant answers `unreplicated` with the reason.
//
// `same_zone` is not stored: it is the zones of the two nodes, so a zone changed moves every
// tenant's answer and the `fenec_router_same_zone_copies` gauge at once. Why a tenant has no copy
// is kept in memory from the last attempt (a restart forgets it and says it again from the maps).
//
// Threads: the calls below block on nodes and on the directory's fsync; they run on an API
// worker, or on the worker of its own that runs repairs and quota resends (`repair`,
// `node_answered`), so a lease thread or a failover asking for one never waits on it. A repair
// claims each tenant it changes, as every operation does (§6.1). Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/runtime/http.h"
#include "shard/directory.h"
#include "shard/quota.h"
#include "shard/router.h"

namespace fenec::obs {
class GaugeFamily;
class Registry;
}  // namespace fenec::obs

namespace fenec::json {
class Writer;
}

namespace fenec::shard {

class NodeCalls;
struct SurveyReply;
struct CopyInfo;

// Jobs the copies' worker holds at once: each region's repair and each node's quota resend is
// queued once however often it is asked (a repair asked while one waits is the one waiting), so
// this bounds a directory's regions and nodes, not requests.
inline constexpr size_t copies_queue_max = 4096;
// The longest a pair's standby, told to follow a tenant, is waited for to catch up before the
// tenant's own replica is given up for it (Copies::handed_to_standby), the tenant claimed
// meanwhile; one still behind is looked at again on the repair's schedule.
inline constexpr int64_t standby_catch_up_ms_max = 500;
// The scheduled looks in a row at a tenant whose pair's standby is still behind.
inline constexpr int catch_up_looks_max = 5;

// How Copies::place goes about a replica. A request waits for its two calls at most; where both
// nodes refused or did not answer, a look at the tenant is scheduled (RepairSchedule), whose
// survey leaves out the nodes that do not answer and which tries every node left: a tenant whose
// first-ranked nodes are down or refuse gets a replica on another by itself. A repair's own
// placing (those looks among them) tries them all and schedules nothing: its tenant keeps its
// place on the schedule (Copies::repair_tenant).
struct Placing {
    size_t tries = 2;
    bool schedule = true;
};

// Where a tenant's copy went, or why it has none.
struct CopyOutcome {
    bool asked = false;        // a copy was wanted: the node is in a pair, or --replicas
    std::string node;          // the copy's node; "" when none
    bool same_zone = false;    // the copy is in its primary's zone
    std::string unreplicated;  // why none, when one was wanted
    bool refused = false;      // a node was asked to keep it and did not
};
// A create's or a move's answer members for its copy: `replica_on` (and `same_zone` when so), or
// `unreplicated` with the reason when one was wanted; nothing when none was.
void write_copy(json::Writer& w, const CopyOutcome& copy);

// What a repair did (the answer of `POST /_shard/replicas`).
struct RepairReport {
    struct Placed {
        std::string tenant;
        std::string replica;
        bool same_zone = false;
    };
    struct Why {
        std::string tenant;
        std::string why;
    };
    std::vector<Placed> replicated;
    std::vector<Why> failed;        // a node asked to keep the copy refused or did not answer
    std::vector<Why> unreplicated;  // no copy now, and why not (no node fits, its primary silent)
    // Copies that followed a primary with no row naming them, deleted (Copies::drop_unrecorded).
    struct Dropped {
        std::string tenant;
        std::string node;
    };
    std::vector<Dropped> dropped;
};

// §8.3 step 3's schedule for a tenant whose primary did not answer a repair's survey: looked at
// again 10 s, 30 s, 1 min, 2 min and 5 min after it was first found silent, then left to the next
// repair asked for. Times are the caller's monotonic milliseconds; no clock is read here.
class RepairSchedule {
  public:
    static constexpr std::array<int64_t, 5> after_ms = {10'000, 30'000, 60'000, 120'000, 300'000};

    // The looks at after_ms, or scaled so that the first comes `first_ms` after a sighting and
    // the others in the same proportions (a test's, FENEC_TEST_REPAIR_LOOK_MS).
    explicit RepairSchedule(int64_t first_ms = after_ms[0]);

    // Found silent at `now_ms`; a tenant already scheduled keeps its first sighting.
    void silent(const std::string& tenant, int64_t now_ms);
    // Its primary answered, or it is gone: not looked at again on its account.
    void settled(const std::string& tenant);
    // The tenants due at `now_ms`, each moved on to its next look (dropped after the last).
    std::vector<std::string> due(int64_t now_ms);
    // When the next look is due, if any.
    std::optional<int64_t> next_ms() const;
    bool empty() const { return looks_.empty(); }

  private:
    struct Look {
        int64_t first_ms = 0;
        size_t step = 0;  // index into after_ms of the next look
    };
    std::array<int64_t, after_ms.size()> after_;
    std::map<std::string, Look> looks_;
};

class Copies {
  public:
    // Registers the copies' gauges in `registry`.
    Copies(Router& router, obs::Registry& registry);
    ~Copies();  // stop()
    Copies(const Copies&) = delete;
    Copies& operator=(const Copies&) = delete;

    // Starts the worker; stop() ends it, dropping what waits. Idempotent.
    void start();
    void stop();

    // §8.2 attach: `tenant`'s copy on `on` (a replica of its own when `own`, else its node's
    // standby's). False with the reason when the node did not take it.
    struct Attached {
        bool ok = false;
        std::string why;
    };
    Attached attach(const TenantRow& tenant, const NodeRow& on, bool own,
                    std::string_view request_id);
    // The tenants on `node` whose copy is its pair's standby `standby` (no replica of their own),
    // none when `standby` is not in the directory.
    std::vector<std::string> copied_by_pair(const std::string& node,
                                            const std::string& standby) const;
    // What `copy` said of its copy of `t`: following its primary `primary` (on its lineage,
    // where recorded), not (no copy, or one following another node or lineage), or nothing.
    enum class Follows { yes, no, silent };
    Follows follows_primary(const TenantRow& t, const NodeRow& primary, const NodeRow& copy,
                            std::string_view request_id);
    // `t`'s replica row kept on `old_standby` with its pair's change (copied_by_pair), forgotten
    // where that node says it holds no copy following the primary, and where it said nothing
    // unless `keep_silent` (it was the copy until now; a silent node's copy may still be whole).
    // What the node said (yes where nothing was kept there).
    Follows check_kept_copy(const TenantRow& t, const std::string& old_standby, bool keep_silent,
                            std::string_view request_id);
    // §8.2 detach of `tenant`'s own replica, if it has one.
    void detach(const std::string& tenant, std::string_view request_id);
    // The pair's `standby` was told to follow `tenant`: its own replica, if it has one, is its
    // copy no more (its record cleared, and the copy deleted unless it is the standby's), once
    // the standby has caught up with the primary (caught_up). Until then the replica stays its
    // copy, and false says why: a later repair hands it over.
    // `pair_changed`: the pair of the tenant's node no longer names `standby` (a PUT of the pair
    // beside the caller), which leaves the tenant to that change.
    enum class Handed { yes, behind, pair_changed };
    Handed handed_to_standby(const std::string& tenant, const std::string& standby,
                             std::string_view request_id, std::string& why);
    // `tenant`, whose pair's `standby` is still behind (`why`), looked at by a repair again on
    // the schedule (RepairSchedule's first step, 10 s), at most catch_up_looks_max times in a
    // row, then left to the next repair asked for; logged either way.
    void look_again(const std::string& tenant, const std::string& standby, const std::string& why);
    // `tenant`, left by a pair's hand-over or a repair because the pair changed meanwhile
    // (Handed::pair_changed, `why`), looked at again as look_again does.
    void look_after_pair_change(const std::string& tenant, const std::string& why);

    // §6.4 step 8: the copy of a tenant just created, on its node's standby or with --replicas
    // a replica of its own.
    CopyOutcome created(const std::string& tenant, std::string_view request_id);
    // §6.4 Delete: the copies of `tenant` as `before` had them deleted, best effort.
    void deleted(const TenantRow& tenant, const DirectoryMaps& before, std::string_view request_id);
    // §11.7: the same for a tenant whose row stays in this directory placed on none of its nodes
    // (a home `@<r>` after a move out, or again after an import undone), and its own replica's
    // record cleared with it, which no row removal clears here.
    void left(const TenantRow& tenant, const DirectoryMaps& before, std::string_view request_id);
    // §7.2 step 1: a replica of its own on the move's target `to` is detached.
    void before_move(const std::string& tenant, const std::string& to, std::string_view request_id);
    // §7.2 steps 8 and 9, after the flip: the copy on the source's standby deleted and one made
    // on the target's; the own replica re-pointed at the target where it still fits (in the
    // target's region, so one in the region a move left never does), else taken off and placed
    // again there (never on `from`, whose copy the move deletes next).
    CopyOutcome moved(const std::string& tenant, const std::string& from,
                      std::string_view request_id);

    // After a move's source copy was deleted: a tenant that step 9 left with no replica, under
    // --replicas and with no node refusing one, is placed again, the source a candidate now (it
    // may have been the only node of its region left to keep one). `copy` is step 9's outcome;
    // the new one where a replica was placed, else `copy` as it was.
    CopyOutcome after_source_removed(const std::string& tenant, const CopyOutcome& copy,
                                     std::string_view request_id);

    // §8.1, once the pair `node` → `standby` is recorded: every tenant on `node` attached on
    // `standby`, and its own replica given up once the standby has caught up with it
    // (handed_to_standby; one behind is looked at again); copies on `old_standby`, when the pair
    // had another, deleted. A replaced standby's copies were recorded with the pair as replicas of
    // their own (copied_by_pair), so each stays its tenant's copy until then. The tenants left
    // without a copy.
    std::vector<std::string> paired(const std::string& node, const std::string& standby,
                                    const std::string& old_standby,
                                    const std::vector<std::string>& kept,
                                    std::string_view request_id);
    // Once the pair of `node` is removed: the copies on `old_standby` deleted and, with
    // --replicas, a replica of its own placed for each tenant. The tenants left without one.
    std::vector<std::string> unpaired(const std::string& node, const std::string& old_standby,
                                      const std::vector<std::string>& kept,
                                      std::string_view request_id);
    // §6.3 DELETE of `node`, once the directory forgot it (`before`: the maps with it): the
    // tenants whose copy it kept, each then answering why it has none. Its copies there that
    // follow their primary are deleted, where it answers.
    std::vector<std::string> node_removed(const DirectoryMaps& before, const std::string& node,
                                          std::string_view request_id);

    // §8.3: a repair on the worker, of `region` or of every region. `reason` is logged. A
    // repair asked for while one of the same scope waits is that one. Any thread; never waits.
    void repair(std::string reason, std::optional<std::string> region = std::nullopt);
    // `POST /_shard/replicas`: a repair run now on the caller's thread (one repair runs at a
    // time), giving every tenant without a copy one, whatever --replicas says.
    RepairReport repair_now(const std::optional<std::string>& region, std::string_view request_id);

    // A node answered (a counted grant, a survey, a hello): quotas it owes are sent again on the
    // worker. Cheap when it owes none. Any thread; never waits.
    void node_answered(const std::string& node);
    QuotaSync& quotas() { return quotas_; }
    // A move undone whose thaw did not reach its source (Move::roll_back: the node silent, or its
    // calls cut on its lapsed lease) left that copy frozen, and the node may yet run the freeze
    // its kernel holds. The thaw is owed (the directory's `thaws`, written with the row put back:
    // Directory::put_tenant), and asked again under the move's freeze id each time the node
    // answers (a counted grant, a repair's survey), under the tenant's claim, wherever in this
    // directory the tenant is placed now, `active` (failed over meanwhile, that copy may be made
    // its replica and promoted later), until the node answers it or leaves the directory, or the
    // tenant leaves it. The node refuses that freeze if it reads it after the thaw, and the thaw
    // undoes no other freeze (node-http.md), so nothing another move froze is thawed here. Kept
    // in the directory, a router restarted or a standby promoted asks it as well. owe_thaw: one
    // the directory could not record (its write failed), kept in this process's memory instead.
    // Any thread; never waits.
    void owe_thaw(const OwedThaw& thaw);
    // Every thaw owed, recorded or not, one a node and tenant (GET /_shard/status).
    std::vector<OwedThaw> owed_thaws();

    // Why `tenant` has no copy, or nullopt when it has one or none was wanted.
    std::optional<std::string> unreplicated(const DirectoryMaps& maps,
                                            const TenantRow& tenant) const;
    // Why the last attempt to give `tenant` a copy failed, if it did: cheap, for a list.
    std::optional<std::string> failed(const std::string& tenant) const;
    // Sets fenec_router_replicas{node}, fenec_router_unreplicated_tenants{region} and
    // fenec_router_same_zone_copies{region} from `maps` (every node and region listed).
    void publish_gauges(const DirectoryMaps& maps);

  private:
    // The repair of a tenant whose recorded copy follows it: copies elsewhere that follow its
    // primary with no row naming them, deleted (repair.cc).
    void drop_unrecorded(const TenantRow& tenant, const std::map<std::string, SurveyReply>& survey,
                         RepairReport& report, std::string_view request_id);
    // A primary copy of `tenant` on `node` (not its node) that a failover left there (§9.11),
    // deleted under drop_unrecorded's condition where the router's leases say the node is its.
    // `live`: the survey's word of the tenant's primary on its own node.
    void drop_old_primary(const TenantRow& tenant, const NodeRow& node, const CopyInfo& copy,
                          const CopyInfo& live, RepairReport& report, std::string_view request_id);
    // A look at `tenant` scheduled (RepairSchedule's first step), unless it had
    // catch_up_looks_max in a row: false then.
    bool schedule_look(const std::string& tenant);
    // `tenant` put on the schedule (kept where it is if it is on it already), the worker woken.
    void schedule_silent(const std::string& tenant);
    // A repair's outcome on stderr: `what` ran, and what it attached, failed and left; one
    // that did nothing only when `asked` (POST /_shard/replicas).
    void log_repair(const std::string& what, const RepairReport& r, bool asked);
    struct Scope {
        std::optional<std::string> region;             // none: every region
        std::optional<std::set<std::string>> tenants;  // none: every tenant
        bool asked = false;  // POST /_shard/replicas: a copy for every tenant without one
    };
    NodeCalls& calls();
    // Whether `copy`, told to follow `tenant`, has caught up with `primary`: following it, on
    // its lineage and history, at the primary's durable seq (every write answered is durable),
    // twice, the second seq asked once the first was reached (the copy's stream then past its
    // image, so that every write answered after it waited for the copy), within
    // standby_catch_up_ms_max. False with the reason otherwise.
    bool caught_up(const std::string& tenant, const NodeRow& primary, const NodeRow& copy,
                   std::string_view request_id, std::string& why);
    // A replica of its own placed and attached (Placing says how); `unwanted` nodes are never
    // chosen.
    CopyOutcome place(const std::string& tenant, const std::set<std::string, std::less<>>& holding,
                      std::set<std::string> unwanted, std::string_view request_id,
                      Placing how = {});
    RepairReport run_repair(const Scope& scope, std::string_view request_id);
    // One tenant's part of a repair.
    void repair_tenant(const TenantRow& t, const Scope& scope,
                       const std::map<std::string, SurveyReply>& survey, RepairReport& report,
                       std::string_view request_id);
    void learn_lineage(const TenantRow& t, const std::map<std::string, SurveyReply>& survey);
    bool thaws_owed_by(const std::string& node);
    void thaw_owed(const std::string& node);  // owe_thaw's
    void work();
    bool post(std::string key, std::function<void()> job);
    void remember(const std::string& tenant, std::string why);
    void forget(const std::string& tenant);

    Router& router_;
    QuotaSync quotas_;
    obs::GaugeFamily* replicas_gauge_ = nullptr;      // {node}
    obs::GaugeFamily* unreplicated_gauge_ = nullptr;  // {region}
    obs::GaugeFamily* same_zone_gauge_ = nullptr;     // {region}

    std::mutex thaws_mu_;  // a leaf
    // node → tenant → the freeze ids owed that the directory could not record (owe_thaw)
    std::map<std::string, std::map<std::string, std::set<std::string>>> thaws_owed_;

    mutable std::mutex why_mu_;
    std::map<std::string, std::string> why_;  // tenant → why it has no copy (the last attempt)

    std::mutex repair_mu_;  // one repair at a time, on the worker or an API thread

    std::mutex mu_;  // the worker's queue and schedule
    std::condition_variable wake_;
    std::deque<std::pair<std::string, std::function<void()>>> jobs_;  // key, job
    std::set<std::string> queued_;                                    // keys of the jobs waiting
    RepairSchedule schedule_;
    std::map<std::string, int> catch_up_looks_;  // look_again's count, by tenant (under mu_)
    bool stopping_ = false;
    // Set by stop(): a repair under way ends after the tenant it is on, so a router stopping
    // waits for one node's call at most, not for a whole directory's.
    std::atomic<bool> halt_{false};
    std::thread worker_;
};

// `GET /_shard/pairs` and `POST /_shard/replicas` (§6.2), on an API worker.
http::Response serve_pairs(Router& router, const server::Request& request);
http::Response serve_replicas(Router& router, const server::Request& request,
                              const Router::Answering& a);

}  // namespace fenec::shard
