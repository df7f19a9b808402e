// test/support/lease_check.cc: the lease-safety checker (see the header for what it asserts and
// why its bounds cannot be faked by polling).
#include "test/support/lease_check.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace fenec::test {

namespace {

constexpr int64_t ns_per_ms = 1'000'000;

struct Span {
    int64_t from = 0;
    int64_t to = 0;
};

std::string ms_text(int64_t ns) { return std::to_string(ns / ns_per_ms) + " ms"; }

// The first instant two nodes' spans overlap, if any.
std::optional<int64_t> first_overlap(const std::vector<Span>& a, const std::vector<Span>& b) {
    std::optional<int64_t> first;
    for (const Span& x : a) {
        for (const Span& y : b) {
            if (x.from < y.to && y.from < x.to) {
                const int64_t at = std::max(x.from, y.from);
                if (!first || at < *first) first = at;
            }
        }
    }
    return first;
}

bool names(const LeaseReport& r, const std::string& tenant) {
    return std::find(r.tenants.begin(), r.tenants.end(), tenant) != r.tenants.end();
}

}  // namespace

void LeaseLedger::write(AckedWrite w) {
    std::lock_guard lock(mu_);
    writes_.push_back(std::move(w));
}

void LeaseLedger::lease(LeaseReport r) {
    std::lock_guard lock(mu_);
    leases_.push_back(std::move(r));
}

void LeaseLedger::moved(std::string tenant, std::string node, int64_t asked_ns) {
    std::lock_guard lock(mu_);
    auto [it, fresh] = moved_.try_emplace({std::move(tenant), std::move(node)}, asked_ns);
    if (!fresh) it->second = std::min(it->second, asked_ns);
}

size_t LeaseLedger::writes() const {
    std::lock_guard lock(mu_);
    return writes_.size();
}

size_t LeaseLedger::leases() const {
    std::lock_guard lock(mu_);
    return leases_.size();
}

bool LeaseLedger::reported(const std::string& node, const std::string& tenant,
                           int64_t after_ns) const {
    std::lock_guard lock(mu_);
    for (const LeaseReport& r : leases_) {
        if (r.node == node && r.asked_ns > after_ns && r.left_ms > 0 &&
            std::find(r.tenants.begin(), r.tenants.end(), tenant) != r.tenants.end()) {
            return true;
        }
    }
    return false;
}

std::vector<std::string> LeaseLedger::check(const FinalRows& final) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    // Each node's reports in the order they were answered.
    std::map<std::string, std::vector<const LeaseReport*>> by_node;
    for (const LeaseReport& r : leases_) by_node[r.node].push_back(&r);
    for (auto& [node, reports] : by_node) {
        std::sort(reports.begin(), reports.end(), [](const LeaseReport* a, const LeaseReport* b) {
            return a->answered_ns < b->answered_ns;
        });
    }
    // 1. Inside a reported lease: a report naming the tenant whose possible span — from the
    // previous report's answer (the lease may have begun right after it) to this one's answer
    // plus its time left — meets the write's time at the node. That is some moment between its
    // sending and its acknowledgement's arrival, not the arrival: a node stopped just after its
    // answer check sends the answer when it is woken, its lease long over.
    // Over nodes that take no lease, nothing is.
    for (const AckedWrite& w : writes_) {
        if (!leased_) break;
        bool covered = false;
        auto it = by_node.find(w.node);
        if (it != by_node.end()) {
            const auto& reports = it->second;
            for (size_t i = 0; i < reports.size() && !covered; ++i) {
                const LeaseReport& r = *reports[i];
                if (r.left_ms <= 0 || !names(r, w.tenant)) continue;
                // The report before took its view at some moment between its asking and its
                // answer: a lease begun right after that moment is no earlier than its asking.
                // (Its answer is too late a bound: a poll slow to answer, its view taken before
                // the grant naming the tenant and answered after a write under it, made that
                // write look unleased under a loaded run.)
                const int64_t from =
                    i == 0 ? std::numeric_limits<int64_t>::min() : reports[i - 1]->asked_ns;
                const int64_t to = r.answered_ns + r.left_ms * ns_per_ms;
                covered = from <= w.acked_ns && w.sent_ns <= to;
            }
        }
        if (!covered) {
            // What the node reported around it, to tell a lease ignored from one not polled.
            std::string around;
            if (it != by_node.end()) {
                const LeaseReport* before = nullptr;
                const LeaseReport* after = nullptr;
                for (const LeaseReport* r : it->second) {
                    if (r->answered_ns <= w.acked_ns) before = r;
                    if (r->answered_ns > w.acked_ns && !after) after = r;
                }
                auto said = [&](const char* which, const LeaseReport* r) {
                    if (!r) return std::string("; no report ") + which;
                    return std::string("; the report ") + which + " asked at " +
                           ms_text(r->asked_ns) + ", answered at " + ms_text(r->answered_ns) +
                           ", " + std::to_string(r->left_ms) + " ms left" +
                           (names(*r, w.tenant) ? "" : ", not naming it");
                };
                around = said("before", before) + said("after", after);
            }
            out.push_back("tenant `" + w.tenant + "`: node `" + w.node + "` acknowledged write " +
                          w.key + " (id " + std::to_string(w.id) + ") at " + ms_text(w.acked_ns) +
                          " (sent at " + ms_text(w.sent_ns) + ")" +
                          " outside any lease it reported naming the tenant" + around);
        }
    }
    // 2. Certain lease spans of two nodes naming one tenant never overlap. A report's span runs
    // to its lease's end at the earliest; where a move of the tenant off its node was declared, a
    // grant may have dropped the tenant sooner, at the earliest when the move was asked or when
    // the source was last seen holding it under the same list, whichever is later.
    std::map<std::string, std::map<std::string, std::vector<Span>>> spans;  // tenant → node → spans
    for (const auto& [node, reports] : by_node) {
        for (size_t i = 0; i < reports.size(); ++i) {
            const LeaseReport& r = *reports[i];
            if (r.left_ms <= 0) continue;
            for (const std::string& t : r.tenants) {
                Span s{r.answered_ns, r.asked_ns + r.left_ms * ns_per_ms};
                if (auto m = moved_.find({t, node}); m != moved_.end()) {
                    int64_t seen = r.asked_ns;  // held at its view, taken no earlier than this
                    for (size_t k = i + 1; k < reports.size(); ++k) {
                        const LeaseReport& n = *reports[k];
                        if (n.left_ms <= 0 || !n.list || n.list != r.list || !names(n, t)) break;
                        seen = n.asked_ns;
                    }
                    s.to = std::min(s.to, std::max(seen, m->second));
                }
                if (s.to <= s.from) continue;  // no instant certain: the answer came too late
                spans[t][node].push_back(s);
            }
        }
    }
    for (const auto& [tenant, nodes] : spans) {
        for (auto a = nodes.begin(); a != nodes.end(); ++a) {
            for (auto b = std::next(a); b != nodes.end(); ++b) {
                if (auto at = first_overlap(a->second, b->second)) {
                    out.push_back("tenant `" + tenant + "`: nodes `" + a->first + "` and `" +
                                  b->first + "` both held a lease naming it at " + ms_text(*at));
                }
            }
        }
    }
    // 3. Nothing acknowledged is missing.
    for (const AckedWrite& w : writes_) {
        const auto t = final.find(w.tenant);
        const std::map<std::string, int64_t> none;
        const auto& rows = t == final.end() ? none : t->second;
        const auto row = rows.find(w.key);
        if (row == rows.end()) {
            out.push_back("tenant `" + w.tenant + "`: write " + w.key + " acknowledged by `" +
                          w.node + "` at " + ms_text(w.acked_ns) + " is missing");
        } else if (row->second != w.id) {
            out.push_back("tenant `" + w.tenant + "`: write " + w.key + " was acknowledged as id " +
                          std::to_string(w.id) + " and is id " + std::to_string(row->second));
        }
    }
    return out;
}

}  // namespace fenec::test
