// shard/placement.h: where a tenant goes (router.md §6.4 step 2, §7.1) and where its own replica
// goes (§8.2), as pure functions of the directory's maps and what the nodes told; no I/O of
// their own (a tenant's place asks each candidate's bytes through the caller's function).
//
// A tenant goes to the node of its region (of every region when none is named) with the fewest
// bytes on disk, ties by name; never to a standby, nor to a node that did not answer, nor to a
// move's source. A create and a move naming `region` place by this one rule.
//
// Candidates are the nodes of the tenant's region only (the replica is what a failover promotes:
// one in another region would carry the tenant out of its own), except its primary, standbys, and
// nodes with a standby. Ranked, first to last: a node of another zone; then one whose zone, or the
// primary's, is not recorded; a node of the same zone last (a datacenter lost would take both).
// Then a node holding a copy of the tenant already; then the fewest replicas of this primary's
// tenants, then the fewest copies in all (primaries and replicas); then the name.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "shard/directory.h"

namespace fenec::shard {

// Why a tenant has no node to go to: no node at all in the region asked (or none at all); none
// there but `excluded` (a move's source) and standbys; only standbys; no candidate answered.
enum class NoTenantPlace { no_node, only_excluded, standbys_only, none_answered };

// A node's bytes on disk (its `GET /_admin/hello`'s disk_bytes), nullopt when it did not answer.
using DiskBytes = std::function<std::optional<uint64_t>(const NodeRow&)>;

// The node for a tenant: of `region` (every region when nullopt; "" is the unnamed one), never a
// standby nor `excluded`, the fewest bytes as `disk_bytes` tells them (asked of each candidate,
// by name), ties by name. The pointer is into `maps`.
std::variant<const NodeRow*, NoTenantPlace> place_tenant(const DirectoryMaps& maps,
                                                        const std::optional<std::string>& region,
                                                        std::string_view excluded,
                                                        const DiskBytes& disk_bytes);

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
