// shard/cluster.cc: leasing and failover over the router's parts (shard/cluster.h).
#include "shard/cluster.h"

#include <unistd.h>

#include <chrono>

#include "shard/copies.h"
#include "shard/log_line.h"
#include "shard/node_calls.h"
#include "shard/router.h"
#include "shard/standby.h"

namespace fenec::shard {

namespace {

// A lease thread's or the failover's own request id: their calls come from no client.
constexpr std::string_view lease_request_id = "lease";
constexpr std::string_view failover_request_id = "failover";

std::optional<obs::AuditEvent> event_of(std::string_view name) {
    if (name == "failover") return obs::AuditEvent::failover;
    if (name == "force") return obs::AuditEvent::force;
    if (name == "lease_record") return obs::AuditEvent::lease_record;
    if (name == "fenced") return obs::AuditEvent::fenced;
    return std::nullopt;
}

}  // namespace

Cluster::Cluster(Router& router) : router_(router) {
    failover_ = std::make_unique<Failover>(*this, router_.registry());
    if (router_.options().auto_failover_ms != 0) {
        LeaseOptions o;
        o.lease_ms = static_cast<int64_t>(router_.options().auto_failover_ms);
        o.by = router_.options().listen;
        leases_ = std::make_unique<Leases>(o, *this, router_.clock(), router_.registry());
    }
}

Cluster::~Cluster() { stop(); }

void Cluster::start() {
    if (leases_ && !started_.exchange(true)) leases_->start();
}

void Cluster::stop() {
    if (leases_) leases_->stop();
    failover_->stop();
}

void Cluster::released(const std::string& tenant) { failover_->released(tenant); }

void Cluster::changed(const std::string& node) {
    if (leases_) leases_->changed(node);
}

std::shared_ptr<const DirectoryMaps> Cluster::maps() const { return router_.directory().maps(); }

Directory& Cluster::directory() { return router_.directory(); }

GrantReply Cluster::grant(const NodeRow& node, const GrantWire& grant, int64_t deadline_ns) {
    // The lease's clock is the router's (injected); the client's deadline is steady_clock's.
    const int64_t left_ns = deadline_ns - router_.clock().steady_ns();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(left_ns);
    if (router_.is_superseded()) {
        // Leads nothing: no grant goes, and the node counts as fenced, never failed over.
        GrantReply fenced;
        fenced.kind = GrantReply::Kind::fenced;
        fenced.holder = "the router promoted over this one";
        return fenced;
    }
    return router_.node_calls().grant(node, grant, deadline, lease_request_id);
}

engine::Status Cluster::put_lease_record(const LeaseRecord& record) {
    return router_.directory().put_lease_record(record);
}

void Cluster::wait_for_standbys(int64_t bound_ms) { router_.standby().wait_for_standbys(bound_ms); }

bool Cluster::superseded() const { return router_.is_superseded(); }

void Cluster::lapsed(const std::string& node) {
    // Promoted over (Router::superseded) since the judge looked: no failover, and the node is
    // not counted failed over (its gauge back to 0).
    if (router_.is_superseded()) {
        if (leases_) leases_->lapse_undone(node);
        return;
    }
    failover_->lapsed(node);
}

// What waits on the node ends now, not at --upstream-timeout: a change holding one of its
// tenants' claims (its failover waits for it), a move to or from it (its source frozen meanwhile).
void Cluster::cut_calls(const std::string& node) { router_.upstream().cut_calls(node); }

void Cluster::heard(const std::string& node) { router_.upstream().heard(node); }

void Cluster::answered(const std::string& node, bool returned) {
    router_.copies().node_answered(node);
    // §9.11: a node back after a failover holds stale copies; a repair has them follow.
    if (returned) router_.copies().repair("node `" + node + "` answered again after a failover");
}

bool Cluster::claim(const std::string& tenant, std::string_view what) {
    return router_.claim(tenant, what);
}

void Cluster::release(const std::string& tenant) { router_.release(tenant); }

std::string Cluster::held_by(const std::string& tenant) { return router_.held_by(tenant); }

bool Cluster::reserve(const std::string& tenant) { return router_.reserve_for_failover(tenant); }

void Cluster::unreserve(const std::string& tenant) { router_.unreserve(tenant); }

PromoteReply Cluster::promote(const NodeRow& node, const std::string& tenant,
                              const PromoteWire& ask) {
    if (router_.is_superseded()) {
        // A failover posted before the router learnt it (Cluster::lapsed): it promotes nothing.
        PromoteReply r;
        r.error = "this router was promoted over: it promotes nothing";
        return r;
    }
    return router_.node_calls().promote(node, tenant, ask, failover_request_id);
}

bool Cluster::send_quota(const NodeRow& node, const TenantRow& tenant) {
    // Through the copies' QuotaSync, as every other send: a node that misses it owes it, and is
    // sent it again when it next answers.
    return router_.copies()
        .quotas()
        .send_to(node, tenant, "copy about to be promoted", failover_request_id)
        .taken;
}

void Cluster::cut(const std::string& tenant, const std::string& from) { router_.cut(tenant, from); }

void Cluster::grant_now(const std::string& node) { changed(node); }

void Cluster::failover_ended(const std::string& node, bool promoted_any) {
    if (!leases_) return;
    // Promoted over while it ran (each promotion refused from then on), having promoted nothing:
    // as a lapse never acted on, the node is not failed over.
    if (router_.is_superseded() && !promoted_any) return leases_->lapse_undone(node);
    leases_->failover_ended(node);
}

void Cluster::withhold(const std::string& node, const std::string& tenant) {
    if (leases_) leases_->withhold(node, tenant);
}

bool Cluster::fence(const std::string& node, const std::vector<std::string>& tenants) {
    return !leases_ || leases_->fence(node, tenants);
}

void Cluster::unfence(const std::string& node, const std::vector<std::string>& tenants) {
    if (!leases_) return;
    for (const std::string& t : tenants) leases_->restore(node, t);
}

void Cluster::restore(const std::string& node, const std::string& tenant) {
    if (leases_) leases_->restore(node, tenant);
}

void Cluster::repair(std::string_view why) {
    if (!router_.is_superseded()) router_.copies().repair(std::string(why));
}

void Cluster::note(const std::string& line, std::string_view event,
                   std::vector<obs::JsonField> fields) {
    shard::log_line(line);
    if (auto e = event_of(event)) {
        obs::AuditLine a;
        a.event = *e;
        a.fields = std::move(fields);
        router_.audit(std::move(a), "",
                      event == "failover" ? failover_request_id : lease_request_id);
    }
}

void Cluster::settled_waiting(const std::string& node, const std::string& tenant,
                              const std::string& to, const std::string& why) {
    recent_failovers_.settled(node, tenant, to, why);
}

void Cluster::failed_over(const std::string& node, std::string_view trigger,
                          const FailoverResult& result) {
    recent_failovers_.add({.at_ms = router_.wall_ms(),
                           .node = node,
                           .trigger = std::string(trigger),
                           .promoted = result.promoted,
                           .failed = result.failed,
                           .waiting = result.waiting});
}

}  // namespace fenec::shard
