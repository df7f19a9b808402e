// server/node/registry.h: the tenants of one node (node-http.md §11, seed 003's registry). A tenant
// is one file `<data-dir>/<t>.fenec`; it is opened on first use (on the caller's thread, which is
// a worker, never a loop), shared by every request and stream that holds it, and closed once
// nothing holds it and it has been idle `close_idle_ms`, or sooner, least recently used first,
// while the open tenants' memory passes `memory_max_bytes`.
//
// Invariant: at most one Database per file. A name's slot is locked while its tenant opens or
// closes, and a request for it waits on that lock; the slot leaves the map only after its
// database has closed. A slot taken out of service (take_out: deleting, installing) stays locked
// for as long, and requests for it answer not_found at once rather than wait.
//
// Invariant: a slot holds a tenant exactly while it is on the least-recently-used list, and the
// open count and the open tenants' memory are those of the list (fill and empty keep the three
// together, under mu_). The list runs from the least recently used to the most, and so in order
// of last_used_ms: every use moves a tenant to the newest end, stamped with the clock read under
// mu_. So nothing per open walks every open tenant: the count and the memory are kept, and an
// eviction takes the oldest idle tenant from the old end (issue 18: at 9,456 open tenants the
// walks took over half the node's CPU).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/database.h"
#include "engine/flusher.h"
#include "engine/syncer.h"
#include "server/node/tenant.h"

namespace fenec::node {

// `[a-z0-9_-]{1,64}` (spec README 5).
bool valid_tenant_name(std::string_view name);

struct RegistryOptions {
    std::string data_dir;
    // Required, and outlive the Registry (the node's NodeEnv): every file of the data directory
    // goes through `fs`, each tenant's database included; `clock` is the wall clock of idle
    // times and the engine's clock of each tenant.
    engine::Fs* fs = nullptr;
    const engine::Clock* clock = nullptr;
    engine::SyncPolicy sync = engine::SyncPolicy::every_block();
    int64_t close_idle_ms = 300'000;   // 0: never
    uint64_t memory_max_bytes = 0;     // 0: no bound
    // Open tenants at once, from the node's descriptor budget (Node::prepare): before an open
    // past it the least recently used idle tenant is closed; 0: no bound.
    size_t open_max = 0;
    size_t changes_max = 4096;         // change-ring entries per tenant
    engine::Flusher* flusher = nullptr;
    engine::Syncer* syncer = nullptr;  // every tenant's when_durable (engine/syncer.h)
    // Under --lease the node's LeaseGuard (node-http.md §9.4): asked as every write begins and
    // lands. A create's schema asks none (§9.4): create opens the new file without it and closes
    // it, so the first request opens it again behind the gate.
    const engine::LandingGate* gate = nullptr;
    // After the tenant opened, before it is served. An error fails the open, the file closed:
    // io_error as AcquireError::unavailable (503, tried again at the next use), any other as
    // open_failed.
    std::function<engine::Status(Tenant&)> on_open;
    std::function<void(std::string_view reason)> on_close;  // close_reason_name's
    // An open's vector graphs (engine.md §6.3), counted by how each came to be: `restored` from
    // its record, `caught_up` (restored, the writes since applied), `rebuilt` from the documents.
    std::function<void(std::string_view how, uint64_t graphs)> on_graphs;
    // An open that failed (open_failed, or unavailable for an I/O error; never a refusal for the
    // memory or descriptor budget, which is load, not a failure), with the message a request is
    // answered with. Told once per tenant per failure: not again while the same failure recurs
    // (every request of a damaged file, or each retry once the kept failure lapses), again when
    // the failure changes or after the tenant has opened. Runs under the tenant's slot lock.
    std::function<void(std::string_view tenant, const std::string& why)> on_open_failed;
    uint64_t feed_bytes = 64ull << 20;  // --feed-buffer (engine.md §11)
};

// unavailable: a transient failure of the open, asked again at the next use: an I/O error (out of
// descriptors among them) of the file's stat, its sidecars' or the open itself, or of
// RegistryOptions::on_open.
enum class AcquireError : uint8_t { none, not_found, open_failed, memory, descriptors, unavailable };

struct Acquired {
    std::shared_ptr<Tenant> tenant;
    AcquireError error = AcquireError::none;
    std::string message;  // names the tenant and the failure
};

struct TenantInfo {
    std::string name;
    uint64_t bytes = 0;
    bool open = false;
    bool frozen = false;  // the open tenant's mark, or its `<t>.frozen` sidecar when closed
};

// The sidecars beside `<t>.fenec` (§11): kept across restarts, removed with the tenant.
inline constexpr std::string_view sidecar_quota = ".quota";
inline constexpr std::string_view sidecar_follows = ".follows";
inline constexpr std::string_view sidecar_frozen = ".frozen";

// Why a tenant could not be taken out of service.
enum class TakeOutError : uint8_t { none, busy, in_use };

// How many tenants close_all closes at once: each close of a written tenant is a checkpoint (a
// rewrite and two fsyncs), and fsyncs of different files overlap in the device (as the Syncer's,
// engine::limits::sync_threads).
inline constexpr size_t close_threads = 4;

// Why a tenant closed, as fenec_tenant_closes_total labels it.
enum class CloseReason : uint8_t { idle, memory, shutdown, descriptors, latched };
// "idle", "memory", "shutdown", "descriptors", "latched"
std::string_view close_reason_name(CloseReason r);

// An image's install begun as it arrives (Registry::OutOfService::begin_install): the tenant and
// indexes the database will be opened with, and the engine's install, fed as bytes arrive.
struct BegunInstall {
    std::shared_ptr<Tenant> tenant;
    std::unique_ptr<index::IndexSet> indexes;
    std::unique_ptr<engine::ImageInstall> install;  // destroyed first: its database hooks indexes
    engine::Status feed(uint64_t available) { return install->feed(available); }
};

class Registry {
    struct Slot;

public:
    // A tenant taken out of service (§11's deleting and installing states): its slot stays locked
    // while this lives, so nothing opens, creates or closes it meanwhile, and every new request
    // for it is answered as for an absent tenant (not_found) without waiting. Its database, if it
    // was open, has been closed. Destroyed, the slot goes back into service: the next request
    // opens whatever file is there then (an installed image), or finds none (a delete).
    // Holders: a delete, an image install, a follower replacing its copy with an image, a
    // primary copy told to follow (reopened as a replica). The one way a file takes a tenant's
    // place.
    class OutOfService {
    public:
        ~OutOfService();
        OutOfService(const OutOfService&) = delete;
        OutOfService& operator=(const OutOfService&) = delete;

        const std::string& name() const { return name_; }
        // `<t>.fenec` is on disk.
        bool file_exists() const;
        // Removes `<t>.fenec` and, with `sidecars`, `<t>.quota`, `<t>.follows`, `<t>.frozen`,
        // then fsyncs the directory. The file is renamed to `trash` (`<t>.fenec.deleted`), gone
        // from the tenant's name once the directory is synced; the caller unlinks it after its
        // answer (unlinking a 69 MB file is ~11 ms of the file system freeing its blocks), and
        // a node started after a crash in between removes it (Node::prepare).
        engine::Status remove_files(bool sidecars, std::string& trash);
        // Installs `incoming` (a whole image written and closed by the caller) as `<t>.fenec`:
        // fsynced, verified as the engine opens any file, `check`ed against what the caller was
        // told of it, renamed into place (`create_only`: refused if a file is there) and the
        // directory fsynced. On any failure `incoming` is removed and nothing else changes; a
        // verification failure is `corruption` naming the offset. `info` is the image's.
        engine::Status install(const std::string& incoming, engine::InstallMode mode,
                               const std::function<engine::Status(const engine::ImageInfo&)>& check,
                               engine::ImageInfo& info);
        // As install, from an image held in memory (a PUT's body), and leaves the tenant open
        // and served from the installed file when this goes back into service: the engine
        // verifies the image as it replays it (Database::install_open), so the file is written
        // and fsynced once and never read back, and the first request finds its indexes built.
        // `frozen`: served frozen from the first request (its `<t>.frozen` written by the
        // caller). `owner`: owns `image`, handed to the tenant to keep as its documents' store.
        // `begun`: the install begun as the image arrived (begin_install), which then holds
        // `owner`.
        engine::Status install_open(
            std::span<const std::byte> image, const std::string& incoming, engine::InstallMode mode,
            const std::function<engine::Status(const engine::ImageInfo&)>& check,
            engine::ImageInfo& info, bool frozen = false,
            std::shared_ptr<const std::byte[]> owner = nullptr,
            std::unique_ptr<BegunInstall> begun = nullptr);
        // An install_open begun before `image` (the buffer the body is received into) is whole:
        // the tenant and indexes it opens with are made now, and feed() replays what arrived
        // (engine::ImageInstall) while the rest comes.
        std::unique_ptr<BegunInstall> begin_install(std::span<const std::byte> image,
                                                    std::shared_ptr<const std::byte[]> owner);

      private:
        friend class Registry;
        OutOfService(Registry& registry, std::shared_ptr<Slot> slot,
                     std::unique_lock<std::mutex> lock, std::string name)
            : registry_(registry), slot_(std::move(slot)), lock_(std::move(lock)),
              name_(std::move(name)) {}
        Registry& registry_;
        std::shared_ptr<Slot> slot_;
        std::unique_lock<std::mutex> lock_;  // the slot's mu
        std::string name_;
    };

    // An image being received into memory (a PUT's body, server/node/image.cc), charged to the
    // node's memory as its bytes arrive rather than as its Content-Length declares: counted in
    // memory_bytes() from add() on, so the sweep closes idle tenants to make room for it and an
    // open past memory_max_bytes meanwhile finds it there. Given back when destroyed (an image
    // installed is counted by its tenant from then on; a refused one is freed).
    class ArrivingCharge {
    public:
        explicit ArrivingCharge(Registry& registry) : registry_(registry) {}
        ~ArrivingCharge() { registry_.arriving_bytes_ -= bytes_; }
        ArrivingCharge(const ArrivingCharge&) = delete;
        ArrivingCharge& operator=(const ArrivingCharge&) = delete;
        void add(uint64_t bytes) {
            bytes_ += bytes;
            registry_.arriving_bytes_ += bytes;
        }

    private:
        Registry& registry_;
        uint64_t bytes_ = 0;
    };

    struct TakenOut {
        std::unique_ptr<OutOfService> out;  // null on error
        TakeOutError error = TakeOutError::none;
        std::string message;
        // The tenant that was open, closed: its indexes' memory goes with the last holder, so a
        // caller may keep it until its answer is on its way (a delete's 12-20 ms for a 69 MB
        // @hnsw tenant).
        std::shared_ptr<Tenant> closed;
        // Its database, closed (synced, its descriptor and lock released, the flusher told) but
        // not yet freed: its documents' memory (a 69 MB image's worth) goes when the caller drops
        // it, after its answer. Nothing of it touches the file or the slot any more, so a tenant
        // of the same name may be created or installed while it is being freed.
        std::unique_ptr<engine::Database> closed_db;
    };

    explicit Registry(RegistryOptions options);
    ~Registry();

    // The open tenant, opening it if needed. Blocks while it opens: call from a worker. One
    // out of service (being deleted or installed) is not_found, or, given `wait_out_ms`, waited
    // for up to that long and then acquired as it is after (an install's file, or not_found
    // after a delete); still out then, not_found.
    Acquired acquire(std::string_view name, int64_t wait_out_ms = 0);
    // The tenant if it is open now, else null; never waits on an open or a close (the event
    // loop's point reads).
    std::shared_ptr<Tenant> try_get(std::string_view name);
    // `tenant` used now: its last_used_ms, and its place at the newest end of the eviction
    // order. acquire and try_get touch what they return; a request touches its tenant again as
    // it lets go (idle is counted from then, node-http.md §11). A tenant no longer in its slot
    // is left as it is.
    void touch(Tenant& tenant);
    // Once, as the node starts and before anything is opened: every `<t>.fenec` of the data
    // directory made durable with one sync of its file system (Fs::sync_fs), and each marked
    // with its size then, so its first open skips the engine's own sync (engine.md §6.1 step 5:
    // one device flush per file, 3-18 ms, on a file with nothing to write) while the size is
    // unchanged. The sizes are read before the sync, which covers them; a create or take_out
    // drops a mark, as it drops a closed tenant's. No tenant file: no sync. An error of the
    // listing or the sync marks nothing (every first open syncs, as before) and is returned for
    // the caller to log.
    engine::Status mark_durable_at_start();
    // Creates `<t>.fenec` and lands `schema` (FenecQL statements) as its first blocks before the
    // tenant is served; `run_schema` runs them and answers the failing statement's error.
    // Exists → already_exists; at open_max with every open tenant in use → limit_exceeded.
    // `lineage`: in, the lineage to take (0: a random one); out, the file's.
    engine::Status create(std::string_view name,
                          const std::function<engine::Status(Tenant&)>& run_schema,
                          engine::LineageId& lineage);
    // The tenant files in the data directory, by name. An error (io_error, its errno in the
    // detail: EMFILE at the descriptor limit) when the directory cannot be listed: never an empty
    // or partial list, which a caller would answer as the tenants this node has.
    engine::Result<std::vector<TenantInfo>> list() const;
    // How many tenant files the data directory holds, counted by their names
    // alone: no open tenant's lock is taken, so the event loop may ask (the `fenec_tenants` gauge)
    // while a block holds a tenant's writer lock. The same errors as list().
    engine::Result<size_t> file_count() const;
    // Takes `name` out of service (OutOfService above), whether a file is there or not. If it is
    // open: it is marked leaving and `leave` is called with it (end its streams, wake its held
    // requests so they answer), again every leave_repeat_ms, until the registry holds the only
    // reference; then it is closed. A rewrite of its file in progress (a compaction, a
    // checkpoint) is cancelled each time too (engine::Database::cancel_rewrite), so it lets go
    // within a step rather than at its end. Past `wait_ms` with references left → in_use, the
    // tenant still open and served. Another holder already has it out → busy. Blocks: call from a
    // worker.
    TakenOut take_out(std::string_view name, int64_t wait_ms,
                      const std::function<void(Tenant&)>& leave);
    // `<t>.fenec` is on disk: one stat, cheap enough for a loop's head check (§8.3's 409 before
    // the body).
    bool file_exists(std::string_view name) const;
    // A sidecar of `name` is there (`.follows`, `.frozen`); one that cannot be asked about is
    // taken as absent (a listing, a create): never to open a tenant, which asks sidecar_there.
    bool has_sidecar(std::string_view name, std::string_view suffix) const;
    // Whether it is there, or the error that kept it from being known.
    engine::Result<bool> sidecar_there(std::string_view name, std::string_view suffix) const;
    // `<data-dir>/<t><suffix>`: a sidecar's path.
    std::string sidecar_of(std::string_view name, std::string_view suffix) const;
    // Closes idle tenants (and, past the memory bound, the least recently used idle ones). The
    // node calls it once a second.
    // A tenant latched read-only by a failed write (INVARIANTS I5) and held by nothing is closed
    // here too, whatever its idle time: only a reopen clears the latch, and the next request
    // makes it (node-http.md §5.8); one latched again soon after waits longer each time
    // (LatchBackoff). Answers the latched ones left open, held: the node ends what
    // holds them for good (Node::tick), a follower's stream or a subscriber, so the next sweep
    // closes them.
    // `followed`: whether a copy's follower runs, which reopens a latched copy itself
    // (Follower::run); such a copy is not taken out of its slot here.
    std::vector<std::string> sweep(const std::function<bool(std::string_view)>& followed = {});
    // How long until `name`, latched now, is opened again at the latest: what is left of its
    // latch's wait (LatchBackoff), or the wait the next sweep will give it, and two sweeps'
    // periods (a held tenant is closed at the second). What a write refused `latched` is told to
    // wait (Retry-After).
    int64_t latch_wait_left_ms(std::string_view name) const;
    static constexpr int64_t sweep_period_ms = 1'000;  // Node::tick's
    // Syncs, checkpoints and closes every open tenant (SIGTERM), close_threads at once.
    void close_all();

    // The open tenants' memory, with what tenants being opened and images arriving are charged:
    // kept as it changes (Tenant::charge_memory_to), read without a walk.
    uint64_t memory_bytes() const;
    // The open tenant a background compaction should rewrite next (compactor.h): the one with
    // the most dead bytes among those whose file holds at least `file_bytes_min` bytes, at least
    // `dead_share_min` of them dead or a graph left stale for a rewrite to write
    // (engine::Usage::graphs_deferred). Only a tenant in service, not frozen (its file may be read
    // as its image), not latched, and whose live image fits under memory_max_bytes beside the
    // open tenants (a rewrite holds it in memory), and not one `skip` names. Null when none. The
    // reference keeps it open.
    std::shared_ptr<Tenant> compaction_candidate(
        double dead_share_min, uint64_t file_bytes_min,
        const std::function<bool(const std::string&)>& skip) const;
    size_t open_count() const;
    uint64_t opens() const { return opens_; }
    uint64_t closes(CloseReason r) const { return closes_[static_cast<int>(r)]; }
    std::string path_of(std::string_view name) const;

private:
    // A walk over the open tenants (sweep, the compactor) takes their slots, and one tenant at a
    // time from in_service: a walk is not a use (evict_one closes a tenant only when the slot's
    // reference is the last one).
    std::vector<std::shared_ptr<Slot>> open_slots() const;
    std::shared_ptr<Tenant> in_service(const Slot& slot) const;
    // Lock order: a slot's mu, then mu_. `tenant` changes under both, so it may be read under
    // either; only through fill and empty, which keep the list, the count and the memory.
    struct Slot : std::enable_shared_from_this<Slot> {
        explicit Slot(std::string_view slot_name) : name(slot_name) {}
        const std::string name;           // its key in slots_
        std::mutex mu;                    // held while the tenant opens or closes
        std::shared_ptr<Tenant> tenant;   // null: not open (or failed)
        bool dead = false;                // closed and leaving the map: look again
        bool out = false;                 // out of service (under both locks): new requests 404
        int64_t failed_ms = 0;            // an open failure kept 10 s
        std::string failure;
        // The failure last told to on_open_failed ("": none since the tenant last opened).
        std::string told;
        // On the least-recently-used list while `tenant` is set (under mu_).
        Slot* older = nullptr;
        Slot* newer = nullptr;
    };
    // Under mu_. fill: `tenant` into the slot, at the newest end of the list, counted, its
    // memory charged. empty: out of the slot and all three; returns it (null if none).
    void fill(Slot& slot, std::shared_ptr<Tenant> tenant);
    std::shared_ptr<Tenant> empty(Slot& slot);
    void touch_locked(Slot& slot);  // last_used_ms now, moved to the newest end
    void lru_unlink(Slot& slot);
    void lru_push_newest(Slot& slot);
    // Under mu_: the slot of `name`, made if there is none.
    std::shared_ptr<Slot> slot_of(std::string_view name);

    Acquired open_locked(Slot& slot, std::string_view name);
    // Under slot.mu: an open that failed with `why`. open_failed is kept in the slot for
    // open_failure_kept_ms; either kind is told to on_open_failed unless it was the last told.
    Acquired open_failed_locked(Slot& slot, AcquireError error, std::string why, int64_t now);
    bool room_for_one_more(int64_t now);
    // RegistryOptions::on_open on a tenant just attached; on an error its file is closed.
    engine::Status run_on_open(Tenant& tenant);
    // Tells on_graphs how the freshly opened `tenant`'s vector graphs came to be.
    void count_graphs(Tenant& tenant) const;
    // `follows`: whether `<t>.follows` is there, when the caller asked already (else asked
    // here, an error taken as absent).
    engine::OpenOptions open_options(std::string_view name, Tenant& tenant,
                                     index::IndexSet& indexes, bool gated = true,
                                     std::optional<bool> follows = std::nullopt) const;
    // `checkpoint` for a tenant that stays on disk (idle, memory, shutdown: it reopens faster);
    // `plain` for one taken out of service, whose file is about to be deleted or replaced.
    // A tenant closed with `checkpoint` and nothing landed since it opened is closed plain (its
    // file is as its open found it); one closed so, synced and healthy, is marked durable.
    void close_tenant(const std::shared_ptr<Tenant>& t,
                      engine::CloseMode mode = engine::CloseMode::checkpoint);
    // Whether `name` was marked durable at its close with a file of `file_bytes` (its size now);
    // the mark is taken either way (one open uses it).
    bool take_closed_durable(std::string_view name, uint64_t file_bytes);
    // Both marks of `name` dropped: its file is about to be made or replaced. Under mu_.
    void drop_durable_marks(std::string_view name);
    void back_in_service(Slot& slot, const std::string& name);
    bool evict_one(CloseReason reason, int64_t now, bool idle_only_past_timeout);
    // Closes `victim`'s tenant if nothing holds it (false when none was open); under its lock.
    bool close_slot(const std::shared_ptr<Slot>& victim, CloseReason reason);
    // After its tenant's close, with its lock held: `slot` dead and out of the map (a request
    // waiting on it opens the file anew), the close counted and told.
    void retire(const std::shared_ptr<Slot>& slot, CloseReason reason);
    // The sweep's latched tenants that requests hold (a steady read, a held one): each taken out
    // of its slot so none is taken again, closed once its holders let go within
    // latched_drain_wait_ms, else put back. Answers those left open.
    std::vector<std::shared_ptr<Slot>> close_latched_held(
        const std::vector<std::shared_ptr<Slot>>& slots);
    static constexpr int64_t latched_drain_wait_ms = 200;
    int64_t now_ms() const { return options_.clock->wall_ms(); }

    // A latch found by the sweep is closed at once the first time; one found again soon after its
    // reopen (a disk that stays full fails the next write the same way) waits longer each time
    // before its close (latch_backoff_first_ms, doubling up to latch_backoff_max_ms), so a tenant
    // is not replayed once a second for nothing: reads go on meanwhile. A tenant not latched for
    // latch_backoff_reset_ms since its last latched close starts again at once.
    struct LatchBackoff {
        int64_t delay_ms = 0;   // how long a latch found now is left before its close
        int64_t seen_ms = 0;    // when the sweep first found the present latch; 0: none
        int64_t closed_ms = 0;  // the last latched close
    };
    static constexpr int64_t latch_backoff_first_ms = 2'000;
    static constexpr int64_t latch_backoff_max_ms = 60'000;
    static constexpr int64_t latch_backoff_reset_ms = 120'000;
    // Whether `name`'s latch, found at `now`, is due its close (noting when it was first found,
    // and then how long it waits).
    bool latch_due(const std::string& name, int64_t now);
    // `name`'s latched tenant was closed at `now`: a latch found soon after waits longer.
    void latch_closed(const std::string& name, int64_t now);

    RegistryOptions options_;
    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<Slot>, std::less<>> slots_;
    Slot* oldest_ = nullptr;  // the least-recently-used list's ends (under mu_)
    Slot* newest_ = nullptr;
    size_t open_ = 0;  // tenants on the list, and any close_latched_held has out (under mu_)
    std::map<std::string, LatchBackoff, std::less<>> latch_backoff_;  // (under mu_)
    std::atomic<uint64_t> open_memory_bytes_{0};  // their memory (Tenant::charge_memory_to)
    std::atomic<uint64_t> opens_{0};
    std::atomic<uint64_t> opening_bytes_{0};  // twice the file of each tenant being opened (§11)
    std::atomic<uint64_t> arriving_bytes_{0};  // images received into memory so far (ArrivingCharge)
    std::atomic<uint64_t> closes_[5] = {};
    // Tenants this process closed after a sync, by name: the file's size then. Every byte of such
    // a file is durable while its size is unchanged (only this node writes its data directory,
    // and a file replaced goes through take_out or create, which drop the mark), so its next open
    // skips the engine's sync (OpenOptions::file_durable). Under mu_.
    std::map<std::string, uint64_t, std::less<>> closed_durable_;
    // The files synced at start (mark_durable_at_start), by a hash of the name, sorted, with
    // their sizes then; an open or a drop takes a mark by setting its size to no_mark. 16 bytes
    // a tenant and never grown, where a map of names would hold ~100 (10 MB at 100,000 tenants).
    // Two names of one hash share a mark: a drop of one drops both (a sync more), and a file
    // there at start is durable whichever of the two sizes it is checked against. Under mu_.
    static constexpr uint64_t no_mark = UINT64_MAX;
    std::vector<std::pair<uint64_t, uint64_t>> started_durable_;
};

}  // namespace fenec::node
