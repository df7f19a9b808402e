// test/shard/placement_test.cc: where a tenant's own replica goes (router.md §8.2), on maps built
// by hand: the region, the zone classes, a copy held already, the fewest replicas, the name, and
// the nodes never chosen (the primary, standbys, nodes with a standby, other regions); and where
// a tenant goes (§6.4 step 2, §7.1): the fewest bytes of its region, ties by name, never a
// standby, a node that did not answer or a move's source, and why none when none is left.
#include "shard/placement.h"

#include <gtest/gtest.h>

namespace fenec::shard::placement_test {
namespace {

struct Maps {
    DirectoryMaps m;
    Maps& node(const std::string& name, const std::string& region, const std::string& zone) {
        NodeRow n;
        n.name = name;
        n.region = region;
        n.zone = zone;
        m.nodes[name] = n;
        return *this;
    }
    Maps& tenant(const std::string& name, const std::string& node) {
        TenantRow t;
        t.name = name;
        t.node = node;
        m.tenants[name] = t;
        return *this;
    }
    const TenantRow& row(const std::string& name) const { return m.tenants.at(name); }
};

std::string chosen(const std::variant<ReplicaPlace, NoReplica>& v) {
    if (const auto* p = std::get_if<ReplicaPlace>(&v)) return p->node;
    return "none: " + std::get<NoReplica>(v).why;
}

TEST(Placement, AnotherZoneOfTheSameRegionFirst) {  // §18 case 50
    Maps s;
    s.node("eu1", "eu", "fra").node("eu2", "eu", "fra").node("eu3", "eu", "ams");
    s.node("us1", "us", "iad").tenant("acme", "eu1");
    auto v = place_replica(s.m, s.row("acme"));
    EXPECT_EQ(chosen(v), "eu3");
    EXPECT_FALSE(std::get<ReplicaPlace>(v).same_zone);
}

TEST(Placement, TheSameZoneWhenNothingElseIsFree) {  // §18 case 51
    Maps s;
    s.node("eu1", "eu", "fra").node("eu2", "eu", "fra").node("us1", "us", "iad");
    s.tenant("acme", "eu1");
    auto v = place_replica(s.m, s.row("acme"));
    EXPECT_EQ(chosen(v), "eu2");
    EXPECT_TRUE(std::get<ReplicaPlace>(v).same_zone);
    EXPECT_TRUE(same_zone(s.m, "eu1", "eu2"));
    s.node("eu2", "eu", "ams");
    EXPECT_FALSE(same_zone(s.m, "eu1", "eu2"));
}

TEST(Placement, NoOtherNodeInTheRegionGivesNone) {  // §18 case 52
    Maps s;
    s.node("eu1", "eu", "fra").node("us1", "us", "iad").tenant("acme", "eu1");
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))),
              "none: there is no other node in region `eu` to keep it");
    Maps u;
    u.node("n1", "", "").tenant("acme", "n1");
    EXPECT_EQ(chosen(place_replica(u.m, u.row("acme"))), "none: there is no other node to keep it");
}

TEST(Placement, AnUnrecordedZoneRanksBetween) {  // §18 case 53
    Maps s;
    s.node("eu1", "eu", "fra").node("eu2", "eu", "").node("eu3", "eu", "fra").tenant("acme", "eu1");
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "eu2");
    s.node("eu4", "eu", "ams");
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "eu4");
}

TEST(Placement, ANodeHoldingACopyBeatsFewerReplicasButNotTheZone) {  // §18 case 54
    Maps s;
    s.node("n1", "", "").node("n2", "", "").node("n3", "", "").tenant("acme", "n1");
    s.tenant("beta", "n1");
    s.m.replicas["beta"] = "n2";  // n2 keeps one of n1's tenants already: n3 has fewer
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "n3");
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"), {"n2"})), "n2");
    Maps z;  // another zone still comes before a copy held
    z.node("eu1", "eu", "fra").node("eu2", "eu", "fra").node("eu3", "eu", "ams");
    z.tenant("acme", "eu1");
    EXPECT_EQ(chosen(place_replica(z.m, z.row("acme"), {"eu2"})), "eu3");
}

TEST(Placement, FewestReplicasOfThisPrimaryThenFewestCopiesThenTheName) {
    Maps s;
    s.node("n1", "", "").node("n2", "", "").node("n3", "", "").node("n4", "", "");
    s.tenant("acme", "n1").tenant("beta", "n1").tenant("gamma", "n3").tenant("delta", "n2");
    s.m.replicas["beta"] = "n2";  // one of n1's on n2
    // n3 and n4 keep none of n1's; n3 holds a primary (gamma), n4 nothing: n4.
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "n4");
    s.tenant("eps", "n4");  // now n3 and n4 hold one copy each: the name decides
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "n3");
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"), {}, "n3")), "n4");  // n3 excluded
}

TEST(Placement, NeverThePrimaryAStandbyOrANodeWithAStandby) {
    Maps s;
    s.node("n1", "", "").node("n2", "", "").node("n3", "", "").node("n4", "", "");
    s.tenant("acme", "n1");
    s.m.pairs["n2"] = "n3";  // n2 has a standby, n3 is one
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "n4");
    s.m.pairs["n4"] = "n1";
    EXPECT_EQ(chosen(place_replica(s.m, s.row("acme"))), "none: there is no other node to keep it");
}

// Where a tenant goes, as a name or the reason none: its bytes from `bytes` (absent: silent).
std::string placed(const Maps& s, std::optional<std::string> region,
                   const std::map<std::string, uint64_t>& bytes, std::string_view excluded = {}) {
    auto v = place_tenant(s.m, region, excluded, [&](const NodeRow& n) {
        auto it = bytes.find(n.name);
        return it == bytes.end() ? std::nullopt : std::optional<uint64_t>(it->second);
    });
    if (const NodeRow* const* n = std::get_if<const NodeRow*>(&v)) return (*n)->name;
    switch (std::get<NoTenantPlace>(v)) {
        case NoTenantPlace::no_node: return "no node";
        case NoTenantPlace::only_excluded: return "only excluded";
        case NoTenantPlace::standbys_only: return "standbys only";
        case NoTenantPlace::none_answered: return "none answered";
    }
    return "?";
}

TEST(PlaceTenant, FewestBytesOfTheRegionTiesByName) {  // §18 cases 32, 47
    Maps s;
    s.node("eu1", "eu", "fra").node("us1", "us", "iad").node("us2", "us", "pdx");
    s.node("n1", "", "");
    const std::map<std::string, uint64_t> bytes = {
        {"eu1", 10}, {"us1", 300}, {"us2", 200}, {"n1", 50}};
    EXPECT_EQ(placed(s, "us", bytes), "us2");
    EXPECT_EQ(placed(s, std::nullopt, bytes), "eu1");
    EXPECT_EQ(placed(s, "", bytes), "n1");  // "" is the unnamed region
    EXPECT_EQ(placed(s, "us", {{"eu1", 10}, {"us1", 200}, {"us2", 200}, {"n1", 50}}), "us1");
    EXPECT_EQ(placed(s, "us", {{"us1", 300}}), "us1") << "us2 did not answer";
    EXPECT_EQ(placed(s, "us", bytes, "us2"), "us1") << "never the move's source";
}

TEST(PlaceTenant, WhyNoneIsLeft) {  // §6.4 step 2, §7.1
    Maps s;
    s.node("eu1", "eu", "fra").node("us1", "us", "iad").node("us2", "us", "pdx");
    s.m.pairs["us1"] = "us2";
    const std::map<std::string, uint64_t> bytes = {{"eu1", 1}, {"us1", 1}, {"us2", 0}};
    EXPECT_EQ(placed(s, "us", bytes), "us1") << "never a standby";
    EXPECT_EQ(placed(s, "ap", bytes), "no node");
    EXPECT_EQ(placed(s, "eu", bytes, "eu1"), "only excluded");
    EXPECT_EQ(placed(s, "us", bytes, "us1"), "only excluded");
    EXPECT_EQ(placed(s, "eu", {}), "none answered");
    s.m.nodes.erase("us1");
    s.m.pairs.clear();
    s.m.pairs["eu1"] = "us2";  // a pair across regions cannot be recorded; the rule holds anyway
    EXPECT_EQ(placed(s, "us", bytes), "standbys only");
    Maps empty;
    EXPECT_EQ(placed(empty, std::nullopt, bytes), "no node");
}

}  // namespace
}  // namespace fenec::shard::placement_test
