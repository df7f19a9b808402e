// test/shard/leases_test.cc: the router's leasing threads and judge (shard/leases.h) in process,
// against a host whose nodes answer as each test scripts them, on the real monotonic clock with
// leases of a few hundred milliseconds. What is asserted exactly is the safety side: no node is
// judged lapsed sooner than 1.1 leases after its last counted answer, nor while a grant is out;
// the liveness side (renewals every third, a failover soon after the bound) with wide margins.
#include "shard/leases.h"

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <thread>

#include "server/obs/metrics.h"

namespace fenec::shard::leases_test {
namespace {

using namespace std::chrono_literals;

struct Sent {
    std::string node;
    GrantWire grant;
    int64_t at_ns = 0;
};

// How a scripted node answers a grant.
enum class Mode { ran, silent, fenced, takes_none, hold };

class FakeHost final : public LeaseHost {
  public:
    explicit FakeHost(const engine::Clock& clock) : clock_(clock) {
        auto m = std::make_shared<DirectoryMaps>();
        m->id = "0123456789abcdef";
        m->scope = "global";
        m->starts = 7;
        m->term = 2;
        m->history = "fedcba9876543210";
        maps_ = m;
    }
    void add_node(const std::string& name, Mode mode) {
        std::lock_guard lock(mu_);
        auto m = std::make_shared<DirectoryMaps>(*maps_);
        NodeRow n;
        n.name = name;
        m->nodes[name] = n;
        maps_ = m;
        modes_[name] = mode;
    }
    void add_tenant(const std::string& name, const std::string& node) {
        std::lock_guard lock(mu_);
        auto m = std::make_shared<DirectoryMaps>(*maps_);
        TenantRow t;
        t.name = name;
        t.node = node;
        m->tenants[name] = t;
        maps_ = m;
    }
    void set_mode(const std::string& node, Mode mode) {
        std::lock_guard lock(mu_);
        modes_[node] = mode;
    }
    void set_record(int64_t ms) {
        std::lock_guard lock(mu_);
        auto m = std::make_shared<DirectoryMaps>(*maps_);
        m->lease_record = LeaseRecord{ms, 0, "before"};
        maps_ = m;
    }

    std::shared_ptr<const DirectoryMaps> maps() const override {
        std::lock_guard lock(mu_);
        return maps_;
    }
    GrantReply grant(const NodeRow& node, const GrantWire& g, int64_t deadline_ns) override {
        Mode mode;
        {
            std::lock_guard lock(mu_);
            sent_.push_back({node.name, g, clock_.steady_ns()});
            mode = modes_[node.name];
        }
        GrantReply r;
        switch (mode) {
            case Mode::ran:
                r.kind = GrantReply::Kind::taken;
                r.took = true;
                r.ran = g.acked != 0;  // a lease runs once an answer is acknowledged
                r.list = g.list;
                break;
            case Mode::silent:
                break;
            case Mode::fenced:
                r.kind = GrantReply::Kind::fenced;
                r.holder = "held by another at term 9";
                break;
            case Mode::takes_none:
                r.kind = GrantReply::Kind::takes_none;
                break;
            case Mode::hold:  // the answer never comes: the call runs to its bound
                std::this_thread::sleep_for(
                    std::chrono::nanoseconds(deadline_ns - clock_.steady_ns()));
                break;
        }
        std::lock_guard lock(mu_);
        if (r.kind == GrantReply::Kind::taken) last_answer_ns_[node.name] = clock_.steady_ns();
        ++back_[node.name];
        return r;
    }
    engine::Status put_lease_record(const LeaseRecord& record) override {
        std::lock_guard lock(mu_);
        records_.push_back(record.ms);
        if (!sent_.empty()) record_after_grant_ = true;
        auto m = std::make_shared<DirectoryMaps>(*maps_);
        m->lease_record = record;
        maps_ = m;
        return engine::Status::ok();
    }
    void wait_for_standbys(int64_t) override {}
    bool superseded() const override { return superseded_.load(); }
    void set_superseded() { superseded_ = true; }
    void lapsed(const std::string& node) override {
        std::lock_guard lock(mu_);
        lapsed_.push_back({node, clock_.steady_ns(), last_answer_ns_[node]});
    }
    void answered(const std::string& node, bool returned) override {
        std::lock_guard lock(mu_);
        ++answers_[node];
        if (returned) returned_.push_back(node);
    }
    void note(const std::string& log, std::string_view event,
              std::vector<obs::JsonField>) override {
        std::lock_guard lock(mu_);
        notes_.push_back(std::string(event) + ": " + log);
    }

    std::vector<Sent> sent(const std::string& node) const {
        std::lock_guard lock(mu_);
        std::vector<Sent> out;
        for (const Sent& s : sent_) {
            if (s.node == node) out.push_back(s);
        }
        return out;
    }
    struct Lapse {
        std::string node;
        int64_t at_ns;
        int64_t last_answer_ns;
    };
    std::vector<Lapse> lapses() const {
        std::lock_guard lock(mu_);
        return lapsed_;
    }
    std::vector<int64_t> records() const {
        std::lock_guard lock(mu_);
        return records_;
    }
    bool record_after_grant() const {
        std::lock_guard lock(mu_);
        return record_after_grant_;
    }
    std::vector<std::string> notes() const {
        std::lock_guard lock(mu_);
        return notes_;
    }
    std::vector<std::string> returned() const {
        std::lock_guard lock(mu_);
        return returned_;
    }
    // The grant calls to `node` that have returned (answered or not).
    size_t back(const std::string& node) const {
        std::lock_guard lock(mu_);
        auto it = back_.find(node);
        return it == back_.end() ? 0 : it->second;
    }
    // The counted answers the lease thread has finished with (LeaseHost::answered).
    size_t answers(const std::string& node) const {
        std::lock_guard lock(mu_);
        auto it = answers_.find(node);
        return it == answers_.end() ? 0 : it->second;
    }

  private:
    const engine::Clock& clock_;
    mutable std::mutex mu_;
    std::shared_ptr<const DirectoryMaps> maps_;
    std::map<std::string, Mode> modes_;
    std::vector<Sent> sent_;
    std::map<std::string, int64_t> last_answer_ns_;
    std::vector<Lapse> lapsed_;
    std::vector<int64_t> records_;
    bool record_after_grant_ = false;
    std::atomic<bool> superseded_{false};
    std::vector<std::string> notes_;
    std::vector<std::string> returned_;
    std::map<std::string, size_t> answers_;
    std::map<std::string, size_t> back_;
};

template <class F>
bool eventually(F f, std::chrono::milliseconds bound = 5000ms) {
    const auto end = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(2ms);
    }
    return f();
}

constexpr int64_t lease_ms = 300;
constexpr int64_t ms = 1'000'000;

struct Fixture {
    engine::SystemClock clock;
    FakeHost host{clock};
    obs::Registry metrics;
    std::unique_ptr<Leases> leases;
    void start(int64_t lease = lease_ms) {
        leases = std::make_unique<Leases>(LeaseOptions{lease, "127.0.0.1:1"}, host, clock, metrics);
        leases->start();
    }
};

TEST(Leases, GrantsGoAtOnceThenEveryThirdEachAcknowledgingTheAnswerBefore) {  // §18 case 61
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() >= 6; }));
    f.leases->stop();
    const auto sent = f.host.sent("n1");
    EXPECT_EQ(sent[0].grant.grant, (uint64_t{7} << 32) + 1);  // starts × 2^32 + n
    EXPECT_EQ(sent[0].grant.acked, 0u);
    ASSERT_TRUE(sent[0].grant.tenants.has_value());
    EXPECT_EQ(*sent[0].grant.tenants, std::vector<std::string>{"acme"});
    EXPECT_EQ(sent[0].grant.authority, "0123456789abcdef/global");
    EXPECT_EQ(sent[0].grant.term, 2);
    EXPECT_EQ(sent[0].grant.history, "fedcba9876543210");
    EXPECT_EQ(sent[0].grant.lease_ms, lease_ms);
    // The first answer ran nothing (nothing acknowledged): the second went at once.
    EXPECT_LT(sent[1].at_ns - sent[0].at_ns, 50 * ms);
    EXPECT_EQ(sent[1].grant.acked, sent[0].grant.grant);
    for (size_t i = 2; i < sent.size(); ++i) {
        EXPECT_EQ(sent[i].grant.grant, sent[i - 1].grant.grant + 1);
        EXPECT_EQ(sent[i].grant.acked, sent[i - 1].grant.grant);
        const int64_t gap = sent[i].at_ns - sent[i - 1].at_ns;
        EXPECT_GE(gap, lease_ms * ms / 3 - ms) << "grant " << i << " came too soon";
        EXPECT_FALSE(sent[i].grant.tenants.has_value()) << "the list was held: not sent again";
    }
    EXPECT_TRUE(f.host.lapses().empty());
}

TEST(Leases, ASilentNodeLapsesNoSoonerThanATenthPastItsLastAnswer) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_node("n2", Mode::ran);
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() >= 3; }));
    f.host.set_mode("n1", Mode::silent);
    ASSERT_TRUE(eventually([&] { return !f.host.lapses().empty(); }));
    // An observation window, not a synchronisation: no second lapse may come in it.
    std::this_thread::sleep_for(std::chrono::milliseconds(lease_ms));
    f.leases->stop();
    const auto lapses = f.host.lapses();
    ASSERT_EQ(lapses.size(), 1u);
    EXPECT_EQ(lapses[0].node, "n1");
    const int64_t after = lapses[0].at_ns - lapses[0].last_answer_ns;
    EXPECT_GT(after, lease_ms * ms * 11 / 10);
    EXPECT_LT(after, lease_ms * ms * 11 / 10 + 200 * ms);  // within the judge's ticks, widely
    auto v = f.leases->view("n1");
    ASSERT_TRUE(v.has_value());
    EXPECT_TRUE(v->failed_over);
}

TEST(Leases, NoLapseWhileAGrantIsOut) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.start(600);
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() >= 3; }));
    f.host.set_mode("n1", Mode::hold);  // each call runs to its bound (200 ms), answering nothing
    ASSERT_TRUE(eventually([&] { return !f.host.lapses().empty(); }));
    f.leases->stop();
    const auto lapses = f.host.lapses();
    const auto sent = f.host.sent("n1");
    // The lapse came after the last grant's call ended (sent + its bound, a third of the lease
    // cut short at the lapse point), never during it, and no later than a judge's look after
    // the lapse point: a grant out does not hold it back (1.1 × 600 ms, not up to 1.33 ×).
    const int64_t lapse_point = lapses[0].last_answer_ns + 660 * ms;
    int64_t last_call_end = 0;
    for (const Sent& s : sent) {
        if (s.at_ns < lapses[0].at_ns) last_call_end = std::min(s.at_ns + 600 * ms / 3, lapse_point);
    }
    EXPECT_GE(lapses[0].at_ns, last_call_end);
    EXPECT_GT(lapses[0].at_ns - lapses[0].last_answer_ns, 660 * ms);
    EXPECT_LT(lapses[0].at_ns - lapses[0].last_answer_ns, 660 * ms + 100 * ms);
}

TEST(Leases, AFencedNodeOrOneWithoutLeasesIsNeverFailedOverAndSaidOnce) {
    Fixture f;
    f.host.add_node("n1", Mode::fenced);
    f.host.add_node("n2", Mode::takes_none);
    f.start();
    // An observation window of three leases: no lapse may come in it.
    std::this_thread::sleep_for(std::chrono::milliseconds(lease_ms * 3));
    f.leases->stop();
    EXPECT_TRUE(f.host.lapses().empty());
    size_t fenced = 0, none = 0;
    for (const std::string& n : f.host.notes()) {
        fenced += n.starts_with("fenced: fenced at `n1`");
        none += n.find("`n2` takes no lease") != std::string::npos;
    }
    EXPECT_EQ(fenced, 1u);
    EXPECT_EQ(none, 1u);
    EXPECT_GE(f.host.sent("n1").size(), 3u);  // still granted: it may take ours again later
}

// A node held by another authority's lease (fenced) for longer than a lease, which then takes
// our grants (that lease over), is leased again. Its grants were cut at its lapse point, long
// past, so every answer came back after its bound and was counted as none: never leased again
// and never failed over either, until the router restarted.
TEST(Leases, ANodeFencedPastItsLapsePointIsLeasedOnceItTakesOurGrants) {
    Fixture f;
    f.host.add_node("n1", Mode::fenced);
    f.host.add_tenant("acme", "n1");
    f.start();
    // Fenced past the lapse point (1.1 × the lease after the start, which counts as an answer):
    // no answer counted for longer than that.
    ASSERT_TRUE(eventually([&] {
        auto v = f.leases->view("n1");
        return f.host.back("n1") >= 3 && v && v->age_ms > lease_ms * 11 / 10 + 50;
    }));
    f.host.set_mode("n1", Mode::ran);
    EXPECT_TRUE(eventually(
        [&] {
            auto v = f.leases->view("n1");
            return v && v->takes;
        },
        2000ms));
    f.leases->stop();
    EXPECT_TRUE(f.host.lapses().empty());
}

// Two that withhold one tenant from one node (a failover parking it, a move withholding it from
// its target until the standbys have the flip) each give back only their own: the tenant is named
// again only once both have. A set let the first restore name it under the other's hold.
TEST(Leases, AWithholdingIsGivenBackByEachHolderApart) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.start(3000);
    // The list a grant last sent, once one has gone since `from` grants were sent.
    auto list_after = [&](size_t from) -> std::optional<std::vector<std::string>> {
        std::optional<std::vector<std::string>> last;
        const auto sent = f.host.sent("n1");
        for (size_t i = from; i < sent.size(); ++i) {
            if (sent[i].grant.tenants) last = sent[i].grant.tenants;
        }
        return last;
    };
    ASSERT_TRUE(eventually([&] { return f.host.answers("n1") >= 2; }));
    f.leases->withhold("n1", "acme");
    f.leases->withhold("n1", "acme");
    size_t from = f.host.sent("n1").size();
    f.leases->changed("n1");
    ASSERT_TRUE(eventually([&] { return list_after(from).has_value(); }));
    EXPECT_EQ(*list_after(from), std::vector<std::string>{});
    f.leases->restore("n1", "acme");  // one holder gives it back: still withheld
    from = f.host.sent("n1").size();
    f.leases->changed("n1");
    // A grant gone since: its list, if it sends one, is recorded as it goes.
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() > from; }));
    const auto still = list_after(from);
    EXPECT_TRUE(!still || still->empty()) << "named again under the other's hold";
    f.leases->restore("n1", "acme");
    from = f.host.sent("n1").size();
    f.leases->changed("n1");
    ASSERT_TRUE(eventually([&] { return list_after(from).has_value(); }));
    EXPECT_EQ(*list_after(from), std::vector<std::string>{"acme"});
    f.leases->stop();
}

// A fence on a node this router leases nothing to yet counts its withholding as any other, so
// the failover's give-back (unfence) takes back its own and not a move's. Before, the fence
// returned before counting, and its give-back lifted the move's: the node was granted a tenant
// the move had withheld from it.
TEST(Leases, AFenceOnANodeNotYetLeasedGivesBackOnlyItsOwnWithholding) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.leases =
        std::make_unique<Leases>(LeaseOptions{3000, "127.0.0.1:1"}, f.host, f.clock, f.metrics);
    f.leases->withhold("n1", "acme");              // a move's
    ASSERT_TRUE(f.leases->fence("n1", {"acme"}));  // nothing leased yet: let go at once
    f.leases->restore("n1", "acme");               // the failover's unfence (Cluster::unfence)
    f.leases->start();
    ASSERT_TRUE(eventually([&] { return !f.host.sent("n1").empty(); }));
    const auto first = f.host.sent("n1")[0].grant.tenants;
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(*first, std::vector<std::string>{}) << "the move's withholding was given back";
    f.leases->stop();
}

TEST(Leases, AChangedListIsGrantedAtOnce) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.start(3000);  // renewals every second: a grant within 100 ms is the change's
    // The second grant answered and done with: none is out, and the next is a second off.
    ASSERT_TRUE(eventually([&] { return f.host.answers("n1") >= 2; }));
    const size_t before = f.host.sent("n1").size();
    f.host.add_tenant("acme", "n1");
    f.leases->changed("n1");
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() > before; }, 100ms));
    const auto sent = f.host.sent("n1");
    ASSERT_TRUE(sent[before].grant.tenants.has_value());
    EXPECT_EQ(*sent[before].grant.tenants, std::vector<std::string>{"acme"});
    EXPECT_EQ(sent[before].grant.list, sent[before].grant.grant);
    // Withheld (§9.3): the next list names it no more.
    f.leases->withhold("n1", "acme");
    f.leases->changed("n1");
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() > before + 1; }, 100ms));
    EXPECT_EQ(*f.host.sent("n1")[before + 1].grant.tenants, std::vector<std::string>{});
    f.leases->stop();
}

TEST(Leases, TheRecordIsRaisedBeforeTheFirstGrantAndANodeCountedByItUntilItRuns) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.start();
    ASSERT_TRUE(eventually([&] { return !f.host.sent("n1").empty(); }));
    EXPECT_EQ(f.host.records(), std::vector<int64_t>{lease_ms});  // none before: raised to L
    EXPECT_FALSE(f.host.record_after_grant());
    f.leases->stop();

    // A record longer than the lease: kept, a node not yet run is counted by it, and lowered
    // once the router has led 1.1 × the record.
    Fixture g;
    g.host.set_record(900);
    g.host.add_node("n1", Mode::silent);  // never answers: counted by the record
    g.start();
    EXPECT_TRUE(g.host.records().empty());
    ASSERT_TRUE(eventually([&] { return !g.host.lapses().empty(); }));
    const auto lapse = g.host.lapses()[0];
    EXPECT_EQ(lapse.last_answer_ns, 0);  // never answered: counted from leasing's start
    EXPECT_GE(g.leases->record_ms(), 300);
    ASSERT_TRUE(eventually([&] { return !g.host.records().empty(); }));
    EXPECT_EQ(g.host.records(), std::vector<int64_t>{lease_ms});
    EXPECT_EQ(g.leases->record_ms(), lease_ms);
    g.leases->stop();
}

TEST(Leases, ANodeBackFromAFailoverIsReturnedOnce) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() >= 2; }));
    f.host.set_mode("n1", Mode::silent);
    ASSERT_TRUE(eventually([&] { return !f.host.lapses().empty(); }));
    f.host.set_mode("n1", Mode::ran);
    ASSERT_TRUE(eventually([&] { return !f.host.returned().empty(); }));
    // An observation window: the answers after the first are no returns.
    std::this_thread::sleep_for(std::chrono::milliseconds(lease_ms));
    f.leases->stop();
    EXPECT_EQ(f.host.returned(), std::vector<std::string>{"n1"});
    EXPECT_FALSE(f.leases->view("n1")->failed_over);
}

// A router promoted over after its judge found n1 lapsed, before the failover began
// (Cluster::lapsed): no failover runs, so n1 is not failed over (the gauge an alert watches back
// to 0), and from then on no node is judged lapsed, n1 again or n2 gone silent.
TEST(Leases, ALapseARouterPromotedOverNeverActedOnIsUndoneAndNoneFollows) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_node("n2", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.sent("n2").size() >= 2; }));
    f.host.set_mode("n1", Mode::silent);
    ASSERT_TRUE(eventually([&] { return !f.host.lapses().empty(); }));
    EXPECT_TRUE(f.leases->view("n1")->failed_over);
    EXPECT_NE(f.metrics.render().find("fenec_router_node_failed_over{node=\"n1\"} 1"),
              std::string::npos);
    f.host.set_superseded();
    f.leases->lapse_undone("n1");
    EXPECT_FALSE(f.leases->view("n1")->failed_over);
    EXPECT_NE(f.metrics.render().find("fenec_router_node_failed_over{node=\"n1\"} 0"),
              std::string::npos)
        << f.metrics.render();
    const size_t sent = f.host.sent("n2").size();
    f.host.set_mode("n2", Mode::silent);
    // Six more grants to n2, a third of a lease apart: past 1.1 leases of its silence, each
    // answer judged as it came back, so a lapse of either node would have been found.
    ASSERT_TRUE(eventually([&] { return f.host.sent("n2").size() >= sent + 6; }));
    f.leases->stop();
    EXPECT_EQ(f.host.lapses().size(), 1u) << "neither n1 again nor n2";
    EXPECT_FALSE(f.leases->view("n1")->failed_over);
    EXPECT_FALSE(f.leases->view("n2")->failed_over);
}

// A node judged lapsed and heard again while its failover runs takes no lease for its tenants:
// the failover is promoting their copies, and a lease for them on the node would overlap theirs.
// From the lapse until the failover ends its grants name no tenant; then those left there.
TEST(Leases, ANodeJudgedLapsedIsGrantedNoTenantUntilItsFailoverEnds) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.answers("n1") >= 2; }));
    f.host.set_mode("n1", Mode::silent);
    ASSERT_TRUE(eventually([&] { return !f.host.lapses().empty(); }));
    const size_t at_lapse = f.host.sent("n1").size();
    f.host.set_mode("n1", Mode::ran);  // heard again before its failover ended
    ASSERT_TRUE(eventually([&] { return f.host.sent("n1").size() >= at_lapse + 3; }));
    const auto lists_since = [&](size_t from) {
        std::vector<std::vector<std::string>> lists;
        const auto sent = f.host.sent("n1");
        for (size_t i = from; i < sent.size(); ++i) {
            if (sent[i].grant.tenants) lists.push_back(*sent[i].grant.tenants);
        }
        return lists;
    };
    EXPECT_EQ(lists_since(at_lapse), std::vector<std::vector<std::string>>{{}});
    const size_t at_end = f.host.sent("n1").size();
    f.leases->failover_ended("n1");  // it left acme there (no copy to promote, say)
    ASSERT_TRUE(eventually([&] { return !lists_since(at_end).empty(); }));
    EXPECT_EQ(lists_since(at_end).front(), std::vector<std::string>{"acme"});
    f.leases->stop();
}

// A failover that left a tenant on a node still silent (its promotion failed: the copy's node
// did not answer, say) runs again once the node is judged lapsed again, a lease after it ended,
// rather than leave the tenant refusing writes until the node comes back. The second judgment is
// the first's: no sooner than 1.1 leases after the node's last counted answer. A failover that
// left nothing there is not run again.
TEST(Leases, AFailoverThatLeftTenantsOnASilentNodeRunsAgain) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_node("n2", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.answers("n1") >= 2 && f.host.answers("n2") >= 2; }));
    f.host.set_mode("n1", Mode::silent);
    f.host.set_mode("n2", Mode::silent);
    auto lapses_of = [&](const std::string& node) {
        std::vector<FakeHost::Lapse> out;
        for (const auto& l : f.host.lapses()) {
            if (l.node == node) out.push_back(l);
        }
        return out;
    };
    ASSERT_TRUE(eventually([&] { return !lapses_of("n1").empty() && !lapses_of("n2").empty(); }));
    const int64_t ended_ns = f.clock.steady_ns();
    // n2's end first: any retry of it would be due no later than n1's, so it is judged in the
    // same pass as n1's retry or before it; stopping joins that pass.
    f.leases->failover_ended("n2");  // nothing there
    f.leases->failover_ended("n1");  // acme left there
    ASSERT_TRUE(eventually([&] { return lapses_of("n1").size() >= 2; })) << "not run again";
    const auto again = lapses_of("n1")[1];
    EXPECT_GE(again.at_ns, ended_ns + lease_ms * 1'000'000);
    EXPECT_GE(again.at_ns, again.last_answer_ns + lease_ms * 1'100'000);
    f.leases->stop();
    EXPECT_EQ(lapses_of("n2").size(), 1u);
}

// A failover by hand of a node already judged lapsed, and not heard since, needs no wait: it has
// certainly lapsed. Its grants now run each to its whole bound (a node that holds every call),
// so at almost no instant is none out, which lapsed() asks; the fence answered false at its
// bound (a lease and a half, and a second) and the failover by hand was refused 503.
TEST(Leases, AFenceOfANodeJudgedLapsedEndsAtOnce) {
    Fixture f;
    f.host.add_node("n1", Mode::ran);
    f.host.add_tenant("acme", "n1");
    f.start();
    ASSERT_TRUE(eventually([&] { return f.host.answers("n1") >= 2; }));
    f.host.set_mode("n1", Mode::hold);
    ASSERT_TRUE(eventually([&] { return !f.host.lapses().empty(); }));
    // A grant out to it again (failed over, it has its whole third): the fence ends before that
    // grant's call returns.
    ASSERT_TRUE(eventually([&] { return f.leases->view("n1")->failed_over; }));
    size_t back = 0;
    ASSERT_TRUE(eventually([&] {
        back = f.host.back("n1");
        return f.host.sent("n1").size() > back;
    }));
    EXPECT_TRUE(f.leases->fence("n1", {"acme"}));
    EXPECT_EQ(f.host.back("n1"), back) << "the fence waited for a grant's call to return";
    f.leases->stop();
}

}  // namespace
}  // namespace fenec::shard::leases_test
