// server/node/tenant.cc: the change ring and the idempotency key table of one open tenant.
#include "server/node/tenant.h"

#include <algorithm>
#include <chrono>

#include "index/memory.h"

namespace fenec::node {

void Tenant::attach(std::unique_ptr<index::IndexSet> indexes,
                    std::unique_ptr<engine::Database> db) {
    indexes_ = std::move(indexes);
    db_ = std::move(db);
    opened_seq_ = db_->seq();
    std::lock_guard lock(mu_);
    floor_ = db_->seq();  // a tenant just opened holds no ring before its seq at open (§5.4)
}

namespace {

// The heap one ring entry holds: its node in the deque and its lists of ids.
uint64_t entry_bytes(const ChangeEntry& e) {
    uint64_t bytes = sizeof(ChangeEntry) + e.changes.capacity() * sizeof(engine::CollectionChange);
    for (const engine::CollectionChange& c : e.changes) {
        bytes += (c.put.capacity() + c.deleted.capacity()) * sizeof(engine::DocId);
    }
    return bytes;
}

}  // namespace

void Tenant::set_memory(std::atomic<uint64_t>& part, uint64_t bytes) {
    std::lock_guard lock(memory_mu_);
    const uint64_t was = part.exchange(bytes, std::memory_order_relaxed);
    // Modulo 2^64: a part that shrank takes its difference back off.
    if (memory_total_) memory_total_->fetch_add(bytes - was, std::memory_order_relaxed);
}

void Tenant::charge_memory_to(std::atomic<uint64_t>* total) {
    std::lock_guard lock(memory_mu_);
    if (memory_total_) memory_total_->fetch_sub(memory_bytes(), std::memory_order_relaxed);
    memory_total_ = total;
    if (memory_total_) memory_total_->fetch_add(memory_bytes(), std::memory_order_relaxed);
}

void Tenant::on_block(const engine::BlockSummary& summary) {
    set_memory(db_memory_, summary.memory_bytes);
    {
        std::lock_guard lock(mu_);
        ring_.push_back(ChangeEntry{summary.first, summary.last, summary.changes});
        uint64_t ring_bytes = ring_bytes_.load(std::memory_order_relaxed) + entry_bytes(ring_.back());
        while (ring_.size() > ring_max_) {
            floor_ = ring_.front().last;
            ring_bytes -= entry_bytes(ring_.front());
            ring_.pop_front();
        }
        set_memory(ring_bytes_, ring_bytes);
    }
    wake_watchers();
}

void Tenant::on_durable(engine::Seq) { wake_watchers(); }

engine::Seq Tenant::visible_seq() const {
    if (db_->sync_policy().kind == engine::SyncPolicy::Kind::at_close) return db_->seq();
    return db_->durable_seq();
}

engine::Status Tenant::wait_visible(engine::Seq seq) {
    if (visible_seq().v >= seq.v) return engine::Status::ok();
    return db_->wait_durable(seq);
}

bool Tenant::changes_after(engine::Seq cursor, std::vector<ChangeEntry>& out) const {
    const engine::Seq visible = visible_seq();  // read first: a later durable mark only adds
    std::lock_guard lock(mu_);
    if (cursor.v < floor_.v) return false;
    for (const ChangeEntry& e : ring_) {
        if (e.last.v > cursor.v && e.last.v <= visible.v) out.push_back(e);
    }
    return true;
}

engine::Seq Tenant::ring_floor() const {
    std::lock_guard lock(mu_);
    return floor_;
}

void Tenant::watch(const std::shared_ptr<ChangeWatcher>& w) {
    std::lock_guard lock(mu_);
    watchers_.push_back(w);
}

void Tenant::unwatch(const ChangeWatcher* w) {
    std::lock_guard lock(mu_);
    std::erase_if(watchers_, [&](const std::weak_ptr<ChangeWatcher>& x) {
        auto s = x.lock();
        return !s || s.get() == w;
    });
}

void Tenant::wake_all() { wake_watchers(); }

void Tenant::wake_watchers() {
    std::vector<std::shared_ptr<ChangeWatcher>> wake;
    {
        std::lock_guard lock(mu_);
        for (auto it = watchers_.begin(); it != watchers_.end();) {
            if (auto w = it->lock()) {
                wake.push_back(std::move(w));
                ++it;
            } else {
                it = watchers_.erase(it);
            }
        }
    }
    for (const auto& w : wake) w->wake();
}

void Tenant::write_done() {
    if (writes_in_flight_.fetch_sub(1) == 1) {
        std::lock_guard lock(writes_mu_);  // so a waiter between its check and its wait hears it
        writes_cv_.notify_all();
    }
}

bool Tenant::wait_writes(int64_t wait_ms) {
    std::unique_lock lock(writes_mu_);
    return writes_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                               [&] { return writes_in_flight_.load() == 0; });
}

bool Tenant::held_join(const std::string& key, const std::shared_ptr<ChangeWatcher>& w) {
    std::lock_guard lock(held_mu_);
    auto& q = held_[key];
    q.push_back(w);
    return q.size() == 1;
}

bool Tenant::held_first(const std::string& key, const ChangeWatcher* w) const {
    std::lock_guard lock(held_mu_);
    auto it = held_.find(key);
    if (it == held_.end() || it->second.empty()) return true;
    auto first = it->second.front().lock();
    return !first || first.get() == w;
}

std::shared_ptr<ChangeWatcher> Tenant::held_leave(const std::string& key, const ChangeWatcher* w) {
    std::lock_guard lock(held_mu_);
    auto it = held_.find(key);
    if (it == held_.end()) return nullptr;
    auto& q = it->second;
    std::erase_if(q, [&](const std::weak_ptr<ChangeWatcher>& x) {
        auto s = x.lock();
        return !s || s.get() == w;
    });
    if (q.empty()) {
        held_.erase(it);
        return nullptr;
    }
    return q.front().lock();
}

std::optional<engine::DocId> Tenant::key_row(const std::string& user_key) const {
    std::lock_guard lock(keys_mu_);
    auto it = keys_.find(user_key);
    if (it == keys_.end()) return std::nullopt;
    return it->second;
}

void Tenant::remember_key(const std::string& user_key, engine::DocId row) {
    std::lock_guard lock(keys_mu_);
    if (keys_.insert_or_assign(user_key, row).second) {
        set_memory(keys_bytes_,
                   keys_bytes_.load(std::memory_order_relaxed) +
                       index::memory::tree_node_bytes<std::pair<const std::string, engine::DocId>> +
                       index::memory::string_heap(user_key));
    }
}

void Tenant::claim_key(const std::string& user_key) {
    std::unique_lock lock(keys_mu_);
    keys_cv_.wait(lock, [&] { return !keys_in_flight_.contains(user_key); });
    keys_in_flight_.insert(user_key);
}

void Tenant::release_key(const std::string& user_key) {
    {
        std::lock_guard lock(keys_mu_);
        keys_in_flight_.erase(user_key);
    }
    keys_cv_.notify_all();
}

}  // namespace fenec::node
