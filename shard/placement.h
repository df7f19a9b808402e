// shard/placement.h: where a tenant's own replica goes (router.md §8.2), as a pure function of
// the directory's maps and what a survey learnt; no I/O.
//
// Candidates are the nodes of the tenant's region only (the replica is what a failover promotes:
// one in another region would carry the tenant out of its own), except its primary, standbys, and
// nodes with a standby. Ranked, first to last: a node of another zone; then one whose zone, or the
// primary's, is not recorded; a node of the same zone last (a datacenter lost would take both).
// Then a node holding a copy of the tenant already; then the fewest replicas of this primary's
// tenants, then the fewest copies in all (primaries and replicas); then the name.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "shard/directory.h"

namespace fenec::shard {

struct ReplicaPlace {
    std::string node;
    bool same_zone = false;  // every free node of the region is in the primary's zone
};

// Why a tenant has no replica: `"there is no other node in region `eu` to keep it"`.
struct NoReplica {
    std::string why;
};

// The best node for `tenant`'s own replica, its primary being `tenant.node`. `holding` names
// nodes known to hold a copy of the tenant already (a repair's survey); `excluded` a node not to
// use (one that just failed to take it).
std::variant<ReplicaPlace, NoReplica> place_replica(
    const DirectoryMaps& maps, const TenantRow& tenant,
    const std::set<std::string, std::less<>>& holding = {}, std::string_view excluded = {});

// Whether a copy on `copy` is in the same zone as the primary on `primary`: both zones recorded
// and equal.
bool same_zone(const DirectoryMaps& maps, std::string_view primary, std::string_view copy);

}  // namespace fenec::shard
