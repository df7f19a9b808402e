// shard/in_flight.h: the forwards out to each node, by tenant, so a failover can cut what is out
// to the node it failed over for the tenants it promoted (router.md §9.10). A forward registers
// itself as it starts and leaves once its sink is done with it; `take` hands a cut everything out
// to one node for one tenant and forgets it, so a forward is cut at most once.
//
// Thread-safe: forwards start and end on every loop, a cut comes from the failover's thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fenec::shard {

// Something out to a node that a failover may cut.
class Cuttable {
  public:
    virtual ~Cuttable() = default;
    // Ends it where it stands by §9.10's table (resent to the tenant's new primary, answered
    // 502 outcome unknown, a subscription ended, an answer begun left to the node).
    virtual void cut() = 0;
};

class InFlight {
  public:
    uint64_t add(const std::string& node, const std::string& tenant, std::weak_ptr<Cuttable> what) {
        std::lock_guard lock(mu_);
        const uint64_t id = ++next_;
        by_node_[node].emplace(id, Entry{tenant, std::move(what)});
        return id;
    }
    void remove(const std::string& node, uint64_t id) {
        std::lock_guard lock(mu_);
        auto n = by_node_.find(node);
        if (n == by_node_.end()) return;
        n->second.erase(id);
        if (n->second.empty()) by_node_.erase(n);
    }
    // Everything still out to `node` for `tenant`, forgotten here.
    std::vector<std::shared_ptr<Cuttable>> take(const std::string& node,
                                                const std::string& tenant) {
        std::vector<std::shared_ptr<Cuttable>> out;
        std::lock_guard lock(mu_);
        auto n = by_node_.find(node);
        if (n == by_node_.end()) return out;
        for (auto it = n->second.begin(); it != n->second.end();) {
            if (it->second.tenant != tenant) {
                ++it;
                continue;
            }
            if (auto c = it->second.what.lock()) out.push_back(std::move(c));
            it = n->second.erase(it);
        }
        if (n->second.empty()) by_node_.erase(n);
        return out;
    }
    size_t size() const {
        std::lock_guard lock(mu_);
        size_t n = 0;
        for (const auto& [node, calls] : by_node_) n += calls.size();
        return n;
    }

  private:
    struct Entry {
        std::string tenant;
        std::weak_ptr<Cuttable> what;
    };
    mutable std::mutex mu_;
    uint64_t next_ = 0;
    std::map<std::string, std::map<uint64_t, Entry>, std::less<>> by_node_;
};

}  // namespace fenec::shard
