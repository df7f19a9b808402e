// fuzz/grant_fuzz.cc: fuzz_grant, bytes as the bodies of `POST /_admin/lease` (a grant) and
// `DELETE /_admin/lease` (a release) of node-http.md §9.2, read by the node's one reader
// (server/node/lease_admin.h), and each grant read taken by a Leases (server/node/lease.h) on a
// fake boot clock, as post_grant takes it. Seeds: fuzz/corpus/grant/, grant sequences written by
// hand from §9.2 and §9.3 and from the scenarios of seed 001 (a node's first grant, the one
// acknowledging it, a late grant, a list not held, a fence by term, a release).
//
// An input is lines, at most kStepsMax of them, each one step:
//   +<ms>            the boot clock moves on <ms> (at most kAdvanceMsMax)
//   DELETE <body>    <body> read as a release and, when read, given to Leases::release
//   <body>           read as a grant and, when read, taken, taken again at once, then answered
// Invariants (a broken one traps, so libFuzzer keeps the input):
//   - a refused body says why, naming the field at fault in backticks or the body's form;
//   - a grant read holds what take() expects (lease_ms > 0, a valid authority, 16 lowercase hex
//     history, valid tenant names);
//   - take() fences exactly when §9.5 says: a term below the highest kept for its authority, the
//     same term with another history, or a lease running from another authority;
//   - the highest term kept per authority only grows, and a lease in an answer never comes from
//     a term above it; `took` holds the grant's list; `ran` runs the lease from this grant, no
//     longer than its lease_ms; left_ms is never negative;
//   - a lease runs only from an answer instant recorded (answered()) for the grant it
//     acknowledges, and is left no longer than lease_ms past that instant;
//   - the same grant taken twice at once is idempotent (the same answer and view) or, where the
//     first ran a lease, refused as not newer with nothing changed;
//   - a release is fenced by term as a grant is, and one that released holds nothing after;
//   - a Leases loaded from the state file after the input refuses a term below each
//     authority's highest (a term taken is never forgotten by a restart).
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/clock.h"
#include "engine/format.h"
#include "engine/io.h"
#include "server/node/lease.h"
#include "server/node/lease_admin.h"
#include "server/node/registry.h"
#include "server/node/wire.h"

namespace {

using namespace fenec;
using node::Grant;
using node::GrantOutcome;
using node::Leases;
using node::LeaseView;

constexpr size_t kInputBytesMax = 16 << 10;  // a grant is a few hundred bytes
constexpr size_t kStepsMax = 32;             // enough for a lease to run, lapse and be cut
constexpr int64_t kAdvanceMsMax = 10'000'000;

[[noreturn]] void broken(const char* what, const std::string& detail = "") {
    std::fprintf(stderr, "fuzz_grant: invariant broken: %s %s\n", what, detail.c_str());
    __builtin_trap();
}

// One directory for the state file, made once a process; the file is removed before each input.
// In memory where the machine has /dev/shm: every term raised is a write, fsync and rename.
const std::string& state_path() {
    static const std::string path = [] {
        const char* base = std::getenv("TMPDIR");
        std::string dir = base && *base                     ? base
                          : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                            : "/tmp";
        std::string tmpl = dir + "/fuzz_grant.XXXXXX";
        if (!::mkdtemp(tmpl.data())) broken("mkdtemp failed");
        return tmpl + "/fenec-node.state";
    }();
    static const bool cleaned = [] {
        return std::atexit([] {
                   std::remove(path.c_str());
                   ::rmdir(path.substr(0, path.rfind('/')).c_str());
               }) == 0;
    }();
    (void)cleaned;
    return path;
}

bool same_holder(const std::optional<node::Holder>& a, const std::optional<node::Holder>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || (a->authority == b->authority && a->term == b->term && a->history == b->history);
}

bool same_lease(const std::optional<node::LeaseFrom>& a, const std::optional<node::LeaseFrom>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || (a->authority == b->authority && a->term == b->term && a->history == b->history &&
                  a->grant == b->grant && a->acked == b->acked && a->lease_ms == b->lease_ms);
}

bool same_view(const LeaseView& a, const LeaseView& b) {
    return same_holder(a.holder, b.holder) && same_lease(a.lease, b.lease) &&
           a.left_ms == b.left_ms && a.list == b.list && a.tenants == b.tenants;
}

bool same_answer(const node::GrantAnswer& a, const node::GrantAnswer& b) {
    return a.outcome == b.outcome && a.grant == b.grant && a.took == b.took && a.ran == b.ran &&
           a.left_ms == b.left_ms && a.list == b.list && a.tenants == b.tenants &&
           same_lease(a.lease, b.lease);
}

// A refusal names the field at fault (`name`) or says what the body must be.
void check_refusal(const std::string& error, const char* what) {
    if (error.empty()) broken("a body refused without a reason", what);
    const bool names_field = error.find('`') != std::string::npos &&
                             error.find('`', error.find('`') + 1) != std::string::npos;
    const bool says_form = error.find("is a JSON object") != std::string::npos;
    if (!names_field && !says_form) broken("a refusal names no field", error);
}

struct Kept {
    uint64_t term = 0;
    std::string history;  // "" when the call that raised it carried none
};

// What §9.5 keeps, modelled beside the Leases: the highest term per authority and its history.
struct Model {
    std::map<std::string, Kept> kept;
    // The boot-clock instant of the latest answered() for each (authority, term, grant).
    std::map<std::tuple<std::string, uint64_t, uint64_t>, int64_t> answered_ns;

    // Whether a call from `authority` at `term` (with `history`, when it carries one) is fenced
    // by term.
    bool fenced_by_term(const std::string& authority, uint64_t term,
                        std::optional<std::string_view> history) const {
        auto it = kept.find(authority);
        if (it == kept.end()) return false;
        if (term < it->second.term) return true;
        return term == it->second.term && history && !history->empty() &&
               !it->second.history.empty() && *history != it->second.history;
    }
    void raise(const std::string& authority, uint64_t term, std::string_view history) {
        auto [it, fresh] = kept.try_emplace(authority, Kept{term, std::string(history)});
        if (fresh) return;
        if (term > it->second.term) {
            it->second = Kept{term, std::string(history)};
        } else if (term == it->second.term && it->second.history.empty()) {
            it->second.history = std::string(history);
        }
    }
};

void check_answer(const Grant& g, const GrantOutcome& out, const Model& model) {
    const node::GrantAnswer& a = out.answer;
    if (a.grant != g.grant) broken("the answer names another grant");
    if (a.left_ms < 0) broken("left_ms below 0");
    if (a.took) {
        if (a.list != g.list) broken("a grant took another list than its own");
        if (g.tenants && a.tenants > g.tenants->size()) broken("more tenants held than given");
    } else if (a.ran) {
        broken("a lease ran from a grant not taken");
    }
    if (a.ran) {
        if (!a.lease || a.lease->grant != g.grant || a.lease->authority != g.authority) {
            broken("ran, but the lease is not this grant's");
        }
        if (a.left_ms > g.lease_ms) broken("a lease left longer than its lease_ms");
    }
    if (a.lease) {
        auto it = model.kept.find(a.lease->authority);
        if (it == model.kept.end() || a.lease->term > it->second.term) {
            broken("a lease from a term above the highest kept");
        }
    }
    const std::string_view o = a.outcome;
    if (o != "ran" && o != "took" && o != "not_newer" && o != "list_needed") {
        broken("an outcome of no name", std::string(o));
    }
    if ((o == "ran") != a.ran || (o == "took" && !a.took) ||
        (a.took && o != "ran" && o != "took")) {
        broken("an outcome that disagrees with took/ran", std::string(o));
    }
}

void grant_step(Leases& leases, Model& model, std::string_view body, int64_t now_ns) {
    std::string error;
    std::optional<Grant> read = node::read_grant(body, error);
    if (!read) return check_refusal(error, "grant");
    const Grant& g = *read;
    if (g.lease_ms <= 0 || g.authority.empty() || g.authority.size() > 128 ||
        !engine::format::parse_hex16(g.history)) {
        broken("a grant read with a field take() does not expect");
    }
    for (char c : g.authority) {
        if (c < 0x21 || c > 0x7e) broken("an authority with a byte not printable");
    }
    if (g.tenants) {
        for (const std::string& t : *g.tenants) {
            if (!node::valid_tenant_name(t)) broken("a grant read with a bad tenant name", t);
        }
    }
    const LeaseView before = leases.view();
    const bool other_leases = before.lease && before.lease->authority != g.authority;
    const bool expect_fenced = model.fenced_by_term(g.authority, g.term, g.history) || other_leases;
    const GrantOutcome first = leases.take(g);
    if (!first.fence.status.is_ok()) {
        // Only the state file's write may fail, or the bound on authorities kept.
        if (first.fence.status.code() != engine::Code::limit_exceeded) {
            broken("a grant failed", first.fence.status.to_string());
        }
        return;
    }
    if (first.fence.fenced.has_value() != expect_fenced) {
        broken(expect_fenced ? "a grant not fenced that §9.5 fences"
                             : "a grant fenced that §9.5 does not fence",
               first.fence.fenced ? first.fence.fenced->message : "");
    }
    if (first.fence.fenced) {
        if (first.fence.fenced->message.find(" is held by ") == std::string::npos) {
            broken("a fence that names no holder", first.fence.fenced->message);
        }
        if (!same_view(before, leases.view())) broken("a fenced grant changed the lease");
        return;
    }
    model.raise(g.authority, g.term, g.history);
    check_answer(g, first, model);
    if (first.answer.ran) {
        // lease.h: a lease runs only from an answer instant this process recorded for the
        // grant this one acknowledges, and ends lease_ms after it.
        auto it = model.answered_ns.find({g.authority, g.term, g.acked});
        if (it == model.answered_ns.end()) broken("a lease ran from a grant never answered");
        constexpr int64_t max = std::numeric_limits<int64_t>::max();
        const int64_t end_ns =
            g.lease_ms > (max - it->second) / 1'000'000 ? max : it->second + g.lease_ms * 1'000'000;
        if (end_ns <= now_ns) broken("a lease ran from an answer older than its lease_ms");
        if (first.answer.left_ms > (end_ns - now_ns) / 1'000'000 + 1) {
            broken("a lease left longer than from its acknowledged answer");
        }
    }
    const LeaseView after = leases.view();
    if (!after.holder && first.answer.took) broken("a grant took, but no holder is named");
    if (after.holder) {
        auto it = model.kept.find(after.holder->authority);
        if (it == model.kept.end() || after.holder->term != it->second.term) {
            broken("the holder's term is not the highest kept");
        }
    }
    // The same grant again, before its answer: nothing new to take.
    const GrantOutcome second = leases.take(g);
    if (!second.fence.ok()) broken("a grant taken twice is fenced the second time");
    check_answer(g, second, model);
    if (first.answer.ran) {
        if (second.answer.took || second.answer.outcome != "not_newer") {
            broken("a grant that ran, taken again, is not refused as not newer");
        }
    } else if (!same_answer(first.answer, second.answer)) {
        broken("a grant taken twice answers otherwise the second time");
    }
    if (!same_view(after, leases.view())) broken("a grant taken twice changed the lease");
    leases.answered(g.authority, g.term, g.grant);
    model.answered_ns[{g.authority, g.term, g.grant}] = now_ns;
}

void release_step(Leases& leases, Model& model, std::string_view body) {
    std::string authority;
    uint64_t term = 0;
    if (auto e = node::read_release(body, authority, term)) return check_refusal(*e, "release");
    const LeaseView before = leases.view();
    const bool expect_fenced = model.fenced_by_term(authority, term, std::nullopt);
    bool released = false;
    const node::FenceOutcome f = leases.release(authority, term, released);
    if (!f.status.is_ok()) return;  // the bound on authorities kept
    if (f.fenced.has_value() != expect_fenced) broken("a release fenced otherwise than a grant");
    if (f.fenced) {
        if (released || !same_view(before, leases.view()))
            broken("a fenced release changed things");
        return;
    }
    model.raise(authority, term, "");
    const LeaseView after = leases.view();
    if (released && (after.lease || after.list || !after.tenants.empty() || after.left_ms != 0)) {
        broken("a release left a lease or a list held");
    }
    // Nothing held from it: nothing changes (the holder is another authority's, its term too).
    if (!released && !same_view(before, after))
        broken("a release that released nothing changed things");
}

void run(std::string_view input) {
    std::remove(state_path().c_str());
    engine::FakeBootClock clock;
    Model model;
    {
        Leases leases("n1", state_path(), engine::posix_fs(), clock);
        if (!leases.load().is_ok()) broken("a missing state file does not load");
        size_t steps = 0;
        while (!input.empty() && steps++ < kStepsMax) {
            const size_t nl = input.find('\n');
            const std::string_view line = input.substr(0, nl);
            input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
            if (line.starts_with("+")) {
                int64_t ms = 0;
                auto [p, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), ms);
                if (ec == std::errc() && ms >= 0 && ms <= kAdvanceMsMax) clock.advance_ms(ms);
            } else if (line.starts_with("DELETE ")) {
                release_step(leases, model, line.substr(7));
            } else {
                grant_step(leases, model, line, clock.now_ns());
            }
        }
    }
    // A restart: the terms kept survive it.
    Leases again("n1", state_path(), engine::posix_fs(), clock);
    if (!again.load().is_ok()) broken("the state file written does not load");
    for (const auto& [authority, kept] : model.kept) {
        if (kept.term == 0) continue;
        if (!again.fence(authority, kept.term - 1).fenced) {
            broken("a term taken is forgotten by a restart", authority);
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > kInputBytesMax) return -1;
    run(std::string_view(reinterpret_cast<const char*>(data), size));
    return 0;
}
