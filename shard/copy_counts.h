// shard/copy_counts.h: the copies each node keeps, as a replica's placement ranks nodes by them
// (shard/placement.h): a node's primaries and replicas, and per primary node the replicas of its
// tenants on each node. Counting them walks every tenant, 20 ms at 100,000, and a create under
// --replicas or each try of a repair placed a replica after such a walk. So each snapshot of the
// directory carries its counts (DirectoryMaps::counted), brought up to date as it is published
// from the tenants and replicas the change touched: the rows of the chunks (shard/cow_map.h) the
// new snapshot does not share with the one counted before.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "shard/cow_map.h"
#include "shard/directory.h"

namespace fenec::shard {

struct CopyCounts {
    using Counts = std::map<std::string, size_t, std::less<>>;
    Counts copies;                                          // node → primaries and replicas
    std::map<std::string, Counts, std::less<>> of_primary;  // primary → replica's node → n
    // The rows counted: the counts are a snapshot's while its maps hold these very chunks.
    CowMap<TenantRow> tenants;
    CowMap<std::string> replicas;

    bool operator==(const CopyCounts& o) const {
        return copies == o.copies && of_primary == o.of_primary;
    }
};

// The counts of `tenants` and `replicas`, walking every row.
CopyCounts count_copies(const CowMap<TenantRow>& tenants, const CowMap<std::string>& replicas);

// `maps.counted` brought up to date with its tenants and replicas: from the rows it counted, by
// those of the chunks the two do not share, or counted afresh when there is none.
std::shared_ptr<const CopyCounts> recount(const DirectoryMaps& maps);

// `maps.counted` when it counted exactly the maps' tenants and replicas (the same chunks); null
// otherwise (maps made by hand, or reached mutably since).
const CopyCounts* counts_of(const DirectoryMaps& maps);

}  // namespace fenec::shard
