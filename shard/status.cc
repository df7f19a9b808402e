// shard/status.cc: `GET /_shard/status` (shard/status.h): the nodes' surveys at once, the moves'
// steps read off the directory, the claims and the copies the nodes hold, the lease, and the ring
// of recent failovers.
#include "shard/status.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "json/writer.h"
#include "server/obs/audit.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/handoff.h"
#include "shard/node_calls.h"
#include "shard/routes.h"
#include "shard/standby.h"

namespace fenec::shard {

void RecentFailovers::add(FailoverSeen seen) {
    std::lock_guard lock(mu_);
    ring_.push_back(std::move(seen));
    while (ring_.size() > recent_failovers_max) ring_.pop_front();
}

void RecentFailovers::settled(const std::string& node, const std::string& tenant,
                              const std::string& to, const std::string& why) {
    std::lock_guard lock(mu_);
    // Every entry of the node that lists it: one parked again by a later failover of the node
    // is listed waiting by both, and settled once for both.
    for (FailoverSeen& f : ring_) {
        if (f.node != node) continue;
        auto w = std::find_if(f.waiting.begin(), f.waiting.end(),
                              [&](const auto& p) { return p.first == tenant; });
        if (w == f.waiting.end()) continue;
        f.waiting.erase(w);
        if (to.empty()) {
            f.failed.emplace_back(tenant, why);
        } else {
            f.promoted.emplace_back(tenant, to);
        }
    }
}

std::vector<FailoverSeen> RecentFailovers::list() const {
    std::lock_guard lock(mu_);
    return {ring_.begin(), ring_.end()};
}

namespace {

// Each node's `GET /_admin/tenants`, all at once, every call ending by one deadline. A node
// left out of the map was not asked (none is: the map has every node of `maps`).
std::map<std::string, SurveyReply> survey(Router& router, const DirectoryMaps& maps,
                                          const std::string& request_id) {
    std::vector<const NodeRow*> nodes;
    for (const auto& [name, n] : maps.nodes) nodes.push_back(&n);
    std::vector<SurveyReply> replies(nodes.size());
    AdminCall call{.method = "GET",
                   .target = "/_admin/tenants",
                   .request_id = request_id,
                   .resendable = true,
                   .timeout_ms = static_cast<uint64_t>(status_survey_ms)};
    call.until.deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(status_survey_ms);
    std::atomic<size_t> next{0};
    auto run = [&] {
        for (size_t i = next++; i < nodes.size(); i = next++) {
            server::CallResult got = router.upstream().admin(*nodes[i], call);
            SurveyReply& r = replies[i];
            if (!got.answer) {
                r.error = got.error.message.empty() ? "it did not answer" : got.error.message;
                continue;
            }
            r.answered = true;
            r.status = got.answer->status;
            r.body = std::move(got.answer->body);
            if (r.status == 200) {
                node_answers::read_tenants(r);
            } else {
                r.error = "it answered " + std::to_string(r.status) + ": " +
                          node_answers::error_of(r.body);
            }
        }
    };
    std::vector<std::thread> helpers;
    const size_t threads = std::min(nodes.size(), status_survey_threads_max);
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run);
    run();
    for (std::thread& h : helpers) h.join();
    std::map<std::string, SurveyReply> out;
    for (size_t i = 0; i < nodes.size(); ++i) out.emplace(nodes[i]->name, std::move(replies[i]));
    return out;
}

// The copy of `tenant` a node holds as its survey tells it; nullptr when the node did not
// answer or holds none.
const CopyInfo* copy_on(const std::map<std::string, SurveyReply>& surveys, const std::string& node,
                        const std::string& tenant) {
    auto it = surveys.find(node);
    if (it == surveys.end() || it->second.status != 200) return nullptr;
    return it->second.find(tenant);
}

struct MoveSeen {
    std::string tenant, from, to, step;
    std::optional<bool> running;  // none on a standby: the claims are its primary's
};

// A move's step (shard/move.h's order), from what shows from outside it: the claim, the row,
// and the copies. `starting` (claimed, not yet marked: its checks, a replica on the target
// detached), `marked` (the row `moving`, the source not frozen yet), `frozen` (the image on its
// way), `installed` (the target holds it: its quota, then the flip), `flipped` (the row on the
// target, the source still there: the copies moved, the standby routers, the source deleted),
// `stopped` (left `moving` by a router stopped mid-move, and not running: routed to the source
// until moved again).
std::optional<MoveSeen> move_of(const TenantRow& t, std::optional<bool> running,
                                const std::map<std::string, SurveyReply>& surveys) {
    const bool held = running.value_or(false);
    if (t.state == "moving") {
        MoveSeen m{t.name, t.node, t.moving_to, "", running};
        const CopyInfo* target = copy_on(surveys, t.moving_to, t.name);
        const CopyInfo* source = copy_on(surveys, t.node, t.name);
        if (running && !held)
            m.step = "stopped";
        else if (target && target->role == "primary")
            m.step = "installed";
        else if (source && source->frozen)
            m.step = "frozen";
        else
            m.step = "marked";
        return m;
    }
    if (!held) return std::nullopt;
    // Held by a move, not `moving`: before the mark, or after the flip while the frozen source
    // still stands on another node.
    for (const auto& [node, reply] : surveys) {
        if (node == t.node) continue;
        const CopyInfo* c = copy_on(surveys, node, t.name);
        if (c && c->role == "primary" && c->frozen) {
            return MoveSeen{t.name, node, t.node, "flipped", running};
        }
    }
    return MoveSeen{t.name, t.node, "", "starting", running};
}

void write_pairs(json::Writer& w, std::string_view key,
                 const std::vector<std::pair<std::string, std::string>>& list,
                 std::string_view second) {
    w.key(key);
    w.begin_array();
    for (const auto& [tenant, value] : list) {
        w.begin_object();
        w.key("tenant");
        w.string(tenant);
        w.key(second);
        w.string(value);
        w.end_object();
    }
    w.end_array();
}

void write_nodes(json::Writer& w, const DirectoryMaps& maps,
                 const std::map<std::string, SurveyReply>& surveys) {
    w.key("nodes");
    w.begin_array();
    for (const auto& [name, n] : maps.nodes) {
        const SurveyReply& r = surveys.at(name);
        w.begin_object();
        w.key("name");
        w.string(name);
        w.key("answered");
        w.boolean(r.status == 200);
        if (r.status == 200) {
            uint64_t bytes = 0;
            for (const CopyInfo& c : r.copies) bytes += c.bytes;
            w.key("copies");
            w.uint64(r.copies.size());
            w.key("bytes");
            w.uint64(bytes);
        } else {
            w.key("error");
            w.string(r.error);
        }
        w.end_object();
    }
    w.end_array();
}

// Each tenant's size: its copy on its node, where that node answered.
void write_sizes(json::Writer& w, const DirectoryMaps& maps,
                 const std::map<std::string, SurveyReply>& surveys) {
    w.key("tenants");
    w.begin_array();
    for (const auto& [name, t] : maps.tenants) {
        const CopyInfo* c = copy_on(surveys, t.node, name);
        if (!c) continue;
        w.begin_object();
        w.key("name");
        w.string(name);
        w.key("bytes");
        w.uint64(c->bytes);
        w.end_object();
    }
    w.end_array();
}

void write_moves(json::Writer& w, Router& router, const DirectoryMaps& maps,
                 const std::map<std::string, SurveyReply>& surveys) {
    const bool leading = !router.standby().following();
    w.key("moves");
    w.begin_array();
    for (const auto& [name, t] : maps.tenants) {
        std::optional<bool> running;
        if (leading) running = router.held_by(name) == "move";
        const std::optional<MoveSeen> m = move_of(t, running, surveys);
        if (!m) continue;
        w.begin_object();
        w.key("tenant");
        w.string(m->tenant);
        w.key("from");
        w.string(m->from);
        w.key("to");
        if (m->to.empty())
            w.null();
        else
            w.string(m->to);
        w.key("step");
        w.string(m->step);
        w.key("running");
        if (m->running)
            w.boolean(*m->running);
        else
            w.null();
        w.end_object();
    }
    w.end_array();
}

// Thaws undone moves owe their sources (Copies::owe_thaw): a tenant frozen there until paid.
void write_thaws(json::Writer& w, Router& router) {
    w.key("thaws_owed");
    w.begin_array();
    for (const OwedThaw& t : router.copies().owed_thaws()) {
        w.begin_object();
        w.key("node");
        w.string(t.node);
        w.key("tenant");
        w.string(t.tenant);
        w.end_object();
    }
    w.end_array();
}

// Whether `maps` has a place for `tenant`'s copy on `node`: its primary, a move's target, its
// replica, or its node's standby.
bool placed_on(const DirectoryMaps& maps, const std::string& tenant, const std::string& node) {
    auto t = maps.tenants.find(tenant);
    if (t == maps.tenants.end()) return false;
    const TenantRow& row = t->second;
    if (row.node == node || (row.state == "moving" && row.moving_to == node)) return true;
    if (auto r = maps.replicas.find(tenant); r != maps.replicas.end() && r->second == node) {
        return true;
    }
    const std::string* standby = maps.standby_of(row.node);
    return standby && *standby == node;
}

// Copies the nodes hold that the directory has no place for (placed_on), in the directory as it
// was before the survey and as it is after, that no move across regions still needs (its source,
// exported or released, until the drop or an undo: Handoffs), and that no operation holds: a
// deleted tenant's
// copy on a node that missed the delete, a move's target that installed the image and missed
// the undo, an old primary a failover left and no repair took back. Nothing routes to them
// (docs/runbook.md). Only a leading router's: a standby's directory lags its primary's, and a
// superseded router's stopped, so either would list as strays the tenants made since, and
// neither sees the claims of the operations running.
void write_strays(json::Writer& w, Router& router, const DirectoryMaps& before,
                  const std::map<std::string, SurveyReply>& surveys) {
    w.key("strays");
    if (router.standby().following() || router.is_superseded()) {
        w.null();
        return;
    }
    const auto after = router.directory().maps();
    w.begin_array();
    for (const auto& [node, reply] : surveys) {
        if (reply.status != 200) continue;
        for (const CopyInfo& c : reply.copies) {
            if (placed_on(before, c.name, node) || placed_on(*after, c.name, node)) continue;
            if (auto h = router.handoffs().find(c.name); h && h->before.node == node) continue;
            if (!router.held_by(c.name).empty()) continue;
            auto t = after->tenants.find(c.name);
            w.begin_object();
            w.key("node");
            w.string(node);
            w.key("tenant");
            w.string(c.name);
            w.key("role");
            w.string(c.role);
            w.key("frozen");
            w.boolean(c.frozen);
            w.key("bytes");
            w.uint64(c.bytes);
            w.key("placed_on");  // the tenant's node in the directory; null: no row
            if (t == after->tenants.end()) {
                w.null();
            } else {
                w.string(t->second.node);
            }
            w.end_object();
        }
    }
    w.end_array();
}

void write_lease(json::Writer& w, Router& router, const DirectoryMaps& maps) {
    w.key("lease");
    const Leases* leases = router.cluster().leases();
    if (!leases && !maps.lease_record) {
        w.null();
        return;
    }
    w.begin_object();
    w.key("ms");  // the lease this router grants; null where it grants none
    if (leases && !router.standby().following())
        w.int64(leases->lease_ms());
    else
        w.null();
    w.key("record_ms");
    if (maps.lease_record)
        w.int64(maps.lease_record->ms);
    else
        w.null();
    w.end_object();
}

void write_failovers(json::Writer& w, Router& router) {
    w.key("failovers");
    w.begin_array();
    for (const FailoverSeen& f : router.cluster().recent_failovers().list()) {
        w.begin_object();
        w.key("at");
        w.string(obs::iso_time_ms(f.at_ms));
        w.key("node");
        w.string(f.node);
        w.key("trigger");
        w.string(f.trigger);
        write_pairs(w, "promoted", f.promoted, "to");
        write_pairs(w, "failed", f.failed, "why");
        write_pairs(w, "waiting", f.waiting, "held_by");
        w.end_object();
    }
    w.end_array();
}

}  // namespace

http::Response serve_status(Router& router, const server::Request& request,
                            const Router::Answering& a) {
    if (auto r = method_refusal(request.head)) return std::move(*r);
    const auto maps = router.directory().maps();
    const std::map<std::string, SurveyReply> surveys = survey(router, *maps, a.request_id);
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    const std::string superseded = router.superseded();
    w.key("role");
    w.string(router.standby().following() ? "standby"
             : !superseded.empty()        ? "superseded"
                                          : "primary");
    if (!superseded.empty()) {
        w.key("superseded");
        w.string(superseded);
    }
    w.key("term");
    w.int64(maps->term);
    w.key("at");
    w.string(obs::iso_time_ms(router.wall_ms()));
    write_nodes(w, *maps, surveys);
    write_sizes(w, *maps, surveys);
    write_moves(w, router, *maps, surveys);
    write_thaws(w, router);
    write_strays(w, router, *maps, surveys);
    write_lease(w, router, *maps);
    write_failovers(w, router);
    w.end_object();
    return r;
}

}  // namespace fenec::shard
