// shard/lease_book.cc: one node's lease as the router keeps it (router.md §9.4–§9.7); see the
// header for why the lapse it judges is certain.
#include "shard/lease_book.h"

#include <algorithm>
#include <utility>

#include "json/writer.h"

namespace fenec::shard {

std::string grant_body(const GrantWire& g) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("authority");
    w.string(g.authority);
    w.key("term");
    w.int64(g.term);
    w.key("history");
    w.string(g.history);
    w.key("grant");
    w.uint64(g.grant);
    w.key("acked");
    w.uint64(g.acked);
    w.key("lease_ms");
    w.int64(g.lease_ms);
    w.key("list");
    w.uint64(g.list);
    if (g.tenants) {
        w.key("tenants");
        w.begin_array();
        for (const std::string& t : *g.tenants) w.string(t);
        w.end_array();
    }
    w.end_object();
    return out;
}

LeaseBook::LeaseBook(uint64_t starts, int64_t start_ns)
    : starts_(starts), last_answer_ns_(start_ns) {}

void LeaseBook::set_tenants(std::vector<std::string> tenants) {
    std::sort(tenants.begin(), tenants.end());
    tenants.erase(std::unique(tenants.begin(), tenants.end()), tenants.end());
    if (tenants == tenants_ && list_ != 0) return;
    tenants_ = std::move(tenants);
    list_ = 0;  // numbered by the grant that carries it first
    send_list_ = true;
}

GrantWire LeaseBook::next(std::string authority, int64_t term, std::string history,
                          int64_t lease_ms) {
    GrantWire g;
    g.authority = std::move(authority);
    g.term = term;
    g.history = std::move(history);
    g.grant = (starts_ << 32) | ++n_;
    g.acked = acked_;
    g.lease_ms = lease_ms;
    if (list_ == 0) list_ = g.grant;
    g.list = list_;
    if (send_list_) g.tenants = tenants_;
    out_ = g.grant;
    return g;
}

GrantEffect LeaseBook::answered(const GrantReply& reply, int64_t back_ns) {
    GrantEffect e;
    const std::optional<uint64_t> grant = std::exchange(out_, std::nullopt);
    switch (reply.kind) {
        case GrantReply::Kind::silent:
            e.outcome = "silent";  // nothing changes; the lapse clock runs on
            return e;
        case GrantReply::Kind::fenced:
            e.outcome = "fenced";
            e.first_fence = standing_ != LeaseStanding::fenced;
            standing_ = LeaseStanding::fenced;
            return e;
        case GrantReply::Kind::takes_none:
            e.outcome = "takes_none";
            e.first_takes_none = standing_ != LeaseStanding::takes_none;
            standing_ = LeaseStanding::takes_none;
            return e;
        case GrantReply::Kind::taken:
            break;
    }
    // A counted answer: it came back within the bound, so the next grant acknowledges it.
    standing_ = LeaseStanding::leasing;
    if (grant) acked_ = *grant;
    last_answer_ns_ = back_ns;
    e.returned = std::exchange(failed_over_, false);
    if (reply.took && reply.list == list_) send_list_ = false;
    if (!reply.took) {
        // Not newer than the grant its lease came from, or a list it does not hold: the grant
        // acknowledging this answer goes at once, with the list.
        send_list_ = true;
        e.outcome = reply.list == list_ ? "not_taken" : "list_sent";
        e.again_now = true;
    } else if (!reply.ran) {
        e.outcome = "list_only";  // taken for its list; a lease needs the grant acknowledging it
        e.again_now = true;
    } else {
        e.outcome = "ran";
        ran_ = true;
    }
    return e;
}

bool LeaseBook::lapsed(int64_t now_ns, int64_t lease_ns, int64_t record_ns) const {
    if (standing_ != LeaseStanding::leasing || out_) return false;
    return now_ns >= lapse_point_ns(lease_ns, record_ns);
}

int64_t LeaseBook::lapse_point_ns(int64_t lease_ns, int64_t record_ns) const {
    const int64_t held_ns = ran_ ? lease_ns : std::max(lease_ns, record_ns);
    return last_answer_ns_ + held_ns + held_ns / 10 + 1;
}

}  // namespace fenec::shard
