// test/shard/failover_test.cc: failing a node over (shard/failover.h) in process, over a real
// directory file and a host whose nodes answer promotions as each test scripts them: the order,
// the quota before the promotion, the directory's one statement, the cut, the grants, the
// unreplicated tenants and the pair, the waiting tenant of §9.3, and the refusals of §9.1–§9.2.
#include "shard/failover.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <set>
#include <thread>

#include "server/obs/metrics.h"
#include "test/server/node/node_fixture.h"

namespace fenec::shard::failover_test {
namespace {

using namespace std::chrono_literals;

class FakeHost final : public FailoverHost {
  public:
    explicit FakeHost(Directory& d) : d_(d) {}
    std::shared_ptr<const DirectoryMaps> maps() const override { return d_.maps(); }
    Directory& directory() override { return d_; }
    bool claim(const std::string& tenant, std::string_view what) override {
        std::lock_guard lock(mu_);
        // As Router::claim: a tenant reserved for a failover goes to a failover's claim alone,
        // which ends the reservation.
        if (what != failover_claim && reserved_.contains(tenant)) return false;
        const bool took = claims_.emplace(tenant, std::string(what)).second;
        if (took && what == failover_claim) reserved_.erase(tenant);
        // The holder lets go just after refusing this claim, before the failover has put the
        // tenant to wait: its release finds no waiting entry (Failover::released) then.
        if (!took && let_go_on_refusal.erase(tenant)) claims_.erase(tenant);
        return took;
    }
    void release(const std::string& tenant) override {
        {
            std::lock_guard lock(mu_);
            claims_.erase(tenant);
        }
        if (failover) failover->released(tenant);
    }
    // The claim on `tenant` let go without telling the failover (its released() comes later,
    // when the test calls it): the window between a holder's release and its settling.
    void drop_claim(const std::string& tenant) {
        std::lock_guard lock(mu_);
        claims_.erase(tenant);
    }
    bool reserve(const std::string& tenant) override {
        std::lock_guard lock(mu_);
        reserved_.insert(tenant);
        return claims_.contains(tenant);
    }
    void unreserve(const std::string& tenant) override {
        std::lock_guard lock(mu_);
        reserved_.erase(tenant);
    }
    // The tenants reserved for a failover now: every way out of a parked wait ends its own.
    std::set<std::string> reserved() const {
        std::lock_guard lock(mu_);
        return reserved_;
    }
    std::string held_by(const std::string& tenant) override {
        std::lock_guard lock(mu_);
        auto it = claims_.find(tenant);
        return it == claims_.end() ? "" : it->second;
    }
    PromoteReply promote(const NodeRow& node, const std::string& tenant,
                         const PromoteWire& ask) override {
        std::unique_lock lock(mu_);
        // Promotions in flight together: each waits up to a second for `together` of them.
        ++in_flight_;
        most_in_flight_ = std::max(most_in_flight_, in_flight_);
        cv_.notify_all();
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return in_flight_ >= together; });
        --in_flight_;
        log_.push_back("promote " + tenant + " on " + node.name + " lineage=" + ask.lineage +
                       " forked=" + ask.forked + " term=" + std::to_string(ask.term) +
                       (ask.force ? " force" : ""));
        PromoteReply r;
        r.answered = true;
        if (refuse_.contains(tenant)) {
            r.status = 409;
            r.error = refuse_[tenant];
            return r;
        }
        r.status = 200;
        r.forked = true;
        // Per tenant, so it does not depend on which of the promotions run at once came first:
        // the tenant's first letter, then its promotions so far.
        r.history = "0000000000" + hex2(tenant[0]) + "00f" + std::to_string(++histories_[tenant]);
        r.lineage = ask.force ? "00000000000000ee" : ask.lineage;
        return r;
    }
    bool send_quota(const NodeRow& node, const TenantRow& tenant) override {
        std::lock_guard lock(mu_);
        quota_asks_.push_back(tenant.name + " to " + node.name);
        if (tenant.quota) log_.push_back("quota " + tenant.name + " to " + node.name);
        return true;
    }
    // Every tenant whose quota went to its copy before the promotion, a quota or none.
    std::vector<std::string> quota_asks() const {
        std::lock_guard lock(mu_);
        return quota_asks_;
    }
    void cut(const std::string& tenant, const std::string& from) override {
        std::lock_guard lock(mu_);
        log_.push_back("cut " + tenant + " from " + from);
    }
    void grant_now(const std::string& node) override {
        std::lock_guard lock(mu_);
        grants_.push_back(node);
    }
    void failover_ended(const std::string& node, bool) override {
        std::lock_guard lock(mu_);
        log_.push_back("ended " + node);
    }
    bool fence(const std::string& node, const std::vector<std::string>& tenants) override {
        std::lock_guard lock(mu_);
        for (const std::string& t : tenants) fences_.push_back("fence " + t + " on " + node);
        return fence_answer;
    }
    void unfence(const std::string& node, const std::vector<std::string>& tenants) override {
        std::lock_guard lock(mu_);
        for (const std::string& t : tenants) fences_.push_back("unfence " + t + " on " + node);
    }
    std::vector<std::string> fences() const {
        std::lock_guard lock(mu_);
        return fences_;
    }
    bool fence_answer = true;  // what fence() answers: false, its bound passed
    void withhold(const std::string& node, const std::string& tenant) override {
        std::lock_guard lock(mu_);
        log_.push_back("withhold " + tenant + " from " + node);
    }
    void restore(const std::string& node, const std::string& tenant) override {
        std::lock_guard lock(mu_);
        log_.push_back("restore " + tenant + " to " + node);
    }
    void wait_for_standbys(int64_t) override {
        std::lock_guard lock(mu_);
        log_.push_back("standbys");
    }
    void repair(std::string_view) override {
        std::lock_guard lock(mu_);
        ++repairs_;
    }
    void note(const std::string& line, std::string_view event,
              std::vector<obs::JsonField>) override {
        std::lock_guard lock(mu_);
        if (!event.empty()) events_.push_back(std::string(event));
        notes_.push_back(line);
    }

    void refuse(const std::string& tenant, std::string why) {
        std::lock_guard lock(mu_);
        refuse_[tenant] = std::move(why);
    }
    void accept(const std::string& tenant) {
        std::lock_guard lock(mu_);
        refuse_.erase(tenant);
    }
    std::vector<std::string> log() const {
        std::lock_guard lock(mu_);
        return log_;
    }
    std::vector<std::string> grants() const {
        std::lock_guard lock(mu_);
        return grants_;
    }
    std::vector<std::string> events() const {
        std::lock_guard lock(mu_);
        return events_;
    }
    std::vector<std::string> notes() const {
        std::lock_guard lock(mu_);
        return notes_;
    }
    int repairs() const {
        std::lock_guard lock(mu_);
        return repairs_;
    }
    int most_in_flight() const {
        std::lock_guard lock(mu_);
        return most_in_flight_;
    }
    // The log's lines about `tenant`, in order.
    std::vector<std::string> log_of(const std::string& tenant) const {
        std::vector<std::string> out;
        for (const std::string& line : log()) {
            if (line.find(" " + tenant + " ") != std::string::npos) out.push_back(line);
        }
        return out;
    }
    static std::string hex2(char c) {
        static constexpr char digits[] = "0123456789abcdef";
        const auto u = static_cast<unsigned char>(c);
        return {digits[u >> 4], digits[u & 15]};
    }

    int together = 1;  // promotion waits for this many in flight (up to a second)
    std::set<std::string> let_go_on_refusal;  // under mu_ once a test has begun

    Failover* failover = nullptr;

  private:
    Directory& d_;
    mutable std::mutex mu_;
    std::map<std::string, std::string> claims_;
    std::set<std::string> reserved_;
    std::map<std::string, std::string> refuse_;
    std::vector<std::string> log_, grants_, events_, notes_, fences_, quota_asks_;
    std::map<std::string, int> histories_;
    int repairs_ = 0;
    std::condition_variable cv_;
    int in_flight_ = 0, most_in_flight_ = 0;
};

struct Fixture {
    test::TempDir dir;
    std::unique_ptr<Directory> d;
    std::unique_ptr<FakeHost> host;
    obs::Registry metrics;
    std::unique_ptr<Failover> failover;
    Fixture() {
        auto opened = Directory::open(dir.path() + "/shard.fenec");
        EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
        d = std::move(opened.value());
        host = std::make_unique<FakeHost>(*d);
        failover = std::make_unique<Failover>(*host, metrics);
        host->failover = failover.get();
    }
    ~Fixture() { failover->stop(); }
    void node(const std::string& name) {
        NodeRow n;
        n.name = name;
        n.addr = "127.0.0.1:1";
        EXPECT_TRUE(d->put_node(n).is_ok());
    }
    void tenant(const std::string& name, const std::string& on, const std::string& lineage) {
        TenantRow t;
        t.name = name;
        t.node = on;
        t.lineage = lineage;
        EXPECT_TRUE(d->put_tenant(t).is_ok());
    }
    // Nodes n1 and n2, and `name` on n1 with its replica on n2.
    void on_n1_replicated_on_n2(const std::string& name, const std::string& lineage) {
        for (const char* n : {"n1", "n2"}) node(n);
        tenant(name, "n1", lineage);
        ASSERT_TRUE(d->put_replica(name, "n2").is_ok());
    }
};

template <class F>
bool eventually(F f) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(2ms);
    }
    return f();
}

TEST(Failover, UnknownNodeAndNothingToFailOverOnto) {  // §18 case 60
    Fixture f;
    f.node("n1");
    f.node("n2");
    f.tenant("acme", "n1", "00000000000000a1");
    EXPECT_EQ(f.failover->fail_over("n8", false, "hand").status, 404);
    const FailoverResult r = f.failover->fail_over("n1", false, "hand");
    EXPECT_EQ(r.status, 409);
    EXPECT_NE(r.error.find("nothing to fail over onto"), std::string::npos) << r.error;
    EXPECT_TRUE(f.host->log().empty());
}

// A node that holds no tenant has nothing to fail over: a standby is told so, naming its pair,
// rather than that it has no copy to fail over onto (it keeps its pair's).
TEST(Failover, ANodeHoldingNoTenantHasNothingToFailOver) {
    Fixture f;
    f.node("n1");
    f.node("n2");
    f.node("n3");
    f.tenant("acme", "n1", "00000000000000a1");
    ASSERT_TRUE(f.d->put_pair("n1", "n2").is_ok());
    FailoverResult r = f.failover->fail_over("n2", false, "hand");
    EXPECT_EQ(r.status, 409);
    EXPECT_NE(r.error.find("holds no tenant, only the copies it keeps as the standby of `n1`"),
              std::string::npos)
        << r.error;
    r = f.failover->fail_over("n3", false, "hand");
    EXPECT_EQ(r.status, 409);
    EXPECT_NE(r.error.find("node `n3` holds no tenant and no replica"), std::string::npos)
        << r.error;
    EXPECT_TRUE(f.host->log().empty());
}

TEST(Failover, EachTenantInNameOrderOntoItsCopyQuotaFirstThenCut) {  // §18 cases 55, 56
    Fixture f;
    for (const char* n : {"n1", "n2", "n3"}) f.node(n);
    f.tenant("beta", "n1", "00000000000000b1");
    f.tenant("acme", "n1", "00000000000000a1");
    f.tenant("gamma", "n1", "00000000000000c1");  // no copy: failed
    f.tenant("delta", "n2", "00000000000000d1");  // its replica on n1: unreplicated after
    Quota q;
    q.limits[1] = 10;
    ASSERT_TRUE(f.d->set_quota("acme", q).is_ok());
    ASSERT_TRUE(f.d->put_replica("acme", "n2").is_ok());
    ASSERT_TRUE(f.d->put_replica("beta", "n3").is_ok());
    ASSERT_TRUE(f.d->put_replica("delta", "n1").is_ok());
    const FailoverResult r = f.failover->fail_over("n1", false, "hand");
    EXPECT_EQ(r.status, 502);  // gamma failed
    ASSERT_EQ(r.promoted.size(), 2u);
    EXPECT_EQ(r.promoted[0], (std::pair<std::string, std::string>{"acme", "n2"}));
    EXPECT_EQ(r.promoted[1], (std::pair<std::string, std::string>{"beta", "n3"}));
    ASSERT_EQ(r.failed.size(), 1u);
    EXPECT_EQ(r.failed[0], (std::pair<std::string, std::string>{"gamma", "it has no replica"}));
    EXPECT_EQ(r.unreplicated, std::vector<std::string>{"delta"});
    // The quota goes to each copy before its promotion, beta's too, which has none: a copy that
    // held a quota since removed is sent the removal (QuotaSync sends nothing when none is owed).
    auto asks = f.host->quota_asks();
    std::sort(asks.begin(), asks.end());
    EXPECT_EQ(asks, (std::vector<std::string>{"acme to n2", "beta to n3"}));
    // Each tenant's steps in order; the tenants' promotions run at once, so not one after the
    // other (APromotionDoesNotWaitForAnother). Each is withheld from its copy's grants from
    // before its row until the standby routers were sent the rows, once for all.
    EXPECT_EQ(f.host->log().size(), 10u);
    EXPECT_EQ(f.host->log_of("acme"),
              (std::vector<std::string>{
                  "quota acme to n2", "promote acme on n2 lineage=00000000000000a1 forked= term=0",
                  "withhold acme from n2", "cut acme from n1", "restore acme to n2"}));
    EXPECT_EQ(f.host->log_of("beta"),
              (std::vector<std::string>{
                  "promote beta on n3 lineage=00000000000000b1 forked= term=0",
                  "withhold beta from n3", "cut beta from n1", "restore beta to n3"}));
    const auto all = f.host->log();
    const auto standbys = std::find(all.begin(), all.end(), "standbys");
    ASSERT_NE(standbys, all.end());
    EXPECT_EQ(std::count(all.begin(), all.end(), "standbys"), 1);
    for (const char* line : {"cut acme from n1", "cut beta from n1"}) {
        EXPECT_LT(std::find(all.begin(), all.end(), line), standbys) << line;
    }
    for (const char* line : {"restore acme to n2", "restore beta to n3"}) {
        EXPECT_GT(std::find(all.begin(), all.end(), line), standbys) << line;
    }
    const auto m = f.d->maps();
    EXPECT_EQ(m->tenants.at("acme").node, "n2");
    EXPECT_EQ(m->tenants.at("acme").failed_from, "n1");
    EXPECT_EQ(m->tenants.at("acme").forked, "00000000006100f1");
    EXPECT_EQ(m->tenants.at("gamma").node, "n1");
    EXPECT_TRUE(m->replicas.empty());  // acme's and beta's promoted, delta's lost with n1
    const auto grants = f.host->grants();
    EXPECT_NE(std::find(grants.begin(), grants.end(), "n2"), grants.end());
    EXPECT_NE(std::find(grants.begin(), grants.end(), "n3"), grants.end());
    EXPECT_NE(std::find(grants.begin(), grants.end(), "n1"), grants.end());
    EXPECT_EQ(f.host->repairs(), 1);
    EXPECT_EQ(f.host->events(), std::vector<std::string>{"failover"});
    EXPECT_EQ(
        failover_body("n1", r),
        R"({"node":"n1","promoted":[{"tenant":"acme","to":"n2"},{"tenant":"beta","to":"n3"}],)"
        R"("failed":[{"tenant":"gamma","why":"it has no replica"}],"waiting":[],)"
        R"("unreplicated":["delta"]})");
    // A second failover of a tenant promoted before names the history it forked then.
    ASSERT_TRUE(f.d->put_replica("acme", "n1").is_ok());
    f.failover->fail_over("n2", false, "hand");
    const auto second = f.host->log();
    ASSERT_GE(second.size(), 5u);
    EXPECT_EQ(std::vector<std::string>(second.end() - 5, second.end()),
              (std::vector<std::string>{
                  "promote acme on n1 lineage=00000000000000a1 forked=00000000006100f1 term=0",
                  "withhold acme from n1", "cut acme from n2", "standbys", "restore acme to n1"}));
}

// A node's tenants are promoted at once (§9.1): its last tenant writes again after the slowest
// promotion, not after the sum of them. Here each promotion waits for two to be in flight.
TEST(Failover, APromotionDoesNotWaitForAnother) {
    Fixture f;
    for (const char* n : {"n1", "n2", "n3"}) f.node(n);
    f.tenant("acme", "n1", "00000000000000a1");
    f.tenant("beta", "n1", "00000000000000b1");
    ASSERT_TRUE(f.d->put_replica("acme", "n2").is_ok());
    ASSERT_TRUE(f.d->put_replica("beta", "n3").is_ok());
    f.host->together = 2;
    const FailoverResult r = f.failover->fail_over("n1", false, "lease");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.promoted.size(), 2u);
    EXPECT_EQ(f.host->most_in_flight(), 2);
}

TEST(Failover, APairWhoseEveryTenantMovedIsGoneAndARefusalIsNamed) {  // §18 cases 55, 57
    Fixture f;
    f.node("n1");
    f.node("n2");
    f.tenant("acme", "n1", "00000000000000a1");
    ASSERT_TRUE(f.d->put_pair("n1", "n2").is_ok());
    f.host->refuse("acme", "acme's copy here is of another lineage");
    FailoverResult r = f.failover->fail_over("n1", false, "hand");
    EXPECT_EQ(r.status, 502);
    ASSERT_EQ(r.failed.size(), 1u);
    EXPECT_NE(r.failed[0].second.find("node `n2` refused (409): acme's copy here is of another"),
              std::string::npos)
        << r.failed[0].second;
    EXPECT_EQ(f.d->maps()->pairs.size(), 1u);  // kept for a second call
    EXPECT_EQ(f.d->maps()->tenants.at("acme").node, "n1");
}

TEST(Failover, ForceIsAuditedAndRecordsTheLineageTheCopyNames) {
    Fixture f;
    f.node("n1");
    f.node("n2");
    f.tenant("acme", "n1", "00000000000000a1");
    ASSERT_TRUE(f.d->put_pair("n1", "n2").is_ok());
    const FailoverResult r = f.failover->fail_over("n1", true, "hand");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(f.host->events(), (std::vector<std::string>{"force", "failover"}));
    EXPECT_EQ(f.d->maps()->tenants.at("acme").lineage, "00000000000000ee");
    EXPECT_TRUE(f.d->maps()->pairs.empty());  // every tenant moved: the standby is a primary
}

TEST(Failover, ATenantHeldByAnotherOperationWaitsThenGoesOntoTheCopyItHad) {  // §18 case 59
    Fixture f;
    for (const char* n : {"n1", "n2", "n3"}) f.node(n);
    f.tenant("acme", "n1", "00000000000000a1");
    f.tenant("beta", "n1", "00000000000000b1");
    ASSERT_TRUE(f.d->put_replica("acme", "n2").is_ok());
    ASSERT_TRUE(f.d->put_replica("beta", "n2").is_ok());
    ASSERT_TRUE(f.host->claim("acme", "move"));
    ASSERT_TRUE(f.host->claim("beta", "quota"));
    const FailoverResult r = f.failover->fail_over("n1", false, "lease");
    ASSERT_EQ(r.waiting.size(), 2u);
    EXPECT_EQ(r.waiting[0], (std::pair<std::string, std::string>{"acme", "move"}));
    EXPECT_EQ(f.d->maps()->tenants.at("acme").node, "n1");
    // Both reserved: once their holders let go, the failover is the next to claim them.
    EXPECT_EQ(f.host->reserved(), (std::set<std::string>{"acme", "beta"}));
    // The move rolls back (acme still on n1, its copy still n2): promoted as it ends.
    f.host->release("acme");
    ASSERT_TRUE(eventually([&] { return f.d->maps()->tenants.at("acme").node == "n2"; }));
    // beta's copy changed meanwhile: not promoted, said so.
    ASSERT_TRUE(f.d->put_replica("beta", "n3").is_ok());
    f.host->release("beta");
    ASSERT_TRUE(eventually([&] {
        for (const std::string& n : f.host->notes()) {
            if (n.find("`beta` waited to be failed over onto `n2`") != std::string::npos)
                return true;
        }
        return false;
    }));
    EXPECT_EQ(f.d->maps()->tenants.at("beta").node, "n1");
    const auto log = f.host->log();
    EXPECT_NE(std::find(log.begin(), log.end(), "withhold acme from n1"), log.end());
    EXPECT_NE(std::find(log.begin(), log.end(), "restore acme to n1"), log.end());
    EXPECT_NE(std::find(log.begin(), log.end(), "restore beta to n1"), log.end());
    // acme's reservation ended with the failover's claim, beta's as it was not promoted.
    EXPECT_TRUE(f.host->reserved().empty()) << ::testing::PrintToString(f.host->reserved());
}

// A failover stopped (the router's drain) with a tenant still parked: no settling will run, so
// its reservation ends, or no other operation could claim the tenant again.
TEST(Failover, AStoppedFailoverLetsItsParkedTenantsGo) {
    Fixture f;
    ASSERT_NO_FATAL_FAILURE(f.on_n1_replicated_on_n2("acme", "00000000000000a1"));
    ASSERT_TRUE(f.host->claim("acme", "move"));
    ASSERT_EQ(f.failover->fail_over("n1", false, "lease").waiting.size(), 1u);
    EXPECT_EQ(f.host->reserved(), (std::set<std::string>{"acme"}));
    f.failover->stop();
    EXPECT_TRUE(f.host->reserved().empty());
    f.host->release("acme");
    EXPECT_TRUE(f.host->claim("acme", "quota"));
}

// §9.1 under leases: a failover by hand fences the node's tenants before any promotion, and
// when the node neither lets them go nor lapses in time nothing is promoted (503), the claims
// are released and the tenants are back in its lists. A failover on a lapse fences nothing:
// the node has certainly lapsed and its grants have named no tenant since.
TEST(Failover, ByHandNothingIsPromotedUntilTheNodeIsFenced) {
    Fixture f;
    ASSERT_NO_FATAL_FAILURE(f.on_n1_replicated_on_n2("acme", "00000000000000a1"));
    f.host->fence_answer = false;
    FailoverResult r = f.failover->fail_over("n1", false, "hand");
    EXPECT_EQ(r.status, 503) << r.error;
    EXPECT_TRUE(r.promoted.empty());
    EXPECT_TRUE(f.host->log_of("acme").empty());  // no quota sent, no promote, no cut
    EXPECT_EQ(f.d->maps()->tenants.at("acme").node, "n1");
    EXPECT_EQ(f.host->fences(),
              (std::vector<std::string>{"fence acme on n1", "unfence acme on n1"}));
    EXPECT_TRUE(f.host->claim("acme", "move"));  // released
    f.host->release("acme");

    f.host->fence_answer = true;
    r = f.failover->fail_over("n1", false, "hand");
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(f.d->maps()->tenants.at("acme").node, "n2");
    EXPECT_EQ(f.host->fences().size(), 4u);

    ASSERT_TRUE(f.d->put_replica("acme", "n1").is_ok());
    r = f.failover->fail_over("n2", false, "lease");
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(f.host->fences().size(), 4u);  // none for a lapse
}

// A claim let go between the failover's refused claim and its waiting entry: the release found
// no entry, so nothing but the failover itself can settle the tenant. It is promoted all the
// same, not withheld from its node for good.
TEST(Failover, AClaimLetGoBeforeTheTenantWaitsIsNotLost) {
    Fixture f;
    ASSERT_NO_FATAL_FAILURE(f.on_n1_replicated_on_n2("acme", "00000000000000a1"));
    ASSERT_TRUE(f.host->claim("acme", "repair"));
    f.host->let_go_on_refusal.insert("acme");
    const FailoverResult r = f.failover->fail_over("n1", false, "lease");
    ASSERT_EQ(r.waiting.size(), 1u);
    EXPECT_TRUE(eventually([&] { return f.d->maps()->tenants.at("acme").node == "n2"; }));
    EXPECT_TRUE(f.host->reserved().empty());
}

// The worker has run everything queued before this: a lapse of an unknown node queued after it,
// which logs `ended n9` once run.
void drain(Fixture& f) {
    f.failover->lapsed("n9");
    ASSERT_TRUE(eventually([&] {
        const auto log = f.host->log();
        return std::find(log.begin(), log.end(), "ended n9") != log.end();
    }));
}

// A tenant parked twice (its node's lapse judged again while another operation still holds it)
// is withheld once when both are settled: the second park gives the first's withholding back.
// Counted, two withholdings and one restore left it out of the node's grants for good.
TEST(Failover, ATenantParkedTwiceIsWithheldAsManyTimesAsItIsGivenBack) {
    Fixture f;
    ASSERT_NO_FATAL_FAILURE(f.on_n1_replicated_on_n2("beta", "00000000000000b1"));
    ASSERT_TRUE(f.host->claim("beta", "move"));
    f.failover->fail_over("n1", false, "lease");
    f.failover->fail_over("n1", false, "lease");
    f.host->release("beta");
    ASSERT_NO_FATAL_FAILURE(drain(f));
    const auto log = f.host->log_of("beta");
    const auto withheld = std::count(log.begin(), log.end(), "withhold beta from n1");
    const auto restored = std::count(log.begin(), log.end(), "restore beta to n1");
    EXPECT_EQ(withheld, 2) << ::testing::PrintToString(log);
    EXPECT_EQ(restored, withheld) << ::testing::PrintToString(log);
    EXPECT_TRUE(f.host->reserved().empty());
}

// A failover by hand that ends 503 (the node neither let its tenants go nor lapsed) fails nothing
// over, the tenants it parked neither: beta, held by a move, was promoted unfenced once the move
// let go, beside a lease the node may still hold. Its withholding is given back instead.
TEST(Failover, ByHandA503LeavesTheParkedTenantsWhereTheyAre) {
    Fixture f;
    for (const char* n : {"n1", "n2"}) f.node(n);
    f.tenant("acme", "n1", "00000000000000a1");
    f.tenant("beta", "n1", "00000000000000b1");
    ASSERT_TRUE(f.d->put_replica("acme", "n2").is_ok());
    ASSERT_TRUE(f.d->put_replica("beta", "n2").is_ok());
    ASSERT_TRUE(f.host->claim("beta", "move"));
    f.host->fence_answer = false;
    const FailoverResult r = f.failover->fail_over("n1", false, "hand");
    ASSERT_EQ(r.status, 503) << r.error;
    f.host->release("beta");
    ASSERT_NO_FATAL_FAILURE(drain(f));
    EXPECT_EQ(f.d->maps()->tenants.at("beta").node, "n1");
    EXPECT_EQ(f.host->log_of("beta"),
              (std::vector<std::string>{"withhold beta from n1", "restore beta to n1"}));
    EXPECT_TRUE(f.host->reserved().empty());  // parked, then given up with the 503
}

// A tenant parked by a lapse's failover, whose holder let go just before a failover by hand
// claimed it (its settling not yet run), belongs to that failover: when its promotion there
// fails (502) and the tenant goes back in the node's lists, the old entry is gone, and the late
// settling promotes nothing beside the lease the node may take again.
TEST(Failover, ByHandAClaimedTenantsOldEntryIsNotSettledAfterIt) {
    Fixture f;
    ASSERT_NO_FATAL_FAILURE(f.on_n1_replicated_on_n2("acme", "00000000000000a1"));
    ASSERT_TRUE(f.host->claim("acme", "move"));
    ASSERT_EQ(f.failover->fail_over("n1", false, "lease").waiting.size(), 1u);
    f.host->drop_claim("acme");  // the move let go; its settling not queued yet
    f.host->refuse("acme", "not caught up");
    ASSERT_EQ(f.failover->fail_over("n1", false, "hand").status, 502);
    EXPECT_EQ(f.host->fences(),
              (std::vector<std::string>{"fence acme on n1", "unfence acme on n1"}));
    f.host->accept("acme");
    f.failover->released("acme");  // the late settling
    ASSERT_NO_FATAL_FAILURE(drain(f));
    EXPECT_EQ(f.d->maps()->tenants.at("acme").node, "n1");
    EXPECT_TRUE(f.host->reserved().empty());  // ended by the failover by hand's claim
}

}  // namespace
}  // namespace fenec::shard::failover_test
