// shard/repair.cc: the repair (router.md §8.3; shard/copies.h), its schedule for tenants whose
// primary does not answer, and `POST /_shard/replicas`.
//
// A repair surveys every node of its scope (`GET /_admin/tenants?detail`), then takes each
// active tenant in name order, claimed while it is changed: a new lineage its primary and a copy
// following it both report is recorded (§9.2); a copy that is not there or follows someone else
// is attached again; a tenant with no copy gets a replica of its own, a node holding a copy of it
// first, so a node back from a failover has its stale copies follow the tenants' new primaries.
// A tenant whose primary did not answer gets none now and is looked at again on the schedule.
//
// Asked for (`POST /_shard/replicas`) it gives a replica to every tenant without a copy. Run on
// its own (a node added, a node's return, a failover's end) it places new copies only under
// --replicas; without the flag it only has copies the nodes already hold follow their primaries,
// so a router that was never asked for copies does not start making them.
#include <simdjson.h>

#include <algorithm>
#include <iostream>

#include "json/writer.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/leases.h"
#include "shard/log_line.h"
#include "shard/node_calls.h"
#include "shard/placement.h"
#include "shard/routes.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

// Whether `survey` shows `node` keeping a copy of `tenant` that follows `from`.
bool follows(const std::map<std::string, SurveyReply>& survey, const std::string& node,
             const std::string& tenant, const std::string& from) {
    auto s = survey.find(node);
    if (s == survey.end()) return true;  // not asked, or silent: nothing known to mend
    const CopyInfo* c = s->second.find(tenant);
    return c && c->following && c->following->from == from;
}

}  // namespace

RepairSchedule::RepairSchedule(int64_t first_ms) {
    for (size_t i = 0; i < after_ms.size(); ++i) after_[i] = after_ms[i] * first_ms / after_ms[0];
}

void RepairSchedule::silent(const std::string& tenant, int64_t now_ms) {
    looks_.try_emplace(tenant, Look{now_ms, 0});
}

void RepairSchedule::settled(const std::string& tenant) { looks_.erase(tenant); }

std::vector<std::string> RepairSchedule::due(int64_t now_ms) {
    std::vector<std::string> out;
    for (auto it = looks_.begin(); it != looks_.end();) {
        Look& l = it->second;
        if (l.first_ms + after_[l.step] > now_ms) {
            ++it;
            continue;
        }
        out.push_back(it->first);
        // Looks missed (a repair that ran long) are not made up one after another.
        while (l.step < after_.size() && l.first_ms + after_[l.step] <= now_ms) ++l.step;
        it = l.step == after_.size() ? looks_.erase(it) : std::next(it);
    }
    return out;
}

std::optional<int64_t> RepairSchedule::next_ms() const {
    std::optional<int64_t> next;
    for (const auto& [tenant, l] : looks_) {
        const int64_t at = l.first_ms + after_[l.step];
        if (!next || at < *next) next = at;
    }
    return next;
}

RepairReport Copies::run_repair(const Scope& scope, std::string_view request_id) {
    std::lock_guard one_at_a_time(repair_mu_);
    RepairReport report;
    auto maps = router_.directory().maps();
    // 1. The survey: what every node of the scope holds, of which lineage, following whom.
    std::map<std::string, SurveyReply> survey;
    // A node failed over on its lapsed lease that has not answered a grant since is silent
    // without being asked: a node cut off takes the connection and answers nothing, and the
    // failover's own repair would wait out --upstream-timeout on it before giving its tenants
    // new copies. Its first answer starts a repair of its own (§9.11).
    const Leases* leases = router_.cluster().leases();
    for (const auto& [name, node] : maps->nodes) {
        if (halt_) return report;
        if (scope.region && node.region != *scope.region) continue;
        if (leases) {
            // Only one still leasing: a node back without --lease, or held by another term,
            // answers no grant that would clear the mark, and would be silent for good.
            if (const std::optional<LeaseView> v = leases->view(name);
                v && v->failed_over && v->takes && !v->fenced) {
                continue;
            }
        }
        SurveyReply s = calls().tenants(node, true, request_id);
        if (s.answered && s.status == 200) {
            survey.emplace(name, std::move(s));
            // The node answered: quotas it did not take go again, here and now, before this
            // repair claims the tenants they are for.
            if (quotas_.owed_by(name)) quotas_.resend(name, request_id);
            if (thaws_owed_by(name)) thaw_owed(name);
        }
    }
    for (const auto& [name, t] : maps->tenants) {
        if (halt_) return report;
        if (scope.tenants && !scope.tenants->contains(name)) continue;
        auto n = maps->nodes.find(t.node);
        if (n == maps->nodes.end()) continue;
        if (scope.region && n->second.region != *scope.region) continue;
        repair_tenant(t, scope, survey, report, request_id);
    }
    return report;
}

void Copies::repair_tenant(const TenantRow& tenant, const Scope& scope,
                           const std::map<std::string, SurveyReply>& survey, RepairReport& report,
                           std::string_view request_id) {
    const bool placing = scope.asked || router_.options().replicas;
    // 3. Its primary silent: nothing is known of it, and a copy made now might follow a node
    // that is gone. Looked at again on the schedule.
    if (!survey.contains(tenant.node)) {
        auto maps = router_.directory().maps();
        if (!placing || !maps->copy_of(tenant).empty()) return;
        schedule_silent(tenant.name);
        report.unreplicated.push_back(
            {tenant.name, "its node `" + tenant.node +
                              "` did not answer: the repair looks again 10 s, 30 s, 1 min, "
                              "2 min and 5 min after, and POST /_shard/replicas at once"});
        return;
    }
    TenantClaim held(router_, tenant.name, repair_claim);
    if (!held.held) {  // kept on the schedule, if it is on it
        report.unreplicated.push_back({tenant.name, "another operation holds it (" +
                                                        router_.held_by(tenant.name) +
                                                        "): the next repair looks again"});
        return;
    }
    test_hooks::stall_repair_claim(tenant.name);
    // Off the schedule once this look settles it, while the claim is held (so no operation's own
    // look is taken off meanwhile). One left without the copy it should have (no node taking it,
    // a standby behind or silent) keeps its next look; one given a look of its own here
    // (schedule_look) keeps that one.
    bool look_later = false;
    struct Settle {
        Copies& copies;
        const std::string& tenant;
        const bool& later;
        ~Settle() {
            if (later) return;
            std::lock_guard lock(copies.mu_);
            copies.schedule_.settled(tenant);
        }
    } settle{*this, tenant.name, look_later};
    learn_lineage(tenant, survey);
    auto maps = router_.directory().maps();  // after the claim: what the tenant is now
    auto t = maps->tenants.find(tenant.name);
    if (t == maps->tenants.end() || t->second.state != "active") return;
    const TenantRow& row = t->second;
    auto primary = maps->nodes.find(row.node);
    if (primary == maps->nodes.end()) return;
    const std::string from = url_of(primary->second);
    // The node the directory names holds no file of it (deleted by hand, or by a router a
    // standby was promoted over before nodes fenced its changes): nothing to copy from, and every
    // request for it is the node's 404. Said, so an operator restores it or fails the node over;
    // asked again first, since the survey may be older than a move that brought it there.
    if (auto ps = survey.find(row.node); ps != survey.end() && !ps->second.find(row.name)) {
        const DescribeReply d = calls().describe(primary->second, row.name, request_id);
        if (d.read && !d.found) {
            const std::string why = "its node `" + row.node +
                                    "` holds no file of it: restore it there, or fail the node "
                                    "over onto its copy";
            log_line("`" + row.name + "`: " + why);
            report.failed.push_back({row.name, why});
            return;
        }
    }
    // 2. A copy recorded (the pair's standby, or its own replica) that the survey shows missing
    // or following another node is attached again where it is. On a paired node the standby is
    // attached first; once it has the tenant, its own replica (one the pair could not replace)
    // is handed over to it; until then that replica stays its copy and is mended as one.
    auto replica = maps->replicas.find(row.name);
    if (const std::string* standby = maps->standby_of(row.node)) {
        const bool own_elsewhere = replica != maps->replicas.end() && replica->second != *standby;
        // Not surveyed (silent): nothing is known of what it holds, so nothing is handed to it
        // (that could delete the tenant's only copy); only an own replica elsewhere is mended.
        if (!survey.contains(*standby)) {
            look_later = true;
            if (!own_elsewhere) return;
        } else {
            auto s = maps->nodes.find(*standby);
            std::string why = "it is not in the directory";
            bool taken = s != maps->nodes.end() && follows(survey, *standby, row.name, from);
            if (!taken && s != maps->nodes.end()) {
                Attached a = attach(row, s->second, false, request_id);
                taken = a.ok;
                why = a.why;
                if (a.ok) {
                    report.replicated.push_back(
                        {row.name, *standby, same_zone(*maps, row.node, *standby)});
                }
            }
            std::string not_yet;
            if (taken) test_hooks::stall_handover("repair", row.name);
            const Handed h =
                taken ? handed_to_standby(row.name, *standby, request_id, not_yet) : Handed::behind;
            if (h == Handed::yes) {
                forget(row.name);
                drop_unrecorded(row, survey, report, request_id);
                return;
            }
            if (h == Handed::pair_changed) {  // looked at again under the pair as it is then
                look_after_pair_change(row.name, not_yet);
                look_later = true;
                return;
            }
            if (taken) {
                // Following, not caught up: its own replica stays its copy, mended below, and
                // is handed over on a later repair.
                look_again(row.name, *standby, not_yet);
                look_later = true;
            } else if (!own_elsewhere) {
                remember(row.name, "its node's standby `" + *standby + "` did not take it: " + why);
                report.failed.push_back({row.name, why});
                look_later = true;
                return;
            } else {
                log_line("`" + row.name + "` keeps its replica on `" + replica->second +
                         "`: its node's standby `" + *standby + "` did not take it: " + why);
            }
        }
    }
    const std::string copy = replica != maps->replicas.end() ? replica->second : std::string();
    if (auto copy_node = maps->nodes.find(copy); copy_node != maps->nodes.end()) {
        if (follows(survey, copy, row.name, from)) {
            if (survey.contains(copy)) {
                forget(row.name);
                drop_unrecorded(row, survey, report, request_id);
            }
            return;
        }
        Attached a = attach(row, copy_node->second, true, request_id);
        if (a.ok) {
            report.replicated.push_back({row.name, copy, same_zone(*maps, row.node, copy)});
        } else {
            remember(row.name, "node `" + copy + "` did not take it: " + a.why);
            report.failed.push_back({row.name, a.why});
            look_later = true;
        }
        return;
    }
    if (maps->standby_of(row.node)) return;  // a paired node's tenants get no replica of their own
    // No copy: a replica of its own, a node already holding a copy first.
    std::set<std::string, std::less<>> holding;
    for (const auto& [node, s] : survey) {
        if (node != row.node && s.find(row.name)) holding.insert(node);
    }
    if (!placing && holding.empty()) return;
    // Not on a node that did not answer the survey: one just failed over, say, would hold the
    // attach for its whole --upstream-timeout before the next node is tried.
    std::set<std::string> silent;
    for (const auto& [name, node] : maps->nodes) {
        if (!survey.contains(name)) silent.insert(name);
    }
    // Every node left is tried: each answered the survey, so none holds the repair for a timeout.
    CopyOutcome out = place(row.name, holding, std::move(silent), request_id,
                            {.tries = maps->nodes.size(), .schedule = false});
    if (!out.node.empty()) {
        report.replicated.push_back({row.name, out.node, out.same_zone});
    } else if (out.refused) {
        report.failed.push_back({row.name, out.unreplicated});
        look_later = true;
    } else {
        report.unreplicated.push_back({row.name, out.unreplicated});
        look_later = true;
    }
}

// A tenant whose recorded copy follows it: a copy on any other node that follows its primary
// too, recorded nowhere (left by a pair or a replica whose delete its node missed, down at the
// time), is deleted. It would stream from the primary for ever, and the primary's writes would
// wait for it while it keeps up. The tenant is claimed; the maps are read again here.
void Copies::drop_unrecorded(const TenantRow& tenant,
                             const std::map<std::string, SurveyReply>& survey, RepairReport& report,
                             std::string_view request_id) {
    const auto maps = router_.directory().maps();
    const auto t = maps->tenants.find(tenant.name);
    if (t == maps->tenants.end()) return;
    const auto primary = maps->nodes.find(t->second.node);
    if (primary == maps->nodes.end()) return;
    const std::string from = url_of(primary->second);
    // A delete carries no term, where a follow does: on a node whose lease another router's
    // term holds (a router replaced that still reaches the nodes), this one deletes nothing,
    // nor for a tenant whose primary is such a node.
    const Leases* leases = router_.cluster().leases();
    auto fenced = [&](const std::string& node) {
        const std::optional<LeaseView> v = leases ? leases->view(node) : std::nullopt;
        return v && v->fenced;
    };
    if (fenced(t->second.node)) return;
    std::set<std::string> kept = {t->second.node, maps->copy_of(t->second)};
    if (const std::string* s = maps->standby_of(t->second.node)) kept.insert(*s);
    if (auto r = maps->replicas.find(tenant.name); r != maps->replicas.end())
        kept.insert(r->second);
    for (const auto& [name, s] : survey) {
        if (kept.contains(name) || fenced(name)) continue;
        const CopyInfo* c = s.find(tenant.name);
        const auto node = maps->nodes.find(name);
        if (!c || node == maps->nodes.end()) continue;
        if (!c->following) {
            const auto ps = survey.find(t->second.node);
            const CopyInfo* live = ps == survey.end() ? nullptr : ps->second.find(tenant.name);
            if (live) drop_old_primary(t->second, node->second, *c, *live, report, request_id);
            continue;
        }
        if (c->following->from != from) continue;
        // The survey may be minutes old: the node is asked again just before (a copy promoted
        // there since, or deleted by a hand-over in this repair, is left alone).
        if (follows_primary(t->second, primary->second, node->second, request_id) != Follows::yes) {
            continue;
        }
        NodeAnswer a = calls().remove(node->second, tenant.name, request_id);
        if (a.ok()) {
            log_line("deleted the copy of `" + tenant.name + "` on `" + name +
                     "`: it followed the primary, and no directory row names it");
            report.dropped.push_back({tenant.name, name});
        } else if (!a.gone()) {
            log_line("the copy of `" + tenant.name + "` on `" + name +
                     "` follows the primary with no directory row naming it, and was not "
                     "deleted (" +
                     a.said(node->second) + ")");
        }
    }
}

// §9.11: a node failed over comes back with the files of tenants served elsewhere now, each a
// primary still, of the tenant's lineage, which its lease no longer names: it refuses their
// writes but serves their reads as they stood, and a backup of the node takes them for its own.
// Where the tenant's recorded copy follows the primary (drop_unrecorded's caller), such a file is
// deleted, on a node this router leases that has answered a grant since its failover (so no other
// term holds it, and its list names the tenant nowhere). Without leases nothing says whose the
// node is: the runbook has the operator delete them.
void Copies::drop_old_primary(const TenantRow& tenant, const NodeRow& node, const CopyInfo& copy,
                              const CopyInfo& live, RepairReport& report,
                              std::string_view request_id) {
    const Leases* leases = router_.cluster().leases();
    if (!leases || !leases->started() || tenant.lineage.empty()) return;
    if (copy.role != "primary" || copy.lineage != tenant.lineage) return;
    // Only a copy the live primary has forked past: the primary the directory names holds the
    // tenant, a primary of its lineage, and the copy's history is one of the primary's earlier
    // forks (a failover promoted a copy that had followed it). A copy of the same history is no
    // old one: a move a router the directory no longer heeds made, say, which put the tenant's
    // only primary there and deleted the file the directory names.
    if (live.role != "primary" || live.lineage != tenant.lineage || copy.history.empty() ||
        live.history == copy.history ||
        std::ranges::find(live.forks, copy.history) == live.forks.end()) {
        return;
    }
    const std::optional<LeaseView> v = leases->view(node.name);
    if (!v || !v->takes || v->fenced || v->failed_over) return;
    // Asked again just before, as drop_unrecorded does: a copy told to follow since is left.
    const DescribeReply d = calls().describe(node, tenant.name, request_id);
    if (!d.read || !d.found || !d.following.empty() || d.lineage != tenant.lineage ||
        d.history != copy.history) {
        return;
    }
    NodeAnswer a = calls().remove(node, tenant.name, request_id);
    if (a.ok()) {
        log_line("deleted the old primary copy of `" + tenant.name + "` on `" + node.name +
                 "`: the tenant is served on `" + tenant.node + "`, and its copy follows it");
        report.dropped.push_back({tenant.name, node.name});
    } else if (!a.gone()) {
        log_line("the old primary copy of `" + tenant.name + "` on `" + node.name +
                 "`, served on `" + tenant.node + "` now, was not deleted (" + a.said(node) + ")");
    }
}

// §8.3 step 4: the primary and a copy following it report one lineage the directory does not
// have: the copy took the primary's image, so that lineage is the tenant's now.
void Copies::learn_lineage(const TenantRow& tenant,
                           const std::map<std::string, SurveyReply>& survey) {
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant.name);
    auto primary = maps->nodes.find(tenant.node);
    auto ps = survey.find(tenant.node);
    if (t == maps->tenants.end() || primary == maps->nodes.end() || ps == survey.end()) return;
    const CopyInfo* p = ps->second.find(tenant.name);
    if (!p || p->lineage.empty() || p->lineage == t->second.lineage) return;
    const std::string from = url_of(primary->second);
    for (const auto& [node, s] : survey) {
        if (node == tenant.node) continue;
        const CopyInfo* c = s.find(tenant.name);
        if (!c || !c->following || c->following->from != from || c->lineage != p->lineage) {
            continue;
        }
        if (engine::Status st = router_.directory().set_lineage(tenant.name, p->lineage);
            !st.is_ok()) {
            log_line("the new lineage of `" + tenant.name + "` was not recorded: " + st.to_string());
            return;
        }
        log_line("`" + tenant.name + "` is of lineage " + p->lineage + " now (was " +
                 (t->second.lineage.empty() ? std::string("not recorded") : t->second.lineage) +
                 "): its node `" + tenant.node + "` and the copy on `" + node + "` following it say so");
        return;
    }
}

// --- POST /_shard/replicas -----------------------------------------------------------------

namespace {

void write_why(json::Writer& w, const std::vector<RepairReport::Why>& list) {
    w.begin_array();
    for (const RepairReport::Why& x : list) {
        w.begin_object();
        w.key("tenant");
        w.string(x.tenant);
        w.key("why");
        w.string(x.why);
        w.end_object();
    }
    w.end_array();
}

}  // namespace

http::Response serve_replicas(Router& router, const server::Request& request,
                              const Router::Answering& a) {
    if (auto r = method_refusal(request.head)) return std::move(*r);
    std::optional<std::string> region;
    const std::string_view text = request.body;
    if (text.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        simdjson::dom::object obj;
        if (parser.parse(text.data(), text.size()).get(doc)) {
            return Router::error(400, "the body is not JSON");
        }
        if (doc.get_object().get(obj)) return Router::error(400, "the body is not a JSON object");
        for (auto field : obj) {
            if (field.key != "region") {
                return Router::error(
                    400, "unknown field `" + std::string(field.key) + "`: a repair takes region");
            }
            if (field.value.is_null()) continue;
            std::string_view s;
            if (field.value.get_string().get(s)) {
                return Router::error(400, "field `region` must be a string");
            }
            if (!s.empty() && !valid_name(s)) {
                return Router::error(
                    400, "field `region`: `" + std::string(s) + "` is not [a-z0-9_-]{1,64}");
            }
            region = std::string(s);
        }
    }
    if (region && !region->empty()) {
        // A region this directory has no node of: a repair there would answer nothing to do,
        // which reads as all well (as a create and a move answer it, 404).
        if (!router.directory().maps()->keeps_nodes_of(*region)) {
            return Router::error(404, "no region `" + *region +
                                          "`: no node of this router's "
                                          "directory is in it");
        }
    }
    RepairReport report = router.copies().repair_now(region, a.request_id);
    http::Response r;
    r.status = report.failed.empty() ? 200 : 502;
    json::Writer w(r.body);
    w.begin_object();
    w.key("replicated");
    w.begin_array();
    for (const RepairReport::Placed& p : report.replicated) {
        w.begin_object();
        w.key("tenant");
        w.string(p.tenant);
        w.key("replica");
        w.string(p.replica);
        if (p.same_zone) {
            w.key("same_zone");
            w.boolean(true);
        }
        w.end_object();
    }
    w.end_array();
    w.key("failed");
    write_why(w, report.failed);
    w.key("unreplicated");
    write_why(w, report.unreplicated);
    w.key("dropped");
    w.begin_array();
    for (const RepairReport::Dropped& d : report.dropped) {
        w.begin_object();
        w.key("tenant");
        w.string(d.tenant);
        w.key("node");
        w.string(d.node);
        w.end_object();
    }
    w.end_array();
    w.end_object();
    return r;
}

}  // namespace fenec::shard
