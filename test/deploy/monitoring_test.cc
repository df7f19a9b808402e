// test/deploy/monitoring_test.cc: proves the kit's Prometheus and Grafana files
// (deploy/prometheus/, deploy/grafana/) are ones the tools take and name only what the binaries
// export. A small cluster is started once, each process as its unit starts it (kit.h): two nodes,
// the router and a standby router; a tenant is placed with a replica, written, read, failed over
// by hand, and refused for its quota and a wrong token, so most families have samples. Then:
// - `promtool check config` takes prometheus.yml (a copy whose credential files are the test's,
//   holding the cluster's tokens), with the rule file it names; `promtool check rules` takes the
//   rules and `promtool test rules` passes their unit tests;
// - `promtool check metrics` finds nothing wrong in each process's live /_metrics;
// - every `fenec_…` name in the rules and in the dashboard is a series one of the processes
//   exports, every label its selectors match on is one that series carries (from its samples;
//   for a family with none yet, from its row in docs/operations.md, whose names routes_tests
//   holds to the binaries), and every job they select is one prometheus.yml scrapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "test/deploy/kit.h"
#include "test/server/node/node_fixture.h"
#include "test/support/json_value.h"

namespace fenec::test::deploy {
namespace {

// The labels of each family in docs/operations.md's metric tables (`| `name` | type | labels |`).
std::map<std::string, std::set<std::string>> documented_labels() {
    std::map<std::string, std::set<std::string>> out;
    std::istringstream in(slurp(std::string(FENEC_DOCS_DIR) + "/operations.md"));
    std::string line;
    const std::regex row(R"(^\| `(fenec_[a-z0-9_]+)` \| [a-z]+ \| ([^|]*) \|)");
    const std::regex label("`([a-z_]+)`");
    std::smatch m;
    while (std::getline(in, line)) {
        if (!std::regex_search(line, m, row)) continue;
        auto& labels = out[m[1]];
        const std::string cell = m[2];
        for (std::sregex_iterator it(cell.begin(), cell.end(), label), end; it != end; ++it) {
            labels.insert((*it)[1]);
        }
    }
    return out;
}

class Monitoring : public ::testing::Test {
  protected:
    struct Cluster {
        TempDir dir;
        std::map<std::string, std::string> node_env, shard_env;
        std::vector<std::unique_ptr<Process>> processes;  // n1, n2, router, standby
        std::map<std::string, std::string> expositions;   // by process
        std::string error;
    };
    static inline Cluster* cluster_ = nullptr;

    static Process* start(const char* unit_file, const std::map<std::string, std::string>& env,
                          const char* binary, const std::string& name) {
        const Unit unit = read_unit(kit_path("systemd/") + unit_file);
        const std::string root = cluster_->dir.path() + "/" + name;
        const ServiceCommand cmd = service_command(unit, env, binary, root);
        if (!cmd.error.empty()) {
            cluster_->error += name + ": " + cmd.error;
            return nullptr;
        }
        cluster_->processes.push_back(std::make_unique<Process>(cmd.argv, cmd.env, root + ".err"));
        if (cluster_->processes.back()->port() == 0) {
            cluster_->error += name + " did not start: " + slurp(root + ".err");
            return nullptr;
        }
        return cluster_->processes.back().get();
    }

    static void SetUpTestSuite() {
        cluster_ = new Cluster;
        Cluster& c = *cluster_;
        c.node_env = read_env(kit_path("env/fenec-node.env"));
        c.shard_env = read_env(kit_path("env/fenec-shard.env"));
        // n2: the same file, its own name and the admin token the router's file gives it.
        auto n2_env = c.node_env;
        std::string flags = n2_env["FENEC_NODE_FLAGS"];
        flags.replace(flags.find("--node-name n1"), 14, "--node-name n2");
        n2_env["FENEC_NODE_FLAGS"] = flags;
        n2_env["FENEC_ADMIN_TOKEN"] = c.shard_env["FENEC_N2_ADMIN_TOKEN"];

        Process* n1 = start("fenec-node.service", c.node_env, FENEC_NODE_BIN, "n1");
        Process* n2 = start("fenec-node.service", n2_env, FENEC_NODE_BIN, "n2");
        Process* router = start("fenec-shard.service", c.shard_env, FENEC_SHARD_BIN, "router");
        if (!n1 || !n2 || !router) return;
        auto standby_env = c.shard_env;
        standby_env["FENEC_SHARD_PRIMARY"] = "http://127.0.0.1:" + std::to_string(router->port());
        Process* standby =
            start("fenec-shard-standby.service", standby_env, FENEC_SHARD_BIN, "standby");
        if (!standby) return;

        const std::string token = "Bearer " + c.shard_env["FENEC_SHARD_TOKEN"];
        const std::string data = "Bearer " + c.node_env["FENEC_TOKEN"];
        // A connection each: a refused credential closes the one it came on.
        const auto call = [&](const std::string& method, const std::string& target,
                              const std::string& body, const std::string& bearer) {
            Client r(router->port());
            auto a = r.request(method, target, body,
                               {{"Authorization", bearer}, {"Content-Type", "application/json"}});
            return a ? a->status : 0;
        };
        const auto must = [&](int got, int want, const std::string& what) {
            if (got != want) c.error += what + ": " + std::to_string(got) + "; ";
        };
        for (auto [name, p] : {std::pair{"n1", n1}, std::pair{"n2", n2}}) {
            must(call("PUT", std::string("/_shard/nodes/") + name,
                      R"({"addr": "127.0.0.1:)" + std::to_string(p->port()) +
                          R"(", "token_env": "FENEC_)" + (name == std::string("n1") ? "N1" : "N2") +
                          R"(_ADMIN_TOKEN"})",
                      token),
                 201, std::string("register ") + name);
        }
        must(call("PUT", "/_shard/tenants/acme",
                  R"j({"node": "n1", "schema": ["create collection notes (title text)"]})j", token),
             201, "create acme");
        const auto write_until_taken = [&](const std::string& what) {
            if (!wait_until([&] {
                    return call("POST", "/t/acme/c/notes", R"({"title": "hello"})", data) == 201;
                })) {
                c.error += what + " never landed; ";
            }
        };
        write_until_taken("the first write");  // it waits for n1's first grant
        must(call("GET", "/t/acme/c/notes/1", "", data), 200, "read");
        must(call("GET", "/_shard/nodes", "", "Bearer wrong"), 401, "a wrong router token");
        must(call("GET", "/t/acme/c/notes/1", "", "Bearer wrong"), 401, "a wrong data token");
        // Wait for the replica on n2, then fail n1 over by hand (runbook). The kit's router runs
        // --auto-failover: a node that misses its grants for its lapse (a stall of this machine)
        // is failed over by the router itself, before or instead of the call below, which then
        // finds nothing left to fail over (409). So the setup waits on where the router has acme,
        // not on the call's answer alone.
        const auto acme = [&](const char* key) {  // a member of GET /_shard/tenants/acme
            Client r(router->port());
            auto a = r.request("GET", "/_shard/tenants/acme", {}, {{"Authorization", token}});
            std::optional<engine::Value> v;
            if (a && a->status == 200) v = parse_json(a->body);
            const engine::Value* m = v ? json_member(*v, key) : nullptr;
            const auto* s = m ? std::get_if<std::string>(&m->rep) : nullptr;
            return s ? *s : std::string();
        };
        if (!wait_until([&] {
                Client n(n2->port());
                auto a = n.request("GET", "/_admin/tenants/acme", {},
                                   {{"Authorization", "Bearer " + n2_env["FENEC_ADMIN_TOKEN"]}});
                return (a && a->status == 200) || acme("node") == "n2";
            })) {
            c.error += "acme's replica never reached n2; ";
        }
        if (acme("node") == "n1") {
            const int by_hand = call("POST", "/_shard/nodes/n1/failover", "{}", token);
            if (by_hand != 200 && acme("node") != "n2") must(by_hand, 200, "failover n1");
        }
        if (!wait_until([&] { return acme("node") == "n2"; })) {
            c.error += "acme was never failed over onto n2 (it is on `" + acme("node") + "`); ";
        }
        write_until_taken("a write after the failover");
        // The repair the failover started holds the tenant a moment (409 held_by).
        if (!wait_until([&] {
                return call("PUT", "/_shard/tenants/acme/quota", R"({"rows": 1})", token) == 200;
            })) {
            c.error += "the quota was never set; ";
        }
        const int refused = call("POST", "/t/acme/c/notes", R"({"title": "over"})", data);
        if (refused < 400) c.error += "a write past the quota was taken; ";

        const std::vector<std::tuple<std::string, Process*, std::string>> scraped = {
            {"n1", n1, "Bearer " + c.node_env["FENEC_ADMIN_TOKEN"]},
            {"n2", n2, "Bearer " + n2_env["FENEC_ADMIN_TOKEN"]},
            {"router", router, token},
            {"standby", standby, token}};
        for (const auto& [name, p, bearer] : scraped) {
            Client m(p->port());
            auto a = m.request("GET", "/_metrics", {}, {{"Authorization", bearer}});
            if (!a || a->status != 200) {
                c.error += name + "'s /_metrics did not answer; ";
                continue;
            }
            c.expositions[name] = a->body;
        }
    }

    static void TearDownTestSuite() {
        delete cluster_;
        cluster_ = nullptr;
    }

    void SetUp() override { ASSERT_EQ(cluster_->error, "") << "the cluster was not set up"; }

    // Every fenec_ name in `text` checked against what the processes export; answers how many.
    static size_t check_names(const std::string& what, const std::vector<std::string>& exprs) {
        std::map<std::string, Exposition> e;
        for (const auto& [name, body] : cluster_->expositions) e[name] = read_exposition(body);
        const auto docs = documented_labels();
        // Labels Prometheus adds to every series: the target's, and prometheus.yml's own.
        std::set<std::string> target_labels = {"job", "instance"};
        const std::string config = slurp(kit_path("prometheus/prometheus.yml"));
        const std::regex static_label(R"(labels: \{([a-z_]+):)");
        for (std::sregex_iterator it(config.begin(), config.end(), static_label), end; it != end;
             ++it) {
            target_labels.insert((*it)[1]);
        }
        size_t checked = 0;
        for (const std::string& expr : exprs) {
            for (const Selector& s : fenec_selectors(expr)) {
                ++checked;
                std::optional<std::string> family;
                std::set<std::string> labels;
                bool sampled = false;
                for (const auto& [process, x] : e) {
                    auto f = x.family_of(s.name);
                    if (!f) continue;
                    family = f;
                    auto it = x.series_labels.find(s.name);
                    if (it != x.series_labels.end()) {
                        sampled = true;
                        labels.insert(it->second.begin(), it->second.end());
                    }
                }
                if (!family) {
                    ADD_FAILURE() << what << " names " << s.name
                                  << ", which no fenec-node or fenec-shard exports, in: " << expr;
                    continue;
                }
                if (!sampled) {
                    auto d = docs.find(*family);
                    if (d != docs.end()) labels = d->second;
                    if (s.name.ends_with("_bucket")) labels.insert("le");
                }
                for (const std::string& l : s.labels) {
                    EXPECT_TRUE(labels.contains(l) || target_labels.contains(l))
                        << what << " selects " << s.name << " on label " << l
                        << ", which it does not carry (" << (sampled ? "its samples" : "docs")
                        << "), in: " << expr;
                }
            }
        }
        return checked;
    }

    // Every job="…" a file selects is one prometheus.yml scrapes (a job_name, or a relabel's).
    static void check_jobs(const std::string& what, const std::string& text) {
        const std::string config = slurp(kit_path("prometheus/prometheus.yml"));
        std::set<std::string> jobs;
        const std::regex job_name(R"(job_name: ([A-Za-z0-9_-]+))");
        for (std::sregex_iterator it(config.begin(), config.end(), job_name), end; it != end;
             ++it) {
            jobs.insert((*it)[1]);
        }
        const std::regex used(R"re(job="([^"]+)")re");
        size_t n = 0;
        for (std::sregex_iterator it(text.begin(), text.end(), used), end; it != end; ++it, ++n) {
            EXPECT_TRUE(jobs.contains((*it)[1]))
                << what << " selects job " << (*it)[1] << ", which prometheus.yml does not scrape";
        }
        EXPECT_GT(n, 0u) << what << " selects no job";
    }
};

TEST_F(Monitoring, PromtoolTakesTheConfigWithItsRules) {
    TempDir dir;
    for (const char* f : {"prometheus.yml", "fenec-alerts.yml"}) {
        std::string text = slurp(kit_path("prometheus/") + f);
        for (size_t at; (at = text.find("/etc/prometheus/")) != std::string::npos;) {
            text.replace(at, 16, dir.path() + "/");
        }
        write_text(dir.path() + "/" + f, text);
    }
    write_text(dir.path() + "/fenec-node.token", cluster_->node_env["FENEC_ADMIN_TOKEN"] + "\n");
    write_text(dir.path() + "/fenec-shard.token", cluster_->shard_env["FENEC_SHARD_TOKEN"] + "\n");
    const Ran r = run("promtool check config " + quoted(dir.path() + "/prometheus.yml"));
    ASSERT_NE(r.status, 127) << "promtool is missing (ci/setup installs prometheus)";
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("SUCCESS: 1 rule files found"), std::string::npos) << r.output;
}

TEST_F(Monitoring, PromtoolTakesTheRulesAndTheirTests) {
    const Ran check =
        run("promtool check rules " + quoted(kit_path("prometheus/fenec-alerts.yml")));
    EXPECT_EQ(check.status, 0) << check.output;
    const Ran test = run("cd " + quoted(kit_path("prometheus")) +
                         " && promtool test rules fenec-alerts.test.yml");
    EXPECT_EQ(test.status, 0) << test.output;
    EXPECT_NE(test.output.find("SUCCESS"), std::string::npos) << test.output;
}

TEST_F(Monitoring, PromtoolFindsNothingInTheLiveMetrics) {
    TempDir dir;
    ASSERT_EQ(cluster_->expositions.size(), 4u);
    for (const auto& [name, body] : cluster_->expositions) {
        const std::string path = dir.path() + "/" + name + ".prom";
        write_text(path, body);
        const Ran r = run("promtool check metrics < " + quoted(path));
        EXPECT_EQ(r.status, 0) << name << ": " << r.output;
        EXPECT_EQ(r.output, "") << name;
    }
}

TEST_F(Monitoring, AlertsNameOnlyWhatTheBinariesExport) {
    const std::string rules = slurp(kit_path("prometheus/fenec-alerts.yml"));
    // Every line, comments and annotations too (a name an operator reads must exist as well),
    // each on its own so a failure names it; no selector of the file spans two lines.
    std::vector<std::string> lines;
    std::istringstream in(rules);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    EXPECT_GT(check_names("fenec-alerts.yml", lines), 20u);
    check_jobs("fenec-alerts.yml", rules);
}

// The dashboard: a Grafana dashboard JSON whose panels each query the datasource variable, and
// whose every expression and variable query names only exported series.
TEST_F(Monitoring, DashboardNamesOnlyWhatTheBinariesExport) {
    const std::string text = slurp(kit_path("grafana/fenec.json"));
    std::string error;
    const auto json = parse_json(text, &error);
    ASSERT_TRUE(json) << error;
    std::vector<std::string> exprs;
    std::set<int64_t> ids;
    size_t panels = 0;
    const auto* list = std::get_if<engine::List>(&json_member(*json, "panels")->rep);
    ASSERT_NE(list, nullptr);
    for (const engine::Value& p : list->items) {
        ++panels;
        const auto* id = std::get_if<int64_t>(&json_member(p, "id")->rep);
        ASSERT_NE(id, nullptr);
        EXPECT_TRUE(ids.insert(*id).second) << "panel id " << *id << " twice";
        EXPECT_NE(json_member(p, "gridPos"), nullptr);
        const engine::Value* targets = json_member(p, "targets");
        if (!targets) continue;
        const engine::Value* ds = json_member(*json_member(p, "datasource"), "uid");
        ASSERT_NE(ds, nullptr);
        EXPECT_EQ(std::get<std::string>(ds->rep), "${datasource}");
        for (const engine::Value& t : std::get<engine::List>(targets->rep).items) {
            exprs.push_back(std::get<std::string>(json_member(t, "expr")->rep));
        }
    }
    std::set<std::string> variables;
    for (const engine::Value& v :
         std::get<engine::List>(json_member(*json_member(*json, "templating"), "list")->rep)
             .items) {
        variables.insert(std::get<std::string>(json_member(v, "name")->rep));
        if (const engine::Value* d = json_member(v, "definition")) {
            exprs.push_back(std::get<std::string>(d->rep));
        }
    }
    EXPECT_TRUE(variables.contains("datasource"));
    const std::regex var(R"(\$([a-z_]+))");
    for (const std::string& e : exprs) {
        for (std::sregex_iterator it(e.begin(), e.end(), var), end; it != end; ++it) {
            const std::string v = (*it)[1];
            EXPECT_TRUE(v == "__rate_interval" || variables.contains(v))
                << "the dashboard uses $" << v << ", which it does not define: " << e;
        }
    }
    EXPECT_GT(panels, 10u);
    EXPECT_GT(check_names("the dashboard", exprs), 30u);
    std::string all;
    for (const std::string& e : exprs) all += e + "\n";
    check_jobs("the dashboard", all);
}

}  // namespace
}  // namespace fenec::test::deploy
