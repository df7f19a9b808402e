// server/node/registry.cc: opening on first use, closing when idle or past the memory bound.
#include "server/node/registry.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/io.h"
#include "index/hnsw_index.h"

namespace fenec::node {

namespace {

constexpr int64_t open_failure_kept_ms = 10'000;  // §11: a damaged file is not reread per request
// While a tenant is taken out of service: how often the references left are counted, and how
// often `leave` is asked again (a stream or held request that arrived between two asks).
constexpr int64_t take_out_poll_ms = 5;
constexpr int64_t leave_repeat_ms = 250;
// Closed-durable marks kept (Registry::closed_durable_): about 100 bytes each, so at most ~100 MB
// for a million tenants closed; past it a closed tenant's next open syncs its file as before.
constexpr size_t closed_durable_max = 1 << 20;

}  // namespace

bool valid_tenant_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
}

namespace {

// The tenant a file of the data directory holds (`<t>.fenec`, a valid name), or nullopt.
std::optional<std::string_view> tenant_of_file(std::string_view file) {
    constexpr std::string_view suffix = ".fenec";
    if (!file.ends_with(suffix)) return std::nullopt;
    const std::string_view name = file.substr(0, file.size() - suffix.size());
    if (!valid_tenant_name(name)) return std::nullopt;
    return name;
}

}  // namespace

Registry::Registry(RegistryOptions options) : options_(std::move(options)) {}

Registry::~Registry() { close_all(); }

std::string Registry::path_of(std::string_view name) const {
    return options_.data_dir + "/" + std::string(name) + ".fenec";
}

std::string_view close_reason_name(CloseReason r) {
    switch (r) {
        case CloseReason::idle: return "idle";
        case CloseReason::memory: return "memory";
        case CloseReason::shutdown: return "shutdown";
        case CloseReason::descriptors: return "descriptors";
        case CloseReason::latched:
            return "latched";
    }
    return "idle";
}

// Room for one more open tenant under open_max (the descriptor budget): the least recently used
// idle ones closed until there is. False when every open tenant is in use. Opens racing each
// other may each pass at the bound: at most one over per worker, which the budget's reserve
// covers (Node::prepare).
bool Registry::room_for_one_more(int64_t now) {
    if (!options_.open_max) return true;
    while (open_count() >= options_.open_max) {
        if (!evict_one(CloseReason::descriptors, now, false)) return false;
    }
    return true;
}

std::shared_ptr<Registry::Slot> Registry::slot_of(std::string_view name) {
    auto it = slots_.find(name);
    if (it == slots_.end()) {
        it = slots_.emplace(std::string(name), std::make_shared<Slot>(name)).first;
    }
    return it->second;
}

Acquired Registry::acquire(std::string_view name, int64_t wait_out_ms) {
    const auto wait_until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_out_ms);
    for (;;) {
        std::shared_ptr<Slot> slot;
        bool out = false;
        {
            std::lock_guard lock(mu_);
            slot = slot_of(name);
            out = slot->out;
            // Being deleted or installed: absent until it is back (§8.1, §8.3).
            if (out && std::chrono::steady_clock::now() >= wait_until) {
                return Acquired{nullptr, AcquireError::not_found,
                                "tenant `" + std::string(name) + "` not found"};
            }
            // The use, taken now: one found open is returned below unless it closes meanwhile,
            // and then this slot is dead and a new one opens, at the newest end as it fills.
            if (!out && slot->tenant) touch_locked(*slot);
        }
        if (out) {  // looked at again shortly: an install ends in a few seconds at most
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
        }
        std::lock_guard slot_lock(slot->mu);
        if (slot->dead) continue;  // closed while we waited: take the new slot
        if (slot->out) {
            return Acquired{nullptr, AcquireError::not_found,
                            "tenant `" + std::string(name) + "` not found"};
        }
        if (slot->tenant) return Acquired{slot->tenant, AcquireError::none, {}};
        Acquired a = open_locked(*slot, name);
        if (!a.tenant) {
            // Leave no slot behind for a name that has no file.
            if (a.error == AcquireError::not_found) {
                std::lock_guard lock(mu_);
                slot->dead = true;
                auto it = slots_.find(name);
                if (it != slots_.end() && it->second == slot) slots_.erase(it);
            }
        }
        return a;
    }
}

// How every tenant's file is opened: the node's sync policy and flusher, its indexes as the hook
// and the tenant itself told of each landed block.
engine::OpenOptions Registry::open_options(std::string_view name, Tenant& tenant,
                                           index::IndexSet& indexes, bool gated,
                                           std::optional<bool> follows) const {
    engine::OpenOptions o;
    o.fs = options_.fs;
    o.clock = options_.clock;
    o.tenant = std::string(name);
    o.sync = options_.sync;
    o.hook = &indexes;
    o.listener = &tenant;
    o.flusher = options_.flusher;
    o.syncer = options_.syncer;
    if (gated) o.gate = options_.gate;
    o.feed_bytes = options_.feed_bytes;
    // A copy with a `<t>.follows` is a replica (node-http.md §10.1): opened as a follower.
    if (follows ? *follows : has_sidecar(name, sidecar_follows)) o.role = engine::Role::follower;
    return o;
}

std::shared_ptr<Tenant> Registry::try_get(std::string_view name) {
    std::lock_guard lock(mu_);  // slot tenants may be read under mu_ (registry.h)
    auto it = slots_.find(name);
    if (it == slots_.end() || it->second->dead || it->second->out) return nullptr;
    if (it->second->tenant) touch_locked(*it->second);
    return it->second->tenant;
}

void Registry::touch(Tenant& tenant) {
    std::lock_guard lock(mu_);
    auto it = slots_.find(tenant.name());
    if (it != slots_.end() && it->second->tenant.get() == &tenant) touch_locked(*it->second);
}

void Registry::touch_locked(Slot& slot) {
    slot.tenant->last_used_ms = now_ms();
    if (newest_ == &slot) return;
    lru_unlink(slot);
    lru_push_newest(slot);
}

void Registry::lru_unlink(Slot& slot) {
    (slot.older ? slot.older->newer : oldest_) = slot.newer;
    (slot.newer ? slot.newer->older : newest_) = slot.older;
    slot.older = slot.newer = nullptr;
}

void Registry::lru_push_newest(Slot& slot) {
    slot.older = newest_;
    slot.newer = nullptr;
    (newest_ ? newest_->newer : oldest_) = &slot;
    newest_ = &slot;
}

void Registry::fill(Slot& slot, std::shared_ptr<Tenant> tenant) {
    slot.tenant = std::move(tenant);
    slot.tenant->last_used_ms = now_ms();
    lru_push_newest(slot);
    ++open_;
    slot.tenant->charge_memory_to(&open_memory_bytes_);
}

std::shared_ptr<Tenant> Registry::empty(Slot& slot) {
    if (!slot.tenant) return nullptr;
    slot.tenant->charge_memory_to(nullptr);
    lru_unlink(slot);
    --open_;
    return std::move(slot.tenant);
}

Acquired Registry::open_locked(Slot& slot, std::string_view name) {
    const int64_t now = now_ms();
    if (!slot.failure.empty() && now - slot.failed_ms < open_failure_kept_ms) {
        return Acquired{nullptr, AcquireError::open_failed, slot.failure};
    }
    const std::string path = path_of(name);
    auto size = options_.fs->file_size(path);
    if (!size.is_ok()) {
        if (size.status().code() == engine::Code::not_found) {
            return Acquired{nullptr, AcquireError::not_found,
                            "tenant `" + std::string(name) + "` not found"};
        }
        return open_failed_locked(  // asked again next time
            slot, AcquireError::unavailable,
            "tenant `" + std::string(name) + "` cannot be opened: " + size.status().to_string(),
            now);
    }
    // What it was given beside its file: a replica opens a follower, a frozen tenant frozen. A
    // mark that cannot be asked about (an I/O error, out of descriptors) is not taken as absent:
    // the replica would take writes as a primary, the frozen tenant as a thawed one.
    engine::Result<bool> follows = sidecar_there(name, sidecar_follows);
    engine::Result<bool> frozen = follows.is_ok() ? sidecar_there(name, sidecar_frozen) : follows;
    if (!frozen.is_ok()) {
        return open_failed_locked(
            slot, AcquireError::unavailable,
            "tenant `" + std::string(name) + "` cannot be opened: " + frozen.status().to_string(),
            now);
    }
    const uint64_t file_bytes = *size;
    // One being opened counts twice its file until open (§11): reserved before the bound is
    // asked, so opens racing each other see each other.
    opening_bytes_ += 2 * file_bytes;
    if (options_.memory_max_bytes) {
        while (memory_bytes() > options_.memory_max_bytes) {
            if (!evict_one(CloseReason::memory, now, false)) {
                opening_bytes_ -= 2 * file_bytes;
                return Acquired{nullptr, AcquireError::memory,
                                "the node's memory is full: tenant `" + std::string(name) +
                                    "` cannot be opened now"};
            }
        }
    }
    if (!room_for_one_more(now)) {
        opening_bytes_ -= 2 * file_bytes;
        return Acquired{nullptr, AcquireError::descriptors,
                        "every open tenant is in use and the node is at its descriptor budget: "
                        "tenant `" +
                            std::string(name) + "` cannot be opened now"};
    }
    auto tenant = Tenant::make(std::string(name), options_.changes_max);
    auto indexes = std::make_unique<index::IndexSet>();
    engine::OpenOptions oo = open_options(name, *tenant, *indexes, true, *follows);
    oo.file_durable = take_closed_durable(name, file_bytes);
    auto db = engine::Database::open(path, oo);
    opening_bytes_ -= 2 * file_bytes;
    if (!db.is_ok()) {
        if (db.status().code() == engine::Code::not_found) {
            return Acquired{nullptr, AcquireError::not_found,
                            "tenant `" + std::string(name) + "` not found"};
        }
        const std::string why =
            "tenant `" + std::string(name) + "` cannot be opened: " + db.status().to_string();
        if (db.status().code() == engine::Code::io_error) {
            // Out of descriptors, a failed read or fsync: not the file's fault, asked again next
            // time rather than refused for open_failure_kept_ms.
            return open_failed_locked(slot, AcquireError::unavailable, why, now);
        }
        return open_failed_locked(slot, AcquireError::open_failed, why, now);
    }
    // A tenant frozen before a restart opens frozen (§8.2: the mark is `<t>.frozen`).
    if (*frozen) (void)(*db)->freeze();
    tenant->attach(std::move(indexes), std::move(db.value()));
    if (engine::Status st = run_on_open(*tenant); !st.is_ok()) {
        const std::string why =
            "tenant `" + std::string(name) + "` cannot be opened: " + st.to_string();
        if (st.code() == engine::Code::io_error) {  // asked again next time
            return open_failed_locked(slot, AcquireError::unavailable, why, now);
        }
        return open_failed_locked(slot, AcquireError::open_failed, why, now);
    }
    tenant->refresh_memory();
    slot.failure.clear();
    slot.told.clear();  // opened: a later failure of it is news again
    {
        std::lock_guard lock(mu_);  // slot tenants change under both locks (registry.h)
        fill(slot, tenant);
    }
    ++opens_;
    count_graphs(*tenant);
    return Acquired{tenant, AcquireError::none, {}};
}

Acquired Registry::open_failed_locked(Slot& slot, AcquireError error, std::string why,
                                      int64_t now) {
    if (error == AcquireError::open_failed) {
        slot.failed_ms = now;
        slot.failure = why;
    }
    // A damaged file is asked for by every request and opened again each time its kept failure
    // lapses: an operator is told the failure once, not once per request or per retry.
    if (options_.on_open_failed && slot.told != why) {
        slot.told = why;
        options_.on_open_failed(slot.name, why);
    }
    return Acquired{nullptr, error, std::move(why)};
}

void Registry::count_graphs(Tenant& tenant) const {
    if (!options_.on_graphs) return;
    // The index set is the open's own (made fresh for it): its counts are this open's.
    const index::VectorIndexStats& s = tenant.indexes().vectors().stats();
    if (s.restored > s.caught_up) options_.on_graphs("restored", s.restored - s.caught_up);
    if (s.caught_up > 0) options_.on_graphs("caught_up", s.caught_up);
    if (s.graphs_rebuilt > 0) options_.on_graphs("rebuilt", s.graphs_rebuilt);
}

engine::Status Registry::run_on_open(Tenant& tenant) {
    if (!options_.on_open) return engine::Status::ok();
    engine::Status st = options_.on_open(tenant);
    if (!st.is_ok()) {
        // Never served: closed at once, so nothing runs on it without what on_open gives it.
        std::unique_ptr<engine::Database> d = tenant.detach_db();
        (void)d->close();
    }
    return st;
}

engine::Status Registry::create(std::string_view name,
                                const std::function<engine::Status(Tenant&)>& run_schema,
                                engine::LineageId& lineage) {
    std::shared_ptr<Slot> slot;
    std::unique_lock<std::mutex> slot_lock;
    for (;;) {  // as acquire: a slot that died while we waited is replaced by a new one
        {
            std::lock_guard lock(mu_);
            slot = slot_of(name);
        }
        slot_lock = std::unique_lock(slot->mu);
        if (!slot->dead) break;
        slot_lock.unlock();
    }
    const std::string path = path_of(name);
    {
        std::lock_guard lock(mu_);
        drop_durable_marks(name);
    }
    if (slot->tenant || file_exists(name)) {
        return engine::Status::error(engine::Code::already_exists,
                                     "tenant `" + std::string(name) + "` exists");
    }
    if (!room_for_one_more(now_ms())) {
        return engine::Status::error(engine::Code::limit_exceeded,
                                     "every open tenant is in use and the node is at its "
                                     "descriptor budget: tenant `" +
                                         std::string(name) + "` cannot be created now");
    }
    auto tenant = Tenant::make(std::string(name), options_.changes_max);
    auto indexes = std::make_unique<index::IndexSet>();
    engine::OpenOptions oo = open_options(name, *tenant, *indexes, false);
    oo.lineage = lineage;
    auto db = engine::Database::create(path, oo);
    if (!db.is_ok()) return db.status();
    lineage = (*db)->lineage();
    tenant->attach(std::move(indexes), std::move(db.value()));
    // A schema refused or not kept: the file never served, and goes (Database::create removes
    // one that failed before it opened).
    auto unmade = [&](engine::Status st) {
        std::unique_ptr<engine::Database> d = tenant->detach_db();
        (void)d->close();
        d.reset();
        engine::remove_durably(*options_.fs, path).ignore();
        return st;
    };
    if (engine::Status st = run_schema(*tenant); !st.is_ok()) return unmade(st);
    if (engine::Status st = tenant->db().sync(); !st.is_ok()) return unmade(st);
    if (options_.gate) {
        // Opened without the gate for its schema: closed, to be opened behind it on first use.
        std::unique_ptr<engine::Database> d = tenant->detach_db();
        return d->close();
    }
    if (engine::Status st = run_on_open(*tenant); !st.is_ok()) {
        // Closed already (a quota a deleted file of the name left could not be read): never
        // served without it, so not created either; left, the same create would be refused.
        engine::remove_durably(*options_.fs, path).ignore();
        return st;
    }
    tenant->refresh_memory();
    {
        std::lock_guard lock(mu_);
        fill(*slot, tenant);
    }
    ++opens_;
    return engine::Status::ok();
}

engine::Result<size_t> Registry::file_count() const {
    auto files = options_.fs->list(options_.data_dir);
    if (!files.is_ok()) return files.status();
    size_t n = 0;
    for (const std::string& file : *files) {
        n += tenant_of_file(file).has_value();
    }
    return n;
}

engine::Result<std::vector<TenantInfo>> Registry::list() const {
    std::vector<TenantInfo> out;
    // The data directory the node created and locked, so a failure is the process's (out of
    // descriptors: opendir needs one) or the disk's, never "no tenants".
    auto files = options_.fs->list(options_.data_dir);
    if (!files.is_ok()) return files.status();
    for (const std::string& file : *files) {
        const std::optional<std::string_view> tenant = tenant_of_file(file);
        if (!tenant) continue;
        std::string name(*tenant);
        auto size = options_.fs->file_size(path_of(name));
        if (!size.is_ok()) continue;  // removed since it was listed
        TenantInfo info{name, *size, false, false};
        std::shared_ptr<Tenant> open;
        {
            std::lock_guard lock(mu_);
            auto it = slots_.find(name);
            if (it != slots_.end() && !it->second->out) open = it->second->tenant;
        }
        // Holding the reference keeps it from closing while its mark is read (evict_one and
        // take_out close a tenant only when the registry's is the last one).
        info.open = open != nullptr;
        info.frozen = open ? open->db().frozen() : has_sidecar(name, sidecar_frozen);
        // An open file may hold room past its records (File::keep_room): its records' bytes.
        if (open) info.bytes = open->db().usage().file_bytes;
        open.reset();
        out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(),
              [](const TenantInfo& a, const TenantInfo& b) { return a.name < b.name; });
    return out;
}

bool Registry::file_exists(std::string_view name) const {
    auto there = options_.fs->exists(path_of(name));
    return there.is_ok() && *there;
}

bool Registry::has_sidecar(std::string_view name, std::string_view suffix) const {
    auto there = sidecar_there(name, suffix);
    return there.is_ok() && *there;
}

engine::Result<bool> Registry::sidecar_there(std::string_view name, std::string_view suffix) const {
    return options_.fs->exists(sidecar_of(name, suffix));
}

std::string Registry::sidecar_of(std::string_view name, std::string_view suffix) const {
    return options_.data_dir + "/" + std::string(name) + std::string(suffix);
}

Registry::TakenOut Registry::take_out(std::string_view name, int64_t wait_ms,
                                      const std::function<void(Tenant&)>& leave) {
    std::shared_ptr<Slot> slot;
    std::unique_lock<std::mutex> slot_lock;
    for (;;) {  // as create: a slot that died while we waited is replaced by a new one
        {
            std::lock_guard lock(mu_);
            slot = slot_of(name);
            if (slot->out) {
                return TakenOut{nullptr, TakeOutError::busy,
                                "tenant `" + std::string(name) + "` is being deleted or installed",
                                nullptr, nullptr};
            }
        }
        slot_lock = std::unique_lock(slot->mu);
        if (!slot->dead) break;
        slot_lock.unlock();
    }
    std::shared_ptr<Tenant> tenant;
    {
        std::lock_guard lock(mu_);
        if (slot->out) {  // another took it out while we waited for the slot
            return TakenOut{nullptr, TakeOutError::busy,
                            "tenant `" + std::string(name) + "` is being deleted or installed",
                            nullptr, nullptr};
        }
        slot->out = true;
        tenant = slot->tenant;
        drop_durable_marks(name);  // whatever comes back is another file
    }
    auto out = std::unique_ptr<OutOfService>(
        new OutOfService(*this, slot, std::move(slot_lock), std::string(name)));
    if (!tenant) return TakenOut{std::move(out), TakeOutError::none, {}, nullptr, nullptr};
    tenant->leaving = true;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed_ms = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
            .count();
    };
    int64_t asked_ms = -leave_repeat_ms;
    // Two references are ours (the slot's and `tenant`); any other is a request, a stream, a
    // held request or a follower still on it.
    while (tenant.use_count() > 2) {
        const int64_t now = elapsed_ms();
        if (now >= wait_ms) {
            tenant->leaving = false;
            tenant.reset();
            {
                std::lock_guard lock(mu_);
                slot->out = false;  // still served: nothing was removed
            }
            out.reset();
            return TakenOut{nullptr, TakeOutError::in_use,
                            "tenant `" + std::string(name) + "` still in use after " +
                                std::to_string(wait_ms / 1000) + " s",
                            nullptr, nullptr};
        }
        if (now - asked_ms >= leave_repeat_ms) {
            // A compaction or checkpoint holding it would only replace a file that is leaving.
            tenant->db().cancel_rewrite();
            if (leave) leave(*tenant);
            asked_ms = now;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(take_out_poll_ms));
    }
    {
        std::lock_guard lock(mu_);  // out of the slot first: from here nobody can take a reference
        (void)empty(*slot);  // `tenant` holds it still
    }
    // Plain, no checkpoint: a tenant taken out is deleted or replaced next, so rewriting its file
    // (an image build, a write and an fsync of the whole file: ~0.5 s for 69 MB) is wasted. Plain
    // still syncs what landed and closes the descriptor before this returns, so nothing of the
    // old file is written after it is removed, and a file that stays (a refused install, a
    // failed remove) is whole, its log replayed on the next open as after any plain close.
    std::unique_ptr<engine::Database> db = tenant->detach_db();
    if (db) (void)db->close(engine::CloseMode::plain);
    return TakenOut{std::move(out), TakeOutError::none, {}, std::move(tenant), std::move(db)};
}

void Registry::back_in_service(Slot& slot, const std::string& name) {
    std::lock_guard lock(mu_);
    slot.out = false;
    if (slot.tenant) return;  // never closed (in use): served as before
    // Closed: the slot leaves the map, and the next request opens whatever file is there now.
    slot.dead = true;
    auto it = slots_.find(name);
    if (it != slots_.end() && it->second.get() == &slot) slots_.erase(it);
}

Registry::OutOfService::~OutOfService() {
    registry_.back_in_service(*slot_, name_);
}

bool Registry::OutOfService::file_exists() const { return registry_.file_exists(name_); }

engine::Status Registry::OutOfService::remove_files(bool sidecars, std::string& trash) {
    engine::Fs& fs = *registry_.options_.fs;
    const std::string path = registry_.path_of(name_);
    trash = path + ".deleted";
    if (engine::Status st = fs.rename(path, trash, true); !st.is_ok()) {
        trash.clear();
        if (st.code() != engine::Code::not_found) return st;
    }
    if (sidecars) {
        for (std::string_view s : {sidecar_quota, sidecar_follows, sidecar_frozen}) {
            engine::Status st = fs.remove(registry_.sidecar_of(name_, s));
            if (!st.is_ok() && st.code() != engine::Code::not_found) return st;
        }
    }
    return fs.sync_dir(registry_.options_.data_dir);
}

engine::Status Registry::OutOfService::install(
    const std::string& incoming, engine::InstallMode mode,
    const std::function<engine::Status(const engine::ImageInfo&)>& check, engine::ImageInfo& info) {
    engine::Fs& fs = *registry_.options_.fs;
    auto fail = [&](engine::Status st) {
        fs.remove(incoming).ignore();
        return st;
    };
    {
        auto f = fs.open(incoming, engine::OpenMode::read_write);
        if (!f.is_ok()) return fail(f.status());
        if (engine::Status st = (*f)->sync(); !st.is_ok()) return fail(st);
    }
    // engine::Database::install_image's steps, with the caller's check between the verification
    // and the rename (the image's seq and lineage against the headers that came with it).
    auto verified = engine::Database::verify_image(fs, incoming);
    if (!verified.is_ok()) return fail(verified.status());
    info = *verified;
    if (check) {
        if (engine::Status st = check(info); !st.is_ok()) return fail(st);
    }
    const std::string target = registry_.path_of(name_);
    if (engine::Status st = fs.rename(incoming, target, mode == engine::InstallMode::replace);
        !st.is_ok()) {
        return fail(st);
    }
    engine::Status st = fs.sync_dir(registry_.options_.data_dir);
    // Refused once in place: a create_only install leaves no file, or the tenant would be served
    // after all and the same install answered already_exists (as engine::Database::install_open).
    if (!st.is_ok() && mode == engine::InstallMode::create_only) {
        engine::remove_durably(fs, target).ignore();
    }
    return st;
}

engine::Status Registry::OutOfService::install_open(
    std::span<const std::byte> image, const std::string& incoming, engine::InstallMode mode,
    const std::function<engine::Status(const engine::ImageInfo&)>& check, engine::ImageInfo& info,
    bool frozen, std::shared_ptr<const std::byte[]> owner, std::unique_ptr<BegunInstall> begun) {
    Registry& r = registry_;
    std::shared_ptr<Tenant> tenant;
    std::unique_ptr<index::IndexSet> indexes;
    std::unique_ptr<engine::ImageInstall> install;
    if (begun) {
        tenant = std::move(begun->tenant);
        indexes = std::move(begun->indexes);
        install = std::move(begun->install);
    } else {
        tenant = Tenant::make(name_, r.options_.changes_max);
        indexes = std::make_unique<index::IndexSet>();
    }
    auto db = engine::Database::install_open(image, incoming, r.path_of(name_), mode,
                                             r.open_options(name_, *tenant, *indexes), check, info,
                                             std::move(owner), std::move(install));
    if (!db.is_ok()) return db.status();
    // Installed thawed (§8.3), the caller removing any `<t>.frozen` left behind; or frozen where
    // it was asked (the caller wrote the mark), before anything can be served from it.
    if (frozen) {
        if (engine::Status st = db.value()->freeze(); !st.is_ok()) {
            db.value().reset();  // closed; not served unfrozen, so not installed either
            if (mode == engine::InstallMode::create_only) {
                engine::remove_durably(*r.options_.fs, r.path_of(name_)).ignore();
            }
            return st;
        }
    }
    tenant->attach(std::move(indexes), std::move(db.value()));
    if (engine::Status st = r.run_on_open(*tenant); !st.is_ok()) {
        // Its quota unread: never served without it, so not installed either (closed already);
        // left in place, the next request would open it and the same install be refused.
        if (mode == engine::InstallMode::create_only) {
            engine::remove_durably(*r.options_.fs, r.path_of(name_)).ignore();
        }
        return st;
    }
    tenant->refresh_memory();
    slot_->failure.clear();
    {
        std::lock_guard lock(r.mu_);  // slot tenants change under both locks; served once back
        r.fill(*slot_, tenant);
    }
    ++r.opens_;
    r.count_graphs(*tenant);
    return engine::Status::ok();
}

std::unique_ptr<BegunInstall> Registry::OutOfService::begin_install(
    std::span<const std::byte> image, std::shared_ptr<const std::byte[]> owner) {
    Registry& r = registry_;
    auto begun = std::make_unique<BegunInstall>();
    begun->tenant = Tenant::make(name_, r.options_.changes_max);
    begun->indexes = std::make_unique<index::IndexSet>();
    // Only a PUT of an image begins an install as its body arrives, and it installs a primary
    // following nothing (§8.3): opened as one, though `<t>.follows` is still there (a replica
    // restored in place keeps it until the body is whole and the marks are settled). Read from
    // the file system here, it opened a follower that nothing followed, refusing every write.
    begun->install = std::make_unique<engine::ImageInstall>(
        image, r.path_of(name_),
        r.open_options(name_, *begun->tenant, *begun->indexes, true, /*follows=*/false),
        std::move(owner));
    return begun;
}

void Registry::close_tenant(const std::shared_ptr<Tenant>& t, engine::CloseMode mode) {
    std::unique_ptr<engine::Database> db = t->detach_db();
    if (!db) return;
    // Nothing landed since it opened: the file is as the open found it, and a checkpoint would
    // rewrite it (a side file, two fsyncs, a rename) for nothing: a tenant only read paid that
    // on each close, on a cold read's path when the descriptor budget evicted one for it.
    const bool stays = mode == engine::CloseMode::checkpoint;
    if (stays && db->seq() == t->opened_seq()) {
        mode = engine::CloseMode::plain;
        // Unless the open left a graph record stale: it applied the writes after the record to
        // the graph (no checkpoint came since a crash). The current graph is appended, or, where
        // that would pass the dead-space budget, the checkpoint rewrites the file with it, so the
        // next open need not apply them again. A graph that cannot be written (failed, over
        // 1 GiB) stays stale rather than cost a rewrite at every close; a frozen file, which a
        // move may be reading, is left as it is.
        if (!db->frozen()) {
            db->checkpoint_graphs().status().ignore();
            if (db->usage().graphs_deferred) mode = engine::CloseMode::checkpoint;
        }
    }
    const bool healthy = !db->failure();
    const bool closed = db->close(mode).is_ok();
    if (!stays || !healthy || !closed || db->failure()) return;
    // Closed synced by this process: durable as it is now, so its next open need not sync it.
    auto size = options_.fs->file_size(path_of(t->name()));
    if (!size.is_ok()) return;
    std::lock_guard lock(mu_);
    if (closed_durable_.size() < closed_durable_max) closed_durable_[t->name()] = *size;
}

bool Registry::take_closed_durable(std::string_view name, uint64_t file_bytes) {
    std::lock_guard lock(mu_);
    auto it = closed_durable_.find(name);
    if (it != closed_durable_.end()) {
        const bool same = it->second == file_bytes;  // grown or cut since: not the file it closed
        closed_durable_.erase(it);
        return same;
    }
    // Synced at start and not written since (only an open, a create or a take_out could have,
    // and each takes the mark first): durable if its size is still the one the sync covered.
    const uint64_t hash = std::hash<std::string_view>{}(name);
    auto [first, last] = std::equal_range(
        started_durable_.begin(), started_durable_.end(), std::pair{hash, uint64_t{0}},
        [](const auto& a, const auto& b) { return a.first < b.first; });
    bool same = false;
    for (auto m = first; m != last; ++m) {
        if (!same && m->second == file_bytes) same = true;
        m->second = no_mark;  // every mark of the hash: one open uses it
    }
    return same;
}

void Registry::drop_durable_marks(std::string_view name) {
    if (auto it = closed_durable_.find(name); it != closed_durable_.end()) {
        closed_durable_.erase(it);
    }
    const uint64_t hash = std::hash<std::string_view>{}(name);
    auto [first, last] = std::equal_range(
        started_durable_.begin(), started_durable_.end(), std::pair{hash, uint64_t{0}},
        [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto m = first; m != last; ++m) m->second = no_mark;
}

engine::Status Registry::mark_durable_at_start() {
    auto files = options_.fs->list(options_.data_dir);
    if (!files.is_ok()) return files.status();
    std::vector<std::pair<uint64_t, uint64_t>> marks;
    marks.reserve(files->size());
    // The sizes first: what the sync below covers is at least what they describe. Nothing else
    // writes these files meanwhile (the node holds the data directory's lock and opens nothing
    // before this returns).
    for (const std::string& file : *files) {
        const std::optional<std::string_view> tenant = tenant_of_file(file);
        if (!tenant) continue;
        const std::string_view name = *tenant;
        auto size = options_.fs->file_size(path_of(name));
        if (!size.is_ok()) continue;  // its first open syncs it
        marks.emplace_back(std::hash<std::string_view>{}(name), *size);
    }
    // No tenant file, nothing to trust: a new node's start (every test's) flushes nothing of the
    // disk's other writers.
    if (marks.empty()) return engine::Status::ok();
    if (engine::Status st = options_.fs->sync_fs(options_.data_dir); !st.is_ok()) return st;
    std::sort(marks.begin(), marks.end());
    std::lock_guard lock(mu_);
    started_durable_ = std::move(marks);
    return engine::Status::ok();
}

// Closes one tenant nobody holds: the least recently used one (past the idle timeout when
// `idle_only_past_timeout`). False when there is none.
bool Registry::evict_one(CloseReason reason, int64_t now, bool idle_only_past_timeout) {
    if (idle_only_past_timeout && options_.close_idle_ms == 0) return false;
    std::shared_ptr<Slot> victim;
    {
        std::lock_guard lock(mu_);
        // From the old end. One held (a request, a stream, a follower, a walk's reference) or
        // out of service is in use now, so it is touched on the way past, as its release would:
        // each is passed once per round of the list rather than by every eviction, and the list
        // stays in order of last_used_ms. At most the tenants open as the walk began are looked
        // at, so those it touched are not met again.
        size_t left = open_;
        for (Slot* s = oldest_; s && left > 0; --left) {
            Slot* next = s->newer;
            if (s->out || s->tenant.use_count() != 1) {
                touch_locked(*s);
                s = next;
                continue;
            }
            // The oldest idle one; in order, so when it is not past the timeout none is.
            if (idle_only_past_timeout && now - s->tenant->last_used_ms < options_.close_idle_ms) {
                break;
            }
            victim = s->shared_from_this();
            break;
        }
    }
    if (!victim) return false;
    return close_slot(victim, reason);
}

bool Registry::close_slot(const std::shared_ptr<Slot>& victim, CloseReason reason) {
    std::lock_guard slot_lock(victim->mu);
    std::shared_ptr<Tenant> closing;
    {
        // Asked and taken out of the slot under both locks: a reference is taken under one or
        // the other (acquire under the slot's, try_get and the walks under mu_), so none can be
        // taken between the count and the move.
        std::lock_guard lock(mu_);
        if (!victim->tenant || victim->tenant.use_count() != 1) return true;  // taken meanwhile: look again
        closing = empty(*victim);
    }
    // The slot stays in the map, locked, until the file is closed: a request meanwhile waits on
    // the slot, finds it dead and opens the file anew. Out of the map before the close, it would
    // open a second copy while this one still holds the file's lock, fail `busy`, and answer 500
    // for open_failure_kept_ms.
    close_tenant(closing);
    retire(victim, reason);
    return true;
}

void Registry::retire(const std::shared_ptr<Slot>& slot, CloseReason reason) {
    {
        std::lock_guard lock(mu_);
        slot->dead = true;
        auto it = slots_.find(slot->name);
        if (it != slots_.end() && it->second == slot) slots_.erase(it);
    }
    ++closes_[static_cast<int>(reason)];
    if (options_.on_close) options_.on_close(close_reason_name(reason));
}

bool Registry::latch_due(const std::string& name, int64_t now) {
    std::lock_guard lock(mu_);
    LatchBackoff& b = latch_backoff_[name];
    if (b.seen_ms == 0) {  // a latch found anew: soon after the last latched close, it waits
        const bool soon = b.closed_ms != 0 && now - b.closed_ms < latch_backoff_reset_ms;
        b.delay_ms = !soon ? 0
                           : std::min(latch_backoff_max_ms,
                                      std::max(latch_backoff_first_ms, b.delay_ms * 2));
        b.seen_ms = now;
    }
    return now - b.seen_ms >= b.delay_ms;
}

int64_t Registry::latch_wait_left_ms(std::string_view name) const {
    const int64_t now = now_ms();
    std::lock_guard lock(mu_);
    auto b = latch_backoff_.find(name);
    if (b == latch_backoff_.end()) return 2 * sweep_period_ms;  // closed at the next sweeps
    int64_t left = 0;
    if (b->second.seen_ms != 0) {
        left = b->second.seen_ms + b->second.delay_ms - now;
    } else if (b->second.closed_ms != 0 && now - b->second.closed_ms < latch_backoff_reset_ms) {
        // Not seen by a sweep yet: the one that sees it sets the wait as latch_due does.
        left = std::min(latch_backoff_max_ms,
                        std::max(latch_backoff_first_ms, b->second.delay_ms * 2));
    }
    // The sweep that finds it due closes it if nothing holds it, else the one after (Node::tick
    // ends what held it meanwhile).
    return std::max<int64_t>(0, left) + 2 * sweep_period_ms;
}

void Registry::latch_closed(const std::string& name, int64_t now) {
    std::lock_guard lock(mu_);
    LatchBackoff& b = latch_backoff_[name];
    b.seen_ms = 0;
    b.closed_ms = now;
}

std::vector<std::string> Registry::sweep(const std::function<bool(std::string_view)>& followed) {
    const int64_t now = now_ms();
    std::vector<std::shared_ptr<Slot>> latched;
    std::vector<std::string> held;
    for (const std::shared_ptr<Slot>& slot : open_slots()) {
        if (std::shared_ptr<Tenant> t = in_service(*slot)) {
            t->refresh_memory();
            if (t->db().failure()) latched.push_back(slot);
        }
    }
    {
        // A latch no longer found (reopened by a follower, closed for another reason) is over;
        // an entry is forgotten once past the reset: what is left is a tenant latched again soon.
        std::lock_guard lock(mu_);
        for (auto& [name, b] : latch_backoff_) {
            const bool now_latched =
                std::any_of(latched.begin(), latched.end(),
                            [&](const auto& slot) { return slot->name == name; });
            if (!now_latched) b.seen_ms = 0;
        }
        std::erase_if(latch_backoff_, [&](const auto& e) {
            return e.second.seen_ms == 0 && now - e.second.closed_ms >= latch_backoff_reset_ms;
        });
    }
    std::vector<std::shared_ptr<Slot>> busy, tried;
    for (const std::shared_ptr<Slot>& slot : latched) {
        if (!latch_due(slot->name, now)) continue;  // latched again soon after: it waits
        tried.push_back(slot);
        bool idle = false;
        {
            std::lock_guard lock(mu_);
            idle = !slot->out && slot->tenant && slot->tenant.use_count() == 1;
        }
        if (idle && close_slot(slot, CloseReason::latched)) continue;
        // A followed copy's follower holds it and reopens it itself (Follower::run).
        if (!followed || !followed(slot->name)) busy.push_back(slot);
    }
    // Held: its holders are ended (Node::tick), and it is looked at again.
    const std::vector<std::shared_ptr<Slot>> left = close_latched_held(busy);
    for (const std::shared_ptr<Slot>& slot : tried) {
        bool closed = false;
        {
            std::lock_guard lock(mu_);
            closed = slot->dead;  // retired: closed here, not taken meanwhile or put back
        }
        if (closed) latch_closed(slot->name, now);
    }
    for (const std::shared_ptr<Slot>& slot : left) held.push_back(slot->name);
    while (evict_one(CloseReason::idle, now, true)) {
    }
    if (options_.memory_max_bytes) {
        while (memory_bytes() > options_.memory_max_bytes &&
               evict_one(CloseReason::memory, now, false)) {
        }
    }
    return held;
}

std::vector<std::shared_ptr<Registry::Slot>> Registry::close_latched_held(
    const std::vector<std::shared_ptr<Slot>>& slots) {
    // Each taken out of its slot with the slot locked: a request meanwhile waits on the slot (in
    // acquire, on a pool thread) and opens the file anew once it is closed, so no new holder
    // comes while the ones in flight let go. A slot whose lock another thread holds (an open
    // that is evicting) is left for the next sweep, so no two slot locks are waited on at once.
    struct Out {
        std::shared_ptr<Slot> slot;
        std::unique_lock<std::mutex> slot_lock;
        std::shared_ptr<Tenant> tenant;
    };
    std::vector<Out> out;
    std::vector<std::shared_ptr<Slot>> left;
    for (const std::shared_ptr<Slot>& slot : slots) {
        std::unique_lock slot_lock(slot->mu, std::try_to_lock);
        if (!slot_lock.owns_lock()) {
            left.push_back(slot);
            continue;
        }
        std::lock_guard lock(mu_);
        // Closed, taken out, or opened anew (an install) since the sweep looked: not this one's.
        if (slot->dead || slot->out || !slot->tenant || !slot->tenant->db().failure()) continue;
        // Out of the slot and the least-recently-used list, but still counted open, with its
        // memory, until it is closed: its file and its memory are still held, and the budgets'
        // checks (room_for_one_more, the memory bound) must not let other opens take them.
        lru_unlink(*slot);
        out.push_back(Out{slot, std::move(slot_lock), std::move(slot->tenant)});
    }
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(latched_drain_wait_ms);
    auto let_go = [&] {
        return std::all_of(out.begin(), out.end(),
                           [](const Out& o) { return o.tenant.use_count() == 1; });
    };
    while (!let_go() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (Out& o : out) {
        // use_count() of 1 is final: with the slot empty and locked, only a holder could copy it.
        if (o.tenant.use_count() != 1) {
            std::lock_guard lock(mu_);
            o.slot->tenant = std::move(o.tenant);  // back in service; looked at next sweep
            lru_push_newest(*o.slot);
            left.push_back(o.slot);
            continue;
        }
        {
            std::lock_guard lock(mu_);
            o.tenant->charge_memory_to(nullptr);
            --open_;
        }
        close_tenant(o.tenant);
        o.tenant.reset();
        retire(o.slot, CloseReason::latched);
    }
    return left;
}

void Registry::close_all() {
    std::map<std::string, std::shared_ptr<Slot>, std::less<>> slots;
    {
        std::lock_guard lock(mu_);
        slots.swap(slots_);
    }
    std::vector<Slot*> order;
    order.reserve(slots.size());
    for (auto& [name, slot] : slots) order.push_back(slot.get());
    // Each close of a written tenant is a checkpoint: its file rewritten and two fsyncs. One
    // after another, a node with 9,456 such tenants open took 119-201 s to stop (issue 18), past
    // any service manager's patience; the fsyncs of different files overlap in the device, as
    // the Syncer's do, so close_threads of them run at once.
    std::atomic<size_t> next{0};
    auto close_some = [&] {
        for (size_t i; (i = next.fetch_add(1)) < order.size();) {
            Slot& slot = *order[i];
            std::lock_guard slot_lock(slot.mu);
            std::shared_ptr<Tenant> closing;
            {
                std::lock_guard lock(mu_);
                closing = empty(slot);
            }
            if (closing) {
                close_tenant(closing);
                ++closes_[static_cast<int>(CloseReason::shutdown)];
            }
            slot.dead = true;
        }
    };
    std::vector<std::jthread> helpers;
    for (size_t k = 1; k < std::min(close_threads, order.size()); ++k) {
        try {
            helpers.emplace_back(close_some);
        } catch (const std::system_error&) {
            break;  // no thread to be had: fewer do it, this one at least
        }
    }
    close_some();
    helpers.clear();  // joined: every tenant closed before this returns
}

std::shared_ptr<Tenant> Registry::compaction_candidate(
    double dead_share_min, uint64_t file_bytes_min,
    const std::function<bool(const std::string&)>& skip) const {
    std::shared_ptr<Tenant> best;
    uint64_t best_dead = 0;
    uint64_t best_live = 0;
    for (const std::shared_ptr<Slot>& slot : open_slots()) {
        std::shared_ptr<Tenant> t = in_service(*slot);
        if (!t) continue;  // closed or taken out since
        engine::Database& db = t->db();
        if (db.frozen() || db.failure() || skip(t->name())) continue;
        const engine::Usage u = db.usage();
        if (u.file_bytes < file_bytes_min || u.file_bytes == 0) continue;
        // Nothing to reclaim and no graph to write: no rewrite would change anything.
        const bool dead_enough =
            u.dead_bytes > 0 &&
            static_cast<double>(u.dead_bytes) >= dead_share_min * static_cast<double>(u.file_bytes);
        if (!dead_enough && !u.graphs_deferred) continue;
        if (!best || u.dead_bytes > best_dead) {
            best = t;
            best_dead = u.dead_bytes;
            best_live = u.file_bytes - std::min(u.dead_bytes, u.file_bytes);
        }
    }
    if (best && options_.memory_max_bytes && memory_bytes() + best_live > options_.memory_max_bytes) {
        return nullptr;
    }
    return best;
}

uint64_t Registry::memory_bytes() const {
    return open_memory_bytes_.load() + opening_bytes_.load() + arriving_bytes_.load();
}

// The slots of the open tenants, for a walk over them that must not count as a use: it takes one
// tenant at a time (in_service). A reference to every open tenant held while a sweep or the
// compactor looked at them all made every tenant "in use" to evict_one at once, and a node at its
// descriptor budget refused opens and creates 503 for as long as the walk took.
std::vector<std::shared_ptr<Registry::Slot>> Registry::open_slots() const {
    std::vector<std::shared_ptr<Slot>> open;
    std::lock_guard lock(mu_);
    open.reserve(open_);
    for (Slot* s = oldest_; s; s = s->newer) {
        if (!s->out) open.push_back(s->shared_from_this());
    }
    return open;
}

// A reference is taken under mu_ only while the slot holds the tenant and it is in service, the
// state evict_one and take_out check under mu_ as they take it out of the slot.
std::shared_ptr<Tenant> Registry::in_service(const Slot& slot) const {
    std::lock_guard lock(mu_);
    if (slot.dead || slot.out) return nullptr;
    return slot.tenant;
}

size_t Registry::open_count() const {
    std::lock_guard lock(mu_);
    return open_;
}

}  // namespace fenec::node
