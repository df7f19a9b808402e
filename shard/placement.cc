// shard/placement.cc: a tenant's place (router.md §6.4 step 2, §7.1) and its replica's (§8.2).
#include "shard/placement.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "shard/copy_counts.h"

namespace fenec::shard {

namespace {

// 0: another zone; 1: a zone not recorded on either side; 2: the same zone.
int zone_class(const NodeRow& primary, const NodeRow& candidate) {
    if (primary.zone.empty() || candidate.zone.empty()) return 1;
    return primary.zone == candidate.zone ? 2 : 0;
}

}  // namespace

std::variant<const NodeRow*, NoTenantPlace> place_tenant(const DirectoryMaps& maps,
                                                        const std::optional<std::string>& region,
                                                        std::string_view excluded,
                                                        const DiskBytes& disk_bytes) {
    bool any = false, excluded_there = false, candidates = false;
    std::optional<std::pair<uint64_t, const NodeRow*>> best;
    for (const auto& [name, node] : maps.nodes) {  // by name: ties go to the first
        if (region && node.region != *region) continue;
        any = true;
        if (name == excluded) {
            excluded_there = true;
            continue;
        }
        if (maps.is_standby(name)) continue;
        candidates = true;
        std::optional<uint64_t> bytes = disk_bytes(node);
        if (bytes && (!best || *bytes < best->first)) best = {*bytes, &node};
    }
    if (best) return best->second;
    if (!any) return NoTenantPlace::no_node;
    if (candidates) return NoTenantPlace::none_answered;
    return excluded_there ? NoTenantPlace::only_excluded : NoTenantPlace::standbys_only;
}

bool same_zone(const DirectoryMaps& maps, std::string_view primary, std::string_view copy) {
    auto p = maps.nodes.find(primary);
    auto c = maps.nodes.find(copy);
    if (p == maps.nodes.end() || c == maps.nodes.end()) return false;
    return zone_class(p->second, c->second) == 2;
}

std::variant<ReplicaPlace, NoReplica> place_replica(
    const DirectoryMaps& maps, const TenantRow& tenant,
    const std::set<std::string, std::less<>>& holding, std::string_view excluded) {
    auto primary_it = maps.nodes.find(tenant.node);
    if (primary_it == maps.nodes.end()) {
        return NoReplica{"its node `" + tenant.node + "` is not in the directory"};
    }
    const NodeRow& primary = primary_it->second;
    // Replicas of this primary's tenants, and copies in all, per node: as the directory keeps
    // them, or counted here for maps it did not publish.
    const CopyCounts* counts = counts_of(maps);
    CopyCounts counted;
    if (!counts) {
        counted = count_copies(maps.tenants, maps.replicas);
        counts = &counted;
    }
    static const CopyCounts::Counts none;
    auto p = counts->of_primary.find(primary.name);
    const CopyCounts::Counts& of_primary = p == counts->of_primary.end() ? none : p->second;
    const CopyCounts::Counts& copies = counts->copies;
    using Rank = std::tuple<int, int, size_t, size_t, std::string>;
    std::vector<Rank> ranked;
    for (const auto& [name, node] : maps.nodes) {
        if (name == primary.name || name == excluded || node.region != primary.region) continue;
        if (maps.is_standby(name) || maps.standby_of(name)) continue;
        // Named in the capture: clang 14 (the fuzz build's) captures no structured binding.
        auto count = [&, &name = name](const auto& m) {
            auto it = m.find(name);
            return it == m.end() ? size_t{0} : it->second;
        };
        ranked.emplace_back(zone_class(primary, node), holding.contains(name) ? 0 : 1,
                            count(of_primary), count(copies), name);
    }
    if (ranked.empty()) {
        return NoReplica{primary.region.empty() ? std::string("there is no other node to keep it")
                                                : "there is no other node in region `" +
                                                      primary.region + "` to keep it"};
    }
    const Rank& best = *std::min_element(ranked.begin(), ranked.end());
    return ReplicaPlace{std::get<4>(best), std::get<0>(best) == 2};
}

}  // namespace fenec::shard
