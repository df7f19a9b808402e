// shard/copy_counts.cc: the copies each node keeps, counted and kept up to date (copy_counts.h).
#include "shard/copy_counts.h"

#include <algorithm>
#include <cassert>
#include <vector>

namespace fenec::shard {

namespace {

// Adds (`by` 1) or takes away (-1) one tenant's part: its primary, its replica, and the replica
// among its primary's. A count reaching 0 is erased, so a recount equals a fresh count.
void add(CopyCounts::Counts& m, const std::string& key, int by) {
    auto [it, made] = m.try_emplace(key, 0);
    assert(!made || by > 0);  // what is taken away was counted
    it->second += static_cast<size_t>(by);
    if (it->second == 0) m.erase(it);
}

void count_tenant(CopyCounts& c, const TenantRow* row, const std::string* replica, int by) {
    if (row) add(c.copies, row->node, by);
    if (replica) add(c.copies, *replica, by);
    if (row && replica) {
        CopyCounts::Counts& of = c.of_primary[row->node];
        add(of, *replica, by);
        if (of.empty()) c.of_primary.erase(row->node);
    }
}

template <class V>
const V* find_in(const CowMap<V>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
}

}  // namespace

CopyCounts count_copies(const CowMap<TenantRow>& tenants, const CowMap<std::string>& replicas) {
    CopyCounts c;
    for (const auto& [name, row] : tenants) count_tenant(c, &row, find_in(replicas, name), 1);
    for (const auto& [name, node] : replicas) {  // a replica of a tenant with no row
        if (!tenants.contains(name)) count_tenant(c, nullptr, &node, 1);
    }
    c.tenants = tenants;
    c.replicas = replicas;
    return c;
}

std::shared_ptr<const CopyCounts> recount(const DirectoryMaps& maps) {
    const CopyCounts* was = maps.counted.get();
    if (!was) return std::make_shared<const CopyCounts>(count_copies(maps.tenants, maps.replicas));
    if (was->tenants.shares_all(maps.tenants) && was->replicas.shares_all(maps.replicas)) {
        return maps.counted;
    }
    // The tenants whose part changed: a row come, gone or on another node, a replica come, gone
    // or elsewhere, among the rows of the chunks one side holds and the other not.
    std::vector<std::string> changed;
    each_unshared(was->tenants, maps.tenants,
                  [&](const std::string& k, const TenantRow* before, const TenantRow* after) {
                      if (!before || !after || before->node != after->node) changed.push_back(k);
                  });
    each_unshared(was->replicas, maps.replicas,
                  [&](const std::string& k, const std::string* before, const std::string* after) {
                      if (!before || !after || *before != *after) changed.push_back(k);
                  });
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    auto c = std::make_shared<CopyCounts>();
    c->copies = was->copies;
    c->of_primary = was->of_primary;
    for (const std::string& t : changed) {
        count_tenant(*c, find_in(was->tenants, t), find_in(was->replicas, t), -1);
        count_tenant(*c, find_in(maps.tenants, t), find_in(maps.replicas, t), 1);
    }
    c->tenants = maps.tenants;
    c->replicas = maps.replicas;
    return c;
}

const CopyCounts* counts_of(const DirectoryMaps& maps) {
    const CopyCounts* c = maps.counted.get();
    if (!c || !c->tenants.shares_all(maps.tenants) || !c->replicas.shares_all(maps.replicas)) {
        return nullptr;
    }
    return c;
}

}  // namespace fenec::shard
