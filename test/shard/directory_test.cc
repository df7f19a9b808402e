// test/shard/directory_test.cc: the directory file (router.md §4) in process: created with its
// row and term, every change visible in the maps once written, and everything there again when
// the file is reopened (the oracle: a second Directory opened on the same file).
#include "shard/directory.h"

#include <gtest/gtest.h>

#include "test/server/node/node_fixture.h"

namespace fenec::shard::directory_test {
namespace {

TenantRow tenant(std::string name, std::string node, std::string lineage = "") {
    TenantRow t;
    t.name = std::move(name);
    t.node = std::move(node);
    t.lineage = std::move(lineage);
    return t;
}

TEST(Directory, ChangesSurviveReopen) {
    test::TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    std::string id;
    {
        auto d = Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        auto m = (*d)->maps();
        EXPECT_EQ(m->scope, "global");
        EXPECT_EQ(m->id.size(), 16u);
        EXPECT_EQ(m->starts, 1);
        EXPECT_EQ(m->term, 0);
        id = m->id;
        ASSERT_TRUE((*d)->put_node({"n1", "127.0.0.1:1", "a1", "", "", "unknown"}).is_ok());
        ASSERT_TRUE((*d)->put_node({"n2", "127.0.0.1:2", "a2", "eu", "fra", "none"}).is_ok());
        ASSERT_TRUE((*d)->put_node({"n1", "127.0.0.1:3", "a1b", "", "", "unknown"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant(tenant("acme", "n1", "00000000000000ab")).is_ok());
        ASSERT_TRUE((*d)->put_tenant(tenant("beta", "n2")).is_ok());
        ASSERT_TRUE((*d)->remove_tenant("beta").is_ok());
        ASSERT_TRUE((*d)->remove_node("n2").is_ok());
        EXPECT_EQ((*d)->maps()->nodes.size(), 1u);
    }
    auto d = Directory::open(path);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    auto m = (*d)->maps();
    EXPECT_EQ(m->id, id);
    EXPECT_EQ(m->starts, 2);  // a start is counted each time it opens (§2.3)
    ASSERT_EQ(m->nodes.size(), 1u);
    EXPECT_EQ(m->nodes.at("n1").addr, "127.0.0.1:3");
    EXPECT_EQ(m->nodes.at("n1").token, "a1b");
    ASSERT_EQ(m->tenants.size(), 1u);
    EXPECT_EQ(m->tenants.at("acme").node, "n1");
    EXPECT_EQ(m->tenants.at("acme").lineage, "00000000000000ab");
}

// Copies, failovers, quotas and the lease record (§4.1's pairs, replicas, leases and the
// tenants' forked, failed_from and quota): each visible in the maps once written and the same
// after a reopen; a node removed takes the pairs and replica records naming it.
TEST(Directory, CopiesFailoversAndQuotasSurviveReopen) {
    test::TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    {
        auto opened = Directory::open(path);
        ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
        Directory& d = **opened;
        EXPECT_EQ(d.maps()->history.size(), 16u);
        for (const char* n : {"n1", "n2", "n3", "n4"}) {
            ASSERT_TRUE(d.put_node({n, "127.0.0.1:1", "t", "", "", "takes"}).is_ok());
        }
        ASSERT_TRUE(d.put_tenant(tenant("acme", "n1", "00000000000000ab")).is_ok());
        ASSERT_TRUE(d.put_tenant(tenant("beta", "n3")).is_ok());
        ASSERT_TRUE(d.put_tenant(tenant("gone", "n3")).is_ok());
        ASSERT_TRUE(d.put_pair("n3", "n4").is_ok());
        ASSERT_TRUE(d.put_replica("acme", "n2").is_ok());
        ASSERT_TRUE(d.put_replica("gone", "n2").is_ok());
        ASSERT_TRUE(d.remove_tenant("gone").is_ok());  // its replica record goes with it
        Quota q;
        q.limits[0] = 1000;  // bytes
        q.limits[4] = 0;     // rows_per_s: zero is a limit, not none
        ASSERT_TRUE(d.set_quota("acme", q).is_ok());
        EXPECT_EQ(d.maps()->copy_of(d.maps()->tenants.at("acme")), "n2");
        EXPECT_EQ(d.maps()->copy_of(d.maps()->tenants.at("beta")), "n4");
        EXPECT_TRUE(d.maps()->is_standby("n4"));
        ASSERT_TRUE(d.fail_over_tenant("acme", "n2", "n1", "00000000000000cd").is_ok());
        EXPECT_EQ(d.maps()->replicas.count("acme"), 0u);  // the replica is the primary now
        ASSERT_TRUE(d.put_lease_record({5000, 1234, "127.0.0.1:8090"}).is_ok());
        EXPECT_FALSE(d.fail_over_tenant("nosuch", "n2", "n1", "").is_ok());  // require 1
        // An import not yet activated (shard/handoff.h) stays unleased on the copy promoted.
        TenantRow imported;
        imported.name = "inbound";
        imported.node = "n1";
        imported.state = "importing";
        ASSERT_TRUE(d.put_tenant(imported).is_ok());
        ASSERT_TRUE(d.put_replica("inbound", "n2").is_ok());
        ASSERT_TRUE(d.fail_over_tenant("inbound", "n2", "n1", "").is_ok());
        EXPECT_EQ(d.maps()->tenants.at("inbound").state, "importing");
        EXPECT_EQ(d.maps()->tenants.at("inbound").node, "n2");
    }
    auto opened = Directory::open(path);
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    Directory& d = **opened;
    auto m = d.maps();
    const TenantRow& acme = m->tenants.at("acme");
    EXPECT_EQ(acme.node, "n2");
    EXPECT_EQ(acme.failed_from, "n1");
    EXPECT_EQ(acme.forked, "00000000000000cd");
    EXPECT_EQ(acme.lineage, "00000000000000ab");
    ASSERT_TRUE(acme.quota.has_value());
    EXPECT_EQ(acme.quota->limits[0], 1000u);
    EXPECT_EQ(acme.quota->limits[4], 0u);
    EXPECT_FALSE(acme.quota->limits[1].has_value());
    EXPECT_FALSE(m->tenants.at("beta").quota.has_value());
    EXPECT_EQ(m->tenants.count("gone"), 0u);
    EXPECT_TRUE(m->replicas.empty());
    ASSERT_EQ(m->pairs.size(), 1u);
    EXPECT_EQ(m->pairs.at("n3"), "n4");
    ASSERT_TRUE(m->lease_record.has_value());
    EXPECT_EQ(m->lease_record->ms, 5000);
    EXPECT_EQ(m->lease_record->at_ms, 1234);
    EXPECT_EQ(m->lease_record->by, "127.0.0.1:8090");
    EXPECT_EQ(m->authority(), m->id + "/global");

    // A move's flip clears failed_from: a move cuts nothing (§9.12).
    ASSERT_TRUE(d.flip_tenant("acme", "n1").is_ok());
    EXPECT_EQ(d.maps()->tenants.at("acme").failed_from, "");
    ASSERT_TRUE(d.set_quota("acme", std::nullopt).is_ok());
    EXPECT_FALSE(d.maps()->tenants.at("acme").quota.has_value());
    ASSERT_TRUE(d.put_replica("beta", "n1").is_ok());
    ASSERT_TRUE(d.remove_node("n4").is_ok());  // the pair naming it goes
    EXPECT_TRUE(d.maps()->pairs.empty());
    ASSERT_TRUE(d.remove_node("n1").is_ok());  // the replica record on it goes
    EXPECT_TRUE(d.maps()->replicas.empty());
    d.close();
    auto again = Directory::open(path);
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    EXPECT_TRUE((*again)->maps()->pairs.empty());
    EXPECT_TRUE((*again)->maps()->replicas.empty());
    EXPECT_EQ((*again)->maps()->tenants.at("acme").failed_from, "");
}

// A pair's change keeps the old standby's copies as replica rows (put_pair's and remove_pair's
// `kept`), from a list the caller read before the write. The rows are written only for what is
// still true under the write's lock: a tenant of that list deleted, moved off the node, failed
// over or given a replica of its own since gets no row naming the old standby, and nothing is
// kept once the pair names another standby. Each case is the list a racing request left stale.
TEST(Directory, APairsKeptRowsAreWrittenOnlyForWhatStillHoldsUnderTheWrite) {
    test::TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    {
        auto opened = Directory::open(path);
        ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
        Directory& d = **opened;
        for (const char* n : {"n1", "n2", "n3", "n4", "n5"}) {
            ASSERT_TRUE(d.put_node({n, "127.0.0.1:1", "t", "", "", "takes"}).is_ok());
        }
        for (const char* t : {"stays", "deleted", "moved", "failed", "own"}) {
            ASSERT_TRUE(d.put_tenant(tenant(t, "n1")).is_ok());
        }
        ASSERT_TRUE(d.put_pair("n1", "n3").is_ok());
        const std::vector<std::string> listed = {"stays", "deleted", "moved", "failed", "own"};
        // What happened between the list and the pair's write.
        ASSERT_TRUE(d.remove_tenant("deleted").is_ok());
        ASSERT_TRUE(d.flip_tenant("moved", "n2").is_ok());
        ASSERT_TRUE(d.fail_over_tenant("failed", "n3", "n1", "").is_ok());
        ASSERT_TRUE(d.put_replica("own", "n2").is_ok());

        ASSERT_TRUE(d.put_pair("n1", "n4", listed, "n3").is_ok());
        auto m = d.maps();
        EXPECT_EQ(m->pairs.at("n1"), "n4");
        EXPECT_EQ(m->replicas.at("stays"), "n3");  // the one still on n1 with no row of its own
        EXPECT_EQ(m->replicas.count("deleted"), 0u);
        EXPECT_EQ(m->replicas.count("moved"), 0u);
        EXPECT_EQ(m->replicas.count("failed"), 0u);
        EXPECT_EQ(m->replicas.at("own"), "n2");  // its own row is not replaced
        EXPECT_EQ(m->tenants.count("deleted"), 0u);

        // A list read while the pair named n3, written after it was changed to n4: nothing kept.
        ASSERT_TRUE(d.remove_replica("stays").is_ok());
        ASSERT_TRUE(d.put_pair("n1", "n5", {"stays"}, "n3").is_ok());
        EXPECT_EQ(d.maps()->replicas.count("stays"), 0u);
        EXPECT_EQ(d.maps()->pairs.at("n1"), "n5");
        ASSERT_TRUE(d.remove_pair("n1", {"stays"}, "n4").is_ok());
        EXPECT_EQ(d.maps()->replicas.count("stays"), 0u);
        EXPECT_EQ(d.maps()->pairs.count("n1"), 0u);

        // remove_pair filters as put_pair does: the moved tenant gets no row.
        ASSERT_TRUE(d.put_pair("n1", "n3").is_ok());
        ASSERT_TRUE(d.flip_tenant("moved", "n1").is_ok());
        ASSERT_TRUE(d.put_tenant(tenant("later", "n1")).is_ok());
        ASSERT_TRUE(d.flip_tenant("moved", "n5").is_ok());
        ASSERT_TRUE(d.remove_pair("n1", {"moved", "later"}, "n3").is_ok());
        EXPECT_EQ(d.maps()->replicas.count("moved"), 0u);
        EXPECT_EQ(d.maps()->replicas.at("later"), "n3");
    }
    // The same rows after a reopen: what was written is what the maps said.
    auto again = Directory::open(path);
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    auto m = (*again)->maps();
    EXPECT_EQ(m->replicas.count("stays"), 0u);
    EXPECT_EQ(m->replicas.count("moved"), 0u);
    EXPECT_EQ(m->replicas.count("failed"), 0u);
    EXPECT_EQ(m->replicas.at("own"), "n2");
    EXPECT_EQ(m->replicas.at("later"), "n3");
    EXPECT_EQ(m->pairs.count("n1"), 0u);
}

// The thaws undone moves owe (Move::roll_back): recorded in the block that puts the row back,
// there after a reopen (a router restarted asks them), forgotten once paid, and gone with the
// node or the tenant they name.
TEST(Directory, OwedThawsSurviveReopenUntilPaidOrTheirNodeOrTenantGoes) {
    test::TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    using Thaws = std::map<std::string, std::map<std::string, std::set<std::string>>, std::less<>>;
    {
        auto d = Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        for (const char* n : {"n1", "n2"}) {
            ASSERT_TRUE((*d)->put_node({n, "127.0.0.1:1", "", "", "", "unknown"}).is_ok());
        }
        ASSERT_TRUE((*d)->put_tenant(tenant("acme", "n1"), OwedThaw{"n1", "acme", "f1"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant(tenant("acme", "n1"), OwedThaw{"n1", "acme", "f2"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant(tenant("beta", "n1"), OwedThaw{"n1", "beta", "f3"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant(tenant("gamma", "n2"), OwedThaw{"n2", "gamma", "f4"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant(tenant("delta", "n1")).is_ok());
        EXPECT_EQ((*d)->maps()->thaws, (Thaws{{"n1", {{"acme", {"f1", "f2"}}, {"beta", {"f3"}}}},
                                              {"n2", {{"gamma", {"f4"}}}}}));
    }
    {
        auto d = Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        EXPECT_EQ((*d)->maps()->thaws, (Thaws{{"n1", {{"acme", {"f1", "f2"}}, {"beta", {"f3"}}}},
                                              {"n2", {{"gamma", {"f4"}}}}}));
        ASSERT_TRUE((*d)->paid_thaw({"n1", "acme", "f1"}).is_ok());
        ASSERT_TRUE((*d)->paid_thaw({"n1", "acme", "f9"}).is_ok());  // none such: nothing
        ASSERT_TRUE((*d)->remove_tenant("beta").is_ok());
        EXPECT_EQ((*d)->maps()->thaws,
                  (Thaws{{"n1", {{"acme", {"f2"}}}}, {"n2", {{"gamma", {"f4"}}}}}));
        ASSERT_TRUE((*d)->remove_node("n2").is_ok());
        EXPECT_EQ((*d)->maps()->thaws, (Thaws{{"n1", {{"acme", {"f2"}}}}}));
    }
    auto d = Directory::open(path);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    EXPECT_EQ((*d)->maps()->thaws, (Thaws{{"n1", {{"acme", {"f2"}}}}}));
    ASSERT_TRUE((*d)->paid_thaw({"n1", "acme", "f2"}).is_ok());
    EXPECT_TRUE((*d)->maps()->thaws.empty());
}

TEST(Directory, NamesAreChecked) {
    EXPECT_TRUE(valid_name("acme-1_x"));
    EXPECT_FALSE(valid_name(""));
    EXPECT_FALSE(valid_name("Acme"));
    EXPECT_FALSE(valid_name("a!"));
    EXPECT_FALSE(valid_name(std::string(65, 'a')));
}

}  // namespace
}  // namespace fenec::shard::directory_test
