// test/shard/copy_counts_test.cc: the copies each node keeps (shard/copy_counts.h), kept up to
// date from the chunks a change touched: equal to a fresh count after every one of a random mix
// of changes (the snapshots before them left as they were), null for maps reached mutably since
// (a replica then placed as the fresh count places it), and kept by the Directory as it writes.
#include "shard/copy_counts.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "shard/placement.h"
#include "test/server/node/node_fixture.h"

namespace fenec::shard::copy_counts_test {
namespace {

const char* const kNodes[] = {"n1", "n2", "n3", "n4", "n5"};

std::string name(int i) { return "t" + std::to_string(i); }

DirectoryMaps start(std::mt19937& rng, int tenants) {
    DirectoryMaps m;
    for (const char* n : kNodes) m.nodes[n] = NodeRow{n, "127.0.0.1:1", "", "", "", "unknown"};
    for (int i = 0; i < tenants; ++i) {
        TenantRow t;
        t.name = name(i);
        t.node = kNodes[rng() % 5];
        m.tenants[t.name] = t;
        if (rng() % 3 == 0) m.replicas[t.name] = kNodes[rng() % 5];
    }
    m.counted = recount(m);  // none before: counted afresh
    return m;
}

void expect_fresh(const DirectoryMaps& m) {
    const CopyCounts* c = counts_of(m);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(*c == count_copies(m.tenants, m.replicas));
}

TEST(CopyCounts, KeptUpToDateAsAFreshCountUnderRandomChanges) {
    std::mt19937 rng(1207);
    DirectoryMaps m = start(rng, 6000);  // a dozen chunks and more
    expect_fresh(m);
    std::vector<DirectoryMaps> kept;
    for (int step = 0; step < 400; ++step) {
        DirectoryMaps next = m;
        const int changes = 1 + static_cast<int>(rng() % 4);
        for (int c = 0; c < changes; ++c) {
            const std::string t = name(static_cast<int>(rng() % 6500));
            const std::string n = kNodes[rng() % 5];
            switch (rng() % 8) {
                case 0: {  // a create
                    TenantRow row;
                    row.name = t;
                    row.node = n;
                    next.tenants[t] = row;
                    break;
                }
                case 1:  // a delete, its replica with it
                    next.tenants.erase(t);
                    next.replicas.erase(t);
                    break;
                case 2:  // a move's flip, through a mutable find
                    if (auto it = next.tenants.find(t); it != next.tenants.end()) {
                        it->second.node = n;
                    }
                    break;
                case 3:
                    next.replicas[t] = n;
                    break;
                case 4:
                    next.replicas.erase(t);
                    break;
                case 5:  // a node's replicas gone (remove_node)
                    if (rng() % 20 == 0) {
                        erase_if(next.replicas, [&](const auto& r) { return r.second == n; });
                    }
                    break;
                case 6:  // a mutable walk that changes a few rows (a region moved out)
                    if (rng() % 20 == 0) {
                        for (auto& [k, row] : next.tenants) {
                            if (row.node == n && rng() % 50 == 0) row.node = kNodes[rng() % 5];
                        }
                    }
                    break;
                default:  // a replica of a tenant with no row
                    next.replicas["orphan" + std::to_string(rng() % 50)] = n;
            }
        }
        next.counted = recount(next);
        ASSERT_NO_FATAL_FAILURE(expect_fresh(next)) << "step " << step;
        if (step % 50 == 0) kept.push_back(m);
        m = std::move(next);
    }
    for (const DirectoryMaps& k : kept) expect_fresh(k);  // snapshots not changed by later ones
}

TEST(CopyCounts, MapsReachedMutablyAreCountedAfreshByPlacement) {
    std::mt19937 rng(7);
    DirectoryMaps m = start(rng, 3000);
    TenantRow acme;
    acme.name = "acme";
    acme.node = "n1";
    m.tenants["acme"] = acme;
    m.counted = recount(m);
    ASSERT_NE(counts_of(m), nullptr);
    // A copy only its nodes changed: the same tenants and replicas, the counts still its own.
    DirectoryMaps candidates = m;
    candidates.nodes.erase("n2");
    EXPECT_NE(counts_of(candidates), nullptr);
    // Rows changed behind the counts' back: they no longer describe the maps.
    DirectoryMaps edited = m;
    for (auto& [k, row] : edited.tenants) {
        if (row.node == "n3") row.node = "n4";
    }
    EXPECT_EQ(counts_of(edited), nullptr);
    auto place = [](const DirectoryMaps& maps) {
        auto v = place_replica(maps, maps.tenants.at("acme"));
        const auto* p = std::get_if<ReplicaPlace>(&v);
        return p ? p->node : std::string("none");
    };
    // What placement ranks by, taken from the counts or counted afresh, gives the same node.
    DirectoryMaps recounted = edited;
    recounted.counted = recount(recounted);
    ASSERT_NE(counts_of(recounted), nullptr);
    EXPECT_EQ(place(edited), place(recounted));
}

TEST(CopyCounts, TheDirectoryKeepsThemAsItWrites) {
    test::TempDir dir;
    auto d = Directory::open(dir.path() + "/shard.fenec");
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    Directory& directory = **d;
    for (const char* n : {"n1", "n2", "n3"}) {
        ASSERT_TRUE(directory.put_node({n, "127.0.0.1:1", "", "", "", "unknown"}).is_ok());
    }
    for (int i = 0; i < 40; ++i) {
        TenantRow t;
        t.name = name(i);
        t.node = kNodes[i % 3];
        ASSERT_TRUE(directory.put_tenant(t).is_ok());
        if (i % 2) {
            ASSERT_TRUE(directory.put_replica(t.name, kNodes[(i + 1) % 3]).is_ok());
        }
    }
    ASSERT_TRUE(directory.flip_tenant(name(3), "n3").is_ok());
    ASSERT_TRUE(directory.remove_tenant(name(5)).is_ok());
    ASSERT_TRUE(directory.remove_replica(name(7)).is_ok());
    ASSERT_TRUE(directory.fail_over_tenant(name(9), "n2", "n1", "00000000000000ab").is_ok());
    ASSERT_TRUE(directory.remove_node("n3").is_ok());
    const auto maps = directory.maps();
    ASSERT_NO_FATAL_FAILURE(expect_fresh(*maps));
    EXPECT_FALSE(counts_of(*maps)->copies.empty());
    // Opened again: counted afresh as the file is read, the same.
    d->reset();
    auto again = Directory::open(dir.path() + "/shard.fenec");
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    const auto reread = (*again)->maps();
    ASSERT_NO_FATAL_FAILURE(expect_fresh(*reread));
    EXPECT_TRUE(*counts_of(*reread) == *counts_of(*maps));
}

}  // namespace
}  // namespace fenec::shard::copy_counts_test
