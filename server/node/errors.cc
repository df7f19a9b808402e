// server/node/errors.cc: the one function that turns a refusal into an HTTP answer (§6). The
// status is the FenecQL error's (ql::engine_error maps engine codes once, in ql/); what is added
// here is what HTTP carries beside it: Retry-After, the quota's name, the 503's reason and, for a
// lease refusal, Fenec-Lease by the engine's verdict (§9.4). A passed statement budget keeps
// its own status (rows 400, time 503 with Retry-After) and is counted by budget. A quota's refusal
// is written whole here: the tenant and the quota, never the engine's limit.
#include <cerrno>

#include "json/writer.h"
#include "ql/error_json.h"
#include "server/node/handlers.h"
#include "server/node/lease.h"
#include "server/node/quota.h"

namespace fenec::node {

namespace {

// §9.4: the lease refusal's name on the wire, as `Fenec-Lease` carries it.
std::string_view lease_word(engine::LeaseVerdict v) {
    switch (v) {
        case engine::LeaseVerdict::lapsed: return "lapsed";
        case engine::LeaseVerdict::not_named: return "elsewhere";
        default: return "none";
    }
}

// Retry-After's whole seconds for a wait of `ms`: rounded up, at least 1.
std::string retry_after_seconds(int64_t ms) {
    return std::to_string(std::max<int64_t>(1, (ms + 999) / 1000));
}

std::string_view reason_of(engine::Code code, engine::LeaseVerdict lease) {
    switch (code) {
        case engine::Code::frozen: return "frozen";
        case engine::Code::not_leased:
            return lease == engine::LeaseVerdict::lapsed      ? "lease-lapsed"
                   : lease == engine::LeaseVerdict::not_named ? "lease-elsewhere"
                                                              : "lease-none";
        case engine::Code::read_only: return "replica";
        case engine::Code::latched:
            return "latched";
        default: return "";
    }
}

}  // namespace

ql::BudgetLimits statement_budget(const Node& node) {
    return ql::BudgetLimits{.rows_max = node.options().statement_rows,
                            .time_ms_max = node.options().statement_ms,
                            .clock = &node.clock()};
}

http::Response error_response(Node& node, const ql::Error& e,
                              const std::function<void(json::Writer&)>& more) {
    return error_response(node, {}, e, more);
}

http::Response error_response(Node& node, std::string_view tenant, const ql::Error& e,
                              const std::function<void(json::Writer&)>& more) {
    http::Response r;
    r.status = e.status();
    const engine::Code code = e.engine_code.value_or(engine::Code::ok);
    const std::string quota =
        e.engine_detail ? std::string(engine::quota_kind_name(e.engine_detail->quota)) : "";
    const engine::LeaseVerdict lease =
        e.engine_detail ? e.engine_detail->lease : engine::LeaseVerdict::no_lease;
    const std::string_view reason = reason_of(code, lease);
    json::Writer w(r.body);
    w.begin_object();
    if ((r.status == 507 || r.status == 429) && !quota.empty() && quota != "none") {
        // §7: the quota named, never an amount; the engine's message holds the limit, and the
        // collection the write was to says nothing a full tenant's user can act on.
        w.key("error");
        w.string(quota_refusal_message(tenant, quota));
        w.key("quota");
        w.string(quota);
        node.counters().quota_refusals->with({quota}).inc();
    } else {
        ql::write_error_members(w, e);
    }
    if (e.budget != ql::BudgetKind::none) {
        node.counters().over_budget->with({std::string(ql::budget_name(e.budget))}).inc();
    }
    if (r.status == 503 && !reason.empty()) {
        w.key("reason");
        w.string(reason);
    }
    if (more) more(w);
    w.end_object();
    if (r.status == 503) {
        // A latched tenant is told when it will be open again (§5.8): a write sent again before
        // then is refused the same way.
        int64_t ms = 1000;
        if (code == engine::Code::latched && !tenant.empty()) {
            ms = node.registry().latch_wait_left_ms(tenant);
        }
        r.header("Retry-After", retry_after_seconds(ms));
    }
    if (r.status == 429) {
        r.header("Retry-After",
                 retry_after_seconds(e.engine_detail ? e.engine_detail->retry_after_ms : 1000));
    }
    if (code == engine::Code::not_leased) r.header("Fenec-Lease", std::string(lease_word(lease)));
    return r;
}

http::Response lease_refusal(Node& node, engine::LeaseVerdict verdict, std::string_view tenant,
                             const std::function<void(json::Writer&)>& more) {
    ql::Error e;
    e.status_code = 503;
    e.message = node.leases() ? node.leases()->refusal_message(verdict, tenant)
                              : "tenant `" + std::string(tenant) + "` is not leased here";
    e.engine_code = engine::Code::not_leased;
    e.engine_detail = engine::Detail{.lease = verdict};
    return error_response(node, e, more);
}

http::Response latched_refusal(Node& node, std::string_view tenant) {
    ql::Error e;
    e.status_code = 503;
    e.message = "tenant `" + std::string(tenant) + "`'s storage failed: it is being opened again";
    e.engine_code = engine::Code::latched;
    return error_response(node, tenant, e);
}

http::Response acquire_refusal(const Node& node, const Acquired& a) {
    switch (a.error) {
        case AcquireError::not_found: return node.refusal(404, a.message);
        case AcquireError::memory: return node.refusal(503, a.message, "memory");
        case AcquireError::descriptors: return node.refusal(503, a.message, "descriptors");
        case AcquireError::unavailable: return node.refusal(503, a.message);  // Retry-After: 1
        default: return node.refusal(500, a.message);
    }
}

http::Response listing_refusal(const Node& node, const engine::Status& st) {
    const int err = st.detail().err_no;
    const bool descriptors = err == EMFILE || err == ENFILE;
    return node.refusal(503, "the data directory cannot be listed: " + std::string(st.message()),
                        descriptors ? "descriptors" : "io");
}

}  // namespace fenec::node
