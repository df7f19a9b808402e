// server/node/lease.cc: the grant logic of node-http.md §9.3 and the fencing of §9.5 (lease.h),
// and the state file `<data-dir>/fenec-node.state` that keeps each authority's highest term:
//
//   {"authorities":[{"authority":"9e2d41c07a5b3f18/eu","term":4,"history":"c04b7e1a9d2f6385"}]}
//
// written whole through the node's file system with engine::replace_durably (to
// `fenec-node.state.new`, synced, renamed over the old one, the directory synced), so a crash
// leaves the old file or the new one, never half of either.
#include "server/node/lease.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>

#include "json/writer.h"

namespace fenec::node {

namespace {

constexpr int64_t ns_per_ms = 1'000'000;
// The state file: an entry per authority of about 200 bytes (a name of at most 128, a term, a
// 16-hex history), authorities_max of them.
constexpr uint64_t state_file_bytes_max = authorities_max * 512;

// from + ms, saturating (the guard's expiry_of does the same).
int64_t end_of(int64_t from_ns, int64_t ms) {
    constexpr int64_t max = std::numeric_limits<int64_t>::max();
    if (ms > max / ns_per_ms) return max;
    if (from_ns > max - ms * ns_per_ms) return max;
    return from_ns + ms * ns_per_ms;
}

}  // namespace

Leases::Leases(std::string node_name, std::string state_path, engine::Fs& fs,
               const engine::BootClock& clock)
    : node_(std::move(node_name)),
      state_path_(std::move(state_path)),
      fs_(fs),
      clock_(clock),
      guard_(clock) {}

engine::Status Leases::load() {
    auto bad = [&](std::string why) {
        return engine::Status::error(engine::Code::corruption, state_path_ + ": " + why);
    };
    auto read = engine::read_small(fs_, state_path_, state_file_bytes_max);
    if (!read.is_ok()) {
        if (read.status().code() == engine::Code::not_found) return engine::Status::ok();
        return bad("cannot be read: " + read.status().to_string());
    }
    const simdjson::padded_string text(*read);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(text).get(doc)) return bad("is not JSON");
    simdjson::dom::array list;
    if (doc["authorities"].get(list)) return bad("holds no `authorities` array");
    std::map<std::string, Holder, std::less<>> terms;
    for (simdjson::dom::element e : list) {
        std::string_view authority, history;
        uint64_t term = 0;
        if (e["authority"].get(authority) || e["term"].get(term) || e["history"].get(history)) {
            return bad("an authority lacks `authority`, `term` or `history`");
        }
        terms[std::string(authority)] = Holder{std::string(authority), term, std::string(history)};
    }
    std::lock_guard lock(mu_);
    terms_ = std::move(terms);
    publish_terms();
    return engine::Status::ok();
}

void Leases::publish_terms() {
    auto seen = std::make_shared<const std::map<std::string, Holder, std::less<>>>(terms_);
    std::lock_guard lock(terms_seen_mu_);
    terms_seen_ = std::move(seen);
}

std::string Leases::refusal_message(engine::LeaseVerdict verdict, std::string_view tenant) const {
    switch (verdict) {
        case engine::LeaseVerdict::no_lease: return node_ + " holds no lease yet";
        case engine::LeaseVerdict::lapsed: {
            std::lock_guard lock(mu_);
            if (!end_ns_) return node_ + "'s lease lapsed";
            const int64_t ago_ms = std::max<int64_t>(0, clock_.now_ns() - *end_ns_) / ns_per_ms;
            return node_ + "'s lease lapsed " + std::to_string(ago_ms) + " ms ago";
        }
        case engine::LeaseVerdict::not_named:
            return node_ + "'s lease does not name " + std::string(tenant);
        case engine::LeaseVerdict::ok: break;
    }
    return node_ + " holds a lease naming " + std::string(tenant);
}

Fenced Leases::held_by(const Holder& h) const {
    return Fenced{node_ + " is held by " + h.authority + " at term " + std::to_string(h.term), h};
}

std::optional<Fenced> Leases::term_refusal(std::string_view authority, uint64_t term,
                                           std::optional<std::string_view> history) const {
    auto it = terms_.find(authority);
    if (it == terms_.end()) return std::nullopt;
    const Holder& h = it->second;
    if (term < h.term) return held_by(h);
    // Two routers promoted from one directory at the same term fork two histories (§9.5).
    if (term == h.term && history && !history->empty() && !h.history.empty() && *history != h.history) {
        return held_by(h);
    }
    return std::nullopt;
}

engine::Status Leases::raise(std::string_view authority, uint64_t term,
                             std::optional<std::string_view> history) {
    auto it = terms_.find(authority);
    const std::string h(history.value_or(""));
    if (it != terms_.end()) {
        const bool higher = term > it->second.term;
        const bool learns_history = term == it->second.term && it->second.history.empty() && !h.empty();
        if (!higher && !learns_history) return engine::Status::ok();
    } else if (terms_.size() >= authorities_max) {
        return engine::Status::error(engine::Code::limit_exceeded,
                                     node_ + " keeps the terms of " + std::to_string(authorities_max) +
                                         " authorities and takes no other");
    }
    auto next = terms_;
    next[std::string(authority)] = Holder{std::string(authority), term, h};
    FENEC_RETURN_IF_ERROR(persist(next));
    terms_ = std::move(next);
    publish_terms();
    return engine::Status::ok();
}

engine::Status Leases::persist(const std::map<std::string, Holder, std::less<>>& terms) const {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("authorities");
    w.begin_array();
    for (const auto& [name, h] : terms) {
        w.begin_object();
        w.key("authority");
        w.string(h.authority);
        w.key("term");
        w.uint64(h.term);
        w.key("history");
        w.string(h.history);
        w.end_object();
    }
    w.end_array();
    w.end_object();
    out += '\n';
    return engine::replace_durably(fs_, state_path_, out);
}

bool Leases::lease_runs(int64_t now_ns) const {
    return lease_ && end_ns_ && now_ns < *end_ns_;
}

std::optional<int64_t> Leases::answer_instant(const WindowKey& key, uint64_t grant) const {
    auto it = windows_.find(key);
    if (it == windows_.end()) return std::nullopt;
    for (const Answered& a : it->second.answers) {
        if (a.grant == grant) return a.at_ns;
    }
    return std::nullopt;
}

void Leases::fill_answer(GrantAnswer& a, int64_t now_ns) const {
    a.left_ms = guard_.left_ms().value_or(0);
    a.list = list_;
    a.tenants = tenants_.size();
    if (lease_runs(now_ns)) a.lease = lease_;
}

GrantOutcome Leases::take(const Grant& g) {
    GrantOutcome out;
    out.answer.grant = g.grant;
    std::lock_guard lock(mu_);
    const int64_t now = clock_.now_ns();
    // 1. Fence (§9.5): a lower term, another history at the term, another authority's lease.
    if (auto f = term_refusal(g.authority, g.term, g.history)) {
        out.fence.fenced = std::move(f);
        return out;
    }
    const bool runs = lease_runs(now);
    if (runs && lease_->authority != g.authority) {
        auto it = terms_.find(lease_->authority);
        out.fence.fenced = held_by(it != terms_.end() ? it->second
                                                      : Holder{lease_->authority, lease_->term,
                                                               lease_->history});
        return out;
    }
    out.fence.status = raise(g.authority, g.term, g.history);
    if (!out.fence.status.is_ok()) return out;
    // 2. Newer? By term, then by the answer it acknowledges, then by its own number.
    if (runs) {
        const bool newer = g.term > lease_->term ||
                           (g.term == lease_->term &&
                            std::pair(g.acked, g.grant) > std::pair(lease_->acked, lease_->grant));
        if (!newer) {
            fill_answer(out.answer, now);
            return out;
        }
    }
    // 3. The list: given, kept (the same number), or asked for again.
    std::vector<std::string> tenants;
    if (g.tenants) {
        tenants = *g.tenants;
        std::sort(tenants.begin(), tenants.end());
        tenants.erase(std::unique(tenants.begin(), tenants.end()), tenants.end());
    } else if (list_ && *list_ == g.list) {
        tenants = tenants_;
    } else {
        out.answer.outcome = "list_needed";
        fill_answer(out.answer, now);
        return out;
    }
    // 4. The lease runs from the acknowledged grant's answer, if this process answered it and
    // that answer is under lease_ms old; otherwise the list alone, ending the lease held.
    std::optional<int64_t> at;
    if (g.acked != 0) at = answer_instant({g.authority, g.term}, g.acked);
    if (at && end_of(*at, g.lease_ms) > now) {
        guard_.take(engine::LeaseGuard::Lease{tenants, *at, g.lease_ms});
        lease_ = LeaseFrom{g.authority, g.term, g.history, g.grant, g.acked, g.lease_ms};
        end_ns_ = end_of(*at, g.lease_ms);
        out.answer.ran = true;
    } else {
        guard_.take_list(tenants);
        if (end_ns_ && *end_ns_ > now) end_ns_ = now;  // as the guard: a running lease ends now
        lease_.reset();
    }
    list_ = g.list;
    tenants_ = std::move(tenants);
    from_ = g.authority;
    out.answer.took = true;
    out.answer.outcome = out.answer.ran ? "ran" : "took";
    fill_answer(out.answer, now);
    return out;
}

void Leases::answered(std::string_view authority, uint64_t term, uint64_t grant) {
    std::lock_guard lock(mu_);
    const int64_t now = clock_.now_ns();
    Window& w = windows_[WindowKey{std::string(authority), term}];
    w.used = ++window_uses_;
    auto same = std::find_if(w.answers.begin(), w.answers.end(),
                             [&](const Answered& a) { return a.grant == grant; });
    if (same != w.answers.end()) w.answers.erase(same);
    w.answers.push_back(Answered{grant, now});
    while (w.answers.size() > grant_answers_max) w.answers.pop_front();
    while (windows_.size() > answer_windows_max) {
        auto oldest = std::min_element(windows_.begin(), windows_.end(), [](const auto& a, const auto& b) {
            return a.second.used < b.second.used;
        });
        windows_.erase(oldest);
    }
}

FenceOutcome Leases::release(std::string_view authority, uint64_t term, bool& released) {
    FenceOutcome out;
    released = false;
    std::lock_guard lock(mu_);
    if (auto f = term_refusal(authority, term, std::nullopt)) {
        out.fenced = std::move(f);
        return out;
    }
    out.status = raise(authority, term, std::nullopt);
    if (!out.status.is_ok()) return out;
    if (!from_ || *from_ != authority) return out;
    guard_.drop();
    lease_.reset();
    end_ns_.reset();
    list_.reset();
    tenants_.clear();
    from_.reset();
    released = true;
    return out;
}

FenceOutcome Leases::fence(std::string_view authority, uint64_t term,
                           std::optional<std::string_view> history) {
    FenceOutcome out;
    std::lock_guard lock(mu_);
    if (auto f = term_refusal(authority, term, history)) {
        out.fenced = std::move(f);
        return out;
    }
    out.status = raise(authority, term, history);
    return out;
}

FenceOutcome Leases::check_fence(std::string_view authority, uint64_t term) const {
    // On a loop thread: the terms as last persisted, never mu_ (held across a raise's fsync). A
    // term raised but not yet persisted is not yet taken, so it fences nothing yet either.
    std::shared_ptr<const std::map<std::string, Holder, std::less<>>> seen;
    {
        std::lock_guard lock(terms_seen_mu_);
        seen = terms_seen_;
    }
    FenceOutcome out;
    if (auto it = seen->find(authority); it != seen->end() && term < it->second.term) {
        out.fenced = held_by(it->second);
    }
    return out;
}

std::optional<Holder> Leases::holder() const {
    std::lock_guard lock(mu_);
    if (!from_) return std::nullopt;
    auto it = terms_.find(*from_);
    if (it == terms_.end()) return std::nullopt;
    return it->second;
}

LeaseView Leases::view() const {
    LeaseView v;
    v.holder = holder();
    std::lock_guard lock(mu_);
    if (lease_runs(clock_.now_ns())) v.lease = lease_;
    v.left_ms = guard_.left_ms().value_or(0);
    v.list = list_;
    v.tenants = tenants_;
    return v;
}

int64_t Leases::left_ms() const { return guard_.left_ms().value_or(0); }

}  // namespace fenec::node
