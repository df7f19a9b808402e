// test/shard/recorded_writes.h: what a test that fails a node over wrote, and what its nodes said
// of their leases, handed to the lease-safety checker (test/support/lease_check.h) at its end.
// Every integration test that fails over writes through it: each write it saw acknowledged is
// recorded (tenant, the node that answered it, id, a key of its own, when it was sent and when
// its answer came back), and, when the nodes take leases, each node's `GET /_admin/lease` is polled
// from a thread of its own. `check` then asserts that every acknowledged write was acknowledged
// inside a lease naming its tenant, that no two nodes held one at once, and that none is missing
// from the tenant's primary afterwards. Network traffic goes to 127.0.0.1 only.
#pragma once

#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test/shard/cluster_fixture.h"
#include "test/support/lease_check.h"
#include "test/support/wait.h"

namespace fenec::test {

// CLOCK_MONOTONIC, in nanoseconds: the one clock a ledger's instants are taken on.
inline int64_t monotonic_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

class RecordedWrites {
  public:
    struct Node {
        std::string name;  // as the directory names it: n1, n2
        uint16_t port = 0;
        std::string admin_token;
    };

    // Polls each of `nodes` for its lease every 2 ms when they take leases (`leased`); a lease
    // shorter than the polling interval could hide from the checker, and the leases tested are
    // hundreds of times longer. Nodes that take none are not polled, and the checker's lease
    // rules say nothing of them.
    RecordedWrites(std::vector<Node> nodes, bool leased) : ledger_(leased) {
        if (!leased) return;
        for (const Node& n : nodes) {
            std::atomic<int64_t>* round = &rounds_.emplace_back(0);
            pollers_.emplace_back([this, n, round] {
                while (!done_) {
                    LeaseReport r;
                    r.node = n.name;
                    r.asked_ns = monotonic_ns();
                    // A stopped node answers nothing: the poll gives up, and a report comes
                    // again once it answers.
                    Client c(n.port, 1000);
                    auto got = c.request("GET", "/_admin/lease", {}, bearer(n.admin_token));
                    r.answered_ns = monotonic_ns();
                    Json j(got ? got->body : "");
                    int64_t left = 0;
                    simdjson::dom::array names;
                    if (got && got->status == 200 && !j.doc["left_ms"].get_int64().get(left) &&
                        !j.doc["tenants"].get_array().get(names)) {
                        r.left_ms = left;
                        for (auto name : names) {
                            r.tenants.emplace_back(std::string_view(name.get_string()));
                        }
                        uint64_t list = 0;
                        if (!j.doc["list"].get_uint64().get(list)) r.list = list;
                        ledger_.lease(std::move(r));
                    }
                    *round = r.asked_ns;
                    std::this_thread::sleep_for(std::chrono::milliseconds(2));
                }
            });
        }
    }
    ~RecordedWrites() { stop(); }
    RecordedWrites(const RecordedWrites&) = delete;
    RecordedWrites& operator=(const RecordedWrites&) = delete;

    // Writes a note to `tenant` whose title is a key of its own through `send` (the body → the
    // answer: through a router, or straight to a node), recording it as acknowledged by `node`
    // when answered 201. `node` is the one the test knows answered: the tenant's primary then.
    // Callable from any thread.
    Reply write(const std::string& tenant, const std::string& node,
                const std::function<Reply(const std::string& body)>& send) {
        AckedWrite w;
        w.tenant = tenant;
        w.node = node;
        w.key = "w" + std::to_string(++keys_) + "-" + node;
        w.sent_ns = monotonic_ns();
        Reply r = send("{\"title\":\"" + w.key + "\"}");
        w.acked_ns = monotonic_ns();
        Json j(r.body);
        simdjson::dom::array ids;
        if (r.status == 201 && j.ok && !j.doc["ids"].get_array().get(ids) && ids.size() == 1) {
            w.id = int64_t(ids.at(0));
            ledger_.write(std::move(w));
        }
        return r;
    }

    // A write sent to `port` (a router's, or a node's straight) with the data token.
    Reply write_at(uint16_t port, const std::string& tenant, const std::string& node) {
        return write(tenant, node, [&](const std::string& body) {
            Client c(port);
            return c.request("POST", "/t/" + tenant + "/c/notes", body, bearer(kData))
                .value_or(Reply{});
        });
    }

    // A move of `tenant` off `node` is about to be asked: from now on a grant may drop the tenant
    // from that node's lease before it runs out (test/support/lease_check.h, rule 2). Called
    // before the move's request is sent.
    void moving(const std::string& tenant, const std::string& node) {
        ledger_.moved(tenant, node, monotonic_ns());
    }

    size_t writes() const { return ledger_.writes(); }
    size_t leases() const { return ledger_.leases(); }
    // Whether `node` reported a lease naming `tenant`, asked after `after_ns` (monotonic_ns).
    bool reported(const std::string& node, const std::string& tenant, int64_t after_ns) const {
        return ledger_.reported(node, tenant, after_ns);
    }
    // Waits until `node` has reported a lease naming `tenant`, asked after this call: false if
    // none within 5 s. A test that cuts a node (SIGSTOP) right after writes to it calls this
    // first, so the checker has seen the lease those writes were taken under. Without it, a
    // write acknowledged just after the grant that named its tenant, with the node cut before
    // the next poll, is rightly found outside any lease the checker saw.
    bool await_report(const std::string& node, const std::string& tenant) const {
        const int64_t now = monotonic_ns();
        return wait_until([&] { return reported(node, tenant, now); }, std::chrono::seconds(5));
    }

    // Ends the polling; `final` is each tenant written and the port of its primary now, whose
    // rows are read. Every violation, a line each; "" when the run was safe. Ends in failure,
    // too, when nothing acknowledged was recorded (a check that could not fail) or, over nodes
    // that take leases, no lease was reported.
    std::string check(const std::map<std::string, uint16_t>& final) {
        // One more round of polls, each asked after the last write: a lease begun just before a
        // write is seen only by a report after it. A stopped node's poll gives up within 1 s.
        const int64_t last = monotonic_ns();
        wait_until([&] {
            for (const auto& round : rounds_) {
                if (round.load() < last) return false;
            }
            return true;
        });
        stop();
        std::string said;
        if (ledger_.writes() == 0) said += "no acknowledged write was recorded\n";
        if (ledger_.leased() && ledger_.leases() == 0) said += "no lease was reported\n";
        FinalRows rows;
        for (const auto& [tenant, port] : final) {
            // Every row, a page of the most a list answers at a time, in id order.
            constexpr size_t page = 10'000;
            auto& held = rows[tenant];
            for (size_t from = 0;; from += page) {
                Client c(port);
                auto got =
                    c.request("GET",
                              "/t/" + tenant + "/c/notes?order=_id&limit=" + std::to_string(page) +
                                  "&offset=" + std::to_string(from),
                              {}, bearer(kData));
                Json j(got ? got->body : "");
                simdjson::dom::array list;
                if (!got || got->status != 200 || !j.ok || j.doc.get_array().get(list)) {
                    said += "tenant `" + tenant + "`: its rows could not be read from port " +
                            std::to_string(port) + ": " + (got ? got->body : "no answer") + "\n";
                    break;
                }
                for (auto row : list) held[Json::text(row, "title")] = int64_t(row["_id"]);
                if (list.size() < page) break;
            }
        }
        for (const std::string& v : ledger_.check(rows)) said += v + "\n";
        return said;
    }

  private:
    void stop() {
        done_ = true;
        for (auto& t : pollers_) {
            if (t.joinable()) t.join();
        }
    }

    LeaseLedger ledger_;
    std::atomic<bool> done_{false};
    std::atomic<int> keys_{0};
    std::deque<std::atomic<int64_t>> rounds_;  // each poller's last round: when it asked
    std::vector<std::thread> pollers_;
};

// The first `k` nodes of a cluster fixture, named n1, n2, … as its cases register them.
inline std::vector<RecordedWrites::Node> first_nodes(const SharedNodes& nodes, int k) {
    std::vector<RecordedWrites::Node> out;
    for (int i = 0; i < k; ++i) {
        out.push_back({"n" + std::to_string(i + 1), nodes.port(i), node_admin_token(i)});
    }
    return out;
}

}  // namespace fenec::test
