// shard/copies.cc: a tenant's copies attached and detached, and kept in step with creates,
// deletes, moves and pairs (shard/copies.h; router.md §6.4, §7.2 steps 1, 8 and 9, §8.1, §8.2);
// what is answered and counted of them; the worker that runs repairs and quota resends. The
// repair itself is repair.cc's.
#include "shard/copies.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>
#include <thread>
#include <variant>

#include "json/writer.h"
#include "server/obs/metrics.h"
#include "shard/log_line.h"
#include "shard/node_calls.h"
#include "shard/placement.h"
#include "shard/routes.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

// The tenants on `node`, by name.
std::vector<TenantRow> tenants_on(const DirectoryMaps& maps, std::string_view node) {
    std::vector<TenantRow> out;
    for (const auto& [name, t] : maps.tenants) {
        if (t.node == node) out.push_back(t);
    }
    return out;
}

}  // namespace

Copies::Copies(Router& router, obs::Registry& registry)
    : router_(router),
      quotas_(router),
      schedule_(test_hooks::repair_look_ms(RepairSchedule::after_ms[0])) {
    replicas_gauge_ =
        &registry.gauge("fenec_router_replicas", "replicas held, every node listed", {"node"});
    unreplicated_gauge_ =
        &registry.gauge("fenec_router_unreplicated_tenants", "tenants with no copy", {"region"});
    same_zone_gauge_ = &registry.gauge("fenec_router_same_zone_copies",
                                       "tenants whose copy is in their zone", {"region"});
}

Copies::~Copies() { stop(); }

NodeCalls& Copies::calls() { return router_.node_calls(); }

void write_copy(json::Writer& w, const CopyOutcome& copy) {
    if (!copy.node.empty()) {
        w.key("replica_on");
        w.string(copy.node);
        if (copy.same_zone) {
            w.key("same_zone");
            w.boolean(true);
        }
    } else if (copy.asked) {
        w.key("unreplicated");
        w.string(copy.unreplicated);
    }
}

void Copies::remember(const std::string& tenant, std::string why) {
    std::lock_guard lock(why_mu_);
    why_[tenant] = std::move(why);
}

void Copies::forget(const std::string& tenant) {
    std::lock_guard lock(why_mu_);
    why_.erase(tenant);
}

Copies::Attached Copies::attach(const TenantRow& tenant, const NodeRow& on, bool own,
                                std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto primary = maps->nodes.find(tenant.node);
    if (primary == maps->nodes.end()) {
        return {false, "its node `" + tenant.node + "` is not in the directory"};
    }
    FollowWire wire;
    wire.from = url_of(primary->second);
    wire.lineage = tenant.lineage;
    wire.authority = maps->authority();
    wire.term = maps->term;
    FollowReply f = calls().follow(on, tenant.name, wire, request_id);
    if (!f.ok()) return {false, f.said(on)};
    // The quota before the row (§8.2): a copy recorded is one that was sent it. One not taken
    // is logged and sent again when the node answers; it does not undo the copy.
    (void)quotas_.send_to(on, tenant, own ? "replica" : "standby copy", request_id);
    if (own) {
        if (engine::Status st = router_.directory().put_replica(tenant.name, on.name);
            !st.is_ok()) {
            (void)calls().remove(on, tenant.name, request_id);
            return {false, "the directory could not record its replica on `" + on.name +
                               "`: " + st.to_string()};
        }
    }
    forget(tenant.name);
    return {true, ""};
}

void Copies::detach(const std::string& tenant, std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto r = maps->replicas.find(tenant);
    if (r == maps->replicas.end()) return;
    const std::string node = r->second;
    // The record first: one left naming a node whose copy was deleted would be the tenant's copy
    // still (DirectoryMaps::copy_of), and a failover would promote nothing there. Not cleared,
    // the copy stays with it.
    if (engine::Status st = router_.directory().remove_replica(tenant); !st.is_ok()) {
        log_line("the replica record of `" + tenant + "` on `" + node +
                 "` was not cleared, so its copy there is kept: " + st.to_string());
        return;
    }
    // The record is cleared even when the node did not answer (§8.2): it keeps no copy the
    // router counts on.
    if (auto n = maps->nodes.find(node); n != maps->nodes.end()) {
        NodeAnswer a = calls().remove(n->second, tenant, request_id);
        if (!a.gone()) {
            log_line("the replica of `" + tenant + "` on `" + node + "` was not deleted (" +
                     a.said(n->second) + "); its record is cleared all the same");
        }
    }
}

bool Copies::caught_up(const std::string& tenant, const NodeRow& primary, const NodeRow& copy,
                       std::string_view request_id, std::string& why) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(standby_catch_up_ms_max);
    for (int round = 0; round < 2; ++round) {
        const DescribeReply p = calls().describe(primary, tenant, request_id);
        if (!p.found) {
            why = "its primary did not say its seq (" + p.said(primary) + ")";
            return false;
        }
        const std::string from = url_of(primary);
        for (;;) {
            const DescribeReply c = calls().describe(copy, tenant, request_id);
            // The copy the follow made, not one a node kept from before (a stale copy a failover
            // left, on its lineage but another history, or following another node).
            const bool ours =
                c.found && c.lineage == p.lineage && c.history == p.history && c.following == from;
            if (ours && c.seq >= p.durable) break;
            if (std::chrono::steady_clock::now() >= deadline) {
                why = !c.found ? "`" + copy.name + "` has no copy of it yet"
                      : !ours  ? "`" + copy.name + "` has not taken the primary's copy yet"
                               : "`" + copy.name + "` is at seq " + std::to_string(c.seq) +
                                    " of the primary's durable " + std::to_string(p.durable);
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return true;
}

bool Copies::schedule_look(const std::string& tenant) {
    bool again = true;
    {
        std::lock_guard lock(mu_);
        if (++catch_up_looks_[tenant] > catch_up_looks_max) {
            catch_up_looks_.erase(tenant);
            again = false;
        } else {  // from the first step again: the next look in 10 s
            schedule_.settled(tenant);
            schedule_.silent(tenant, static_cast<int64_t>(router_.now_ms()));
        }
    }
    if (again) wake_.notify_one();
    return again;
}

void Copies::schedule_silent(const std::string& tenant) {
    {
        std::lock_guard lock(mu_);
        schedule_.silent(tenant, static_cast<int64_t>(router_.now_ms()));
    }
    wake_.notify_one();
}

void Copies::look_again(const std::string& tenant, const std::string& standby,
                        const std::string& why) {
    const bool again = schedule_look(tenant);
    log_line("`" + tenant + "` keeps its replica until its node's standby `" + standby +
             "` has caught up (" + (again ? "looked at again in 10 s" : "left to the next repair") +
             "): " + why);
}

void Copies::look_after_pair_change(const std::string& tenant, const std::string& why) {
    const bool again = schedule_look(tenant);
    log_line("`" + tenant + "` is left as it was, " + why + " meanwhile (" +
             (again ? "looked at again in 10 s" : "left to the next repair") + ")");
}

Copies::Handed Copies::handed_to_standby(const std::string& tenant, const std::string& standby,
                                         std::string_view request_id, std::string& why) {
    auto handed = [&] {  // its looks counted from none again, should it fall behind later
        std::lock_guard lock(mu_);
        catch_up_looks_.erase(tenant);
        return Handed::yes;
    };
    // The pair changed since the caller read it (a repair beside a PUT of the pair): the row
    // kept for the new standby's catch-up is not this standby's to take. Asked again after the
    // catch-up's wait, which a PUT may land in.
    auto pair_changed = [&](const DirectoryMaps& maps) {
        auto t = maps.tenants.find(tenant);
        const std::string* s = t == maps.tenants.end() ? nullptr : maps.standby_of(t->second.node);
        if (s != nullptr && *s == standby) return false;
        why = "the pair of its node no longer names `" + standby + "`";
        return true;
    };
    const auto maps = router_.directory().maps();
    if (pair_changed(*maps)) return Handed::pair_changed;
    auto r = maps->replicas.find(tenant);
    if (r == maps->replicas.end()) return handed();
    if (r->second == standby) {
        (void)router_.directory().remove_replica(tenant);  // the same copy, kept
        return handed();
    }
    // A standby still taking its image, or behind, is no copy to fail over onto: a write
    // answered meanwhile waited for the replica alone.
    auto t = maps->tenants.find(tenant);
    auto primary = t == maps->tenants.end() ? maps->nodes.end() : maps->nodes.find(t->second.node);
    auto s = maps->nodes.find(standby);
    if (primary == maps->nodes.end() || s == maps->nodes.end()) {
        why = "its node or the standby is not in the directory";
        return Handed::behind;
    }
    if (!caught_up(tenant, primary->second, s->second, request_id, why)) return Handed::behind;
    test_hooks::stall_handover("caught-up", tenant);
    if (pair_changed(*router_.directory().maps())) return Handed::pair_changed;
    detach(tenant, request_id);
    return handed();
}

CopyOutcome Copies::place(const std::string& tenant,
                          const std::set<std::string, std::less<>>& holding,
                          std::set<std::string> unwanted, std::string_view request_id,
                          Placing how) {
    CopyOutcome out;
    out.asked = true;
    // The best node, then the next when it did not take it, up to `how.tries` of them.
    for (size_t attempt = 0; attempt < how.tries; ++attempt) {
        auto maps = router_.directory().maps();
        auto t = maps->tenants.find(tenant);
        if (t == maps->tenants.end()) {
            out.unreplicated = "it is no longer in the directory";
            return out;
        }
        DirectoryMaps candidates = *maps;
        for (const std::string& n : unwanted) candidates.nodes.erase(n);
        std::erase_if(candidates.nodes, [&](const auto& n) { return router_.failed_over(n.first); });
        auto v = place_replica(candidates, t->second, holding);
        if (const auto* none = std::get_if<NoReplica>(&v)) {
            if (attempt == 0) out.unreplicated = none->why;
            break;
        }
        const ReplicaPlace& p = std::get<ReplicaPlace>(v);
        const NodeRow& node = maps->nodes.at(p.node);
        Attached a = attach(t->second, node, true, request_id);
        if (a.ok) {
            if (p.same_zone) {
                log_line("the replica of `" + tenant + "` is on `" + p.node + "`, in the zone `" +
                         node.zone + "` of its node `" + t->second.node +
                         "`: no node of its region in another zone could keep it");
            }
            out.node = p.node;
            out.same_zone = p.same_zone;
            out.unreplicated.clear();
            return out;
        }
        log_line("`" + tenant + "` got no replica on `" + p.node + "`: " + a.why);
        out.unreplicated = "node `" + p.node + "` did not take it: " + a.why;
        out.refused = true;
        unwanted.insert(p.node);
    }
    remember(tenant, out.unreplicated);
    if (out.refused && how.schedule) {
        schedule_silent(tenant);
        log_line("`" + tenant + "` is looked at again in 10 s for a replica");
    }
    return out;
}

CopyOutcome Copies::created(const std::string& tenant, std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end()) return {};
    if (const std::string* s = maps->standby_of(t->second.node)) {
        CopyOutcome out;
        out.asked = true;
        auto standby = maps->nodes.find(*s);
        Attached a = standby == maps->nodes.end()
                         ? Attached{false, "its standby `" + *s + "` is not in the directory"}
                         : attach(t->second, standby->second, false, request_id);
        if (a.ok) {
            out.node = *s;
            out.same_zone = same_zone(*maps, t->second.node, *s);
        } else {
            out.unreplicated = "its node's standby `" + *s + "` did not take it: " + a.why;
            out.refused = true;
            log_line("`" + tenant + "` has no copy: " + out.unreplicated);
            remember(tenant, out.unreplicated);
        }
        return out;
    }
    if (!router_.options().replicas) return {};
    return place(tenant, {}, {}, request_id);
}

void Copies::deleted(const TenantRow& tenant, const DirectoryMaps& before,
                     std::string_view request_id) {
    // Its own replica and its node's standby both: on a paired node a tenant can have either, or
    // both for a moment while the standby takes over from the replica.
    std::set<std::string> copies;
    if (auto r = before.replicas.find(tenant.name); r != before.replicas.end()) {
        copies.insert(r->second);
    }
    if (const std::string* s = before.standby_of(tenant.node)) copies.insert(*s);
    for (const std::string& copy : copies) {
        auto n = before.nodes.find(copy);
        if (n == before.nodes.end()) continue;
        NodeAnswer a = calls().remove(n->second, tenant.name, request_id);
        if (!a.gone()) {
            log_line("deleted `" + tenant.name + "`, but not its copy on `" + copy + "` (" +
                     a.said(n->second) + ")");
        }
    }
    forget(tenant.name);
    quotas_.forget(tenant.name);
}

void Copies::left(const TenantRow& tenant, const DirectoryMaps& before,
                  std::string_view request_id) {
    deleted(tenant, before, request_id);
    if (!before.replicas.contains(tenant.name)) return;
    if (engine::Status st = router_.directory().remove_replica(tenant.name); !st.is_ok()) {
        log_line("the replica record of `" + tenant.name + "` was not cleared: " + st.to_string());
    }
}

void Copies::before_move(const std::string& tenant, const std::string& to,
                         std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto r = maps->replicas.find(tenant);
    // A node holds one copy of a tenant: the replica there goes before the image comes.
    if (r != maps->replicas.end() && r->second == to) detach(tenant, request_id);
}

CopyOutcome Copies::moved(const std::string& tenant, const std::string& from,
                          std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end()) return {};
    const TenantRow row = t->second;
    // Step 8: pairs. The source's standby follows a node that no longer has the tenant.
    if (const std::string* s = maps->standby_of(from)) {
        if (auto n = maps->nodes.find(*s); n != maps->nodes.end()) {
            NodeAnswer a = calls().remove(n->second, tenant, request_id);
            if (!a.gone()) {
                log_line("moved `" + tenant + "` off `" + from + "`, but its copy on the standby `" +
                         *s + "` was not deleted (" + a.said(n->second) + ")");
            }
        }
    }
    if (maps->standby_of(row.node)) {
        detach(tenant, request_id);  // the target's standby is its copy now
        CopyOutcome out = created(tenant, request_id);
        if (!out.unreplicated.empty()) {
            log_line("moved `" + tenant + "` to `" + row.node + "`: " + out.unreplicated +
                     "; left for the repair");
        }
        return out;
    }
    // Step 9: its own replica goes with it where it still fits, in no worse a zone class than
    // the best free node, which is when the ranking, told it holds a copy, picks it first. The
    // ranking takes the target's region only: a replica in the region a move left is taken off
    // (a failover would carry the tenant back out of its new region) and placed again.
    auto r = maps->replicas.find(tenant);
    if (r != maps->replicas.end()) {
        const std::string replica = r->second;
        DirectoryMaps candidates = *maps;
        candidates.nodes.erase(from);
        std::erase_if(candidates.nodes, [&](const auto& n) { return router_.failed_over(n.first); });
        auto v = place_replica(candidates, row, {replica});
        const auto* p = std::get_if<ReplicaPlace>(&v);
        if (p && p->node == replica) {
            Attached a = attach(row, maps->nodes.at(replica), true, request_id);
            if (a.ok) return {true, replica, p->same_zone, ""};
            log_line("moved `" + tenant + "`, but its replica on `" + replica +
                     "` did not follow it: " + a.why);
        }
        detach(tenant, request_id);
        return place(tenant, {}, {from}, request_id);
    }
    if (!router_.options().replicas) return {};
    return place(tenant, {}, {from}, request_id);
}

CopyOutcome Copies::after_source_removed(const std::string& tenant, const CopyOutcome& copy,
                                         std::string_view request_id) {
    if (!router_.options().replicas || !copy.asked || !copy.node.empty() || copy.refused) {
        return copy;
    }
    CopyOutcome again = place(tenant, {}, {}, request_id);
    if (again.node.empty() && !again.refused) return copy;  // still no node: step 9's reason
    if (!again.node.empty()) forget(tenant);
    return again;
}

std::vector<std::string> Copies::copied_by_pair(const std::string& node,
                                                const std::string& standby) const {
    std::vector<std::string> out;
    const auto maps = router_.directory().maps();
    if (!maps->nodes.contains(standby)) return out;
    for (const TenantRow& t : tenants_on(*maps, node)) {
        // One the standby never took (its reason remembered) has nothing there to keep.
        if (maps->copy_of(t) == standby && !maps->replicas.contains(t.name) && !failed(t.name)) {
            out.push_back(t.name);
        }
    }
    return out;
}

Copies::Follows Copies::follows_primary(const TenantRow& t, const NodeRow& primary,
                                        const NodeRow& copy, std::string_view request_id) {
    const DescribeReply c = calls().describe(copy, t.name, request_id);
    if (!c.read) return Follows::silent;
    return c.found && c.following == url_of(primary) &&
                   (t.lineage.empty() || c.lineage == t.lineage)
               ? Follows::yes
               : Follows::no;
}

Copies::Follows Copies::check_kept_copy(const TenantRow& t, const std::string& old_standby,
                                        bool keep_silent, std::string_view request_id) {
    const auto maps = router_.directory().maps();
    const auto r = maps->replicas.find(t.name);
    if (r == maps->replicas.end() || r->second != old_standby) return Follows::yes;  // none kept
    const auto primary = maps->nodes.find(t.node);
    const auto old = maps->nodes.find(old_standby);
    if (primary == maps->nodes.end() || old == maps->nodes.end()) return Follows::yes;
    const Follows f = follows_primary(t, primary->second, old->second, request_id);
    if (f == Follows::yes || (f == Follows::silent && keep_silent)) return f;
    log_line("`" + t.name + "` keeps no copy on its old standby `" + old_standby + "`: " +
             (f == Follows::no ? "it holds none following the primary"
                               : "it did not answer whether it holds one"));
    (void)router_.directory().remove_replica(t.name);
    return f;
}

std::vector<std::string> Copies::paired(const std::string& node, const std::string& standby,
                                        const std::string& old_standby,
                                        const std::vector<std::string>& kept,
                                        std::string_view request_id) {
    std::vector<std::string> unreplicated;
    auto maps = router_.directory().maps();
    auto s = maps->nodes.find(standby);
    auto old = maps->nodes.find(old_standby);
    for (const TenantRow& listed : tenants_on(*maps, node)) {
        test_hooks::stall_pair_tenant(listed.name);
        TenantClaim held(router_, listed.name, "pair");
        // Read again once claimed: an operation before the claim may have moved or deleted it,
        // and its old row would have the standby follow a copy that is gone and the tenant's
        // replica, re-pointed by the move, detached.
        const auto now = router_.directory().maps();
        const auto row = now->tenants.find(listed.name);
        if (held.held && (row == now->tenants.end() || row->second.node != node)) continue;
        const TenantRow& t = held.held ? row->second : listed;
        // A copy kept on the old standby with the pair (copied_by_pair) that the old standby
        // says does not follow the primary (it never took it) is no copy: its row goes, and the
        // new standby is its copy from the start. A silent old standby's stays until then.
        if (held.held && std::ranges::find(kept, t.name) != kept.end()) {
            check_kept_copy(t, old_standby, true, request_id);
        }
        Attached a =
            !held.held
                ? Attached{false, "another operation holds it (" + router_.held_by(t.name) + ")"}
            : s == maps->nodes.end() ? Attached{false, "not in the directory"}
                                     : attach(t, s->second, false, request_id);
        if (!a.ok) {
            const std::string why = "the standby `" + standby + "` did not take it: " + a.why;
            unreplicated.push_back(t.name);  // §8.1: the standby's failures, listed
            // Its own replica, where it has one (a row kept on the old standby too), stays its
            // copy (DirectoryMaps::copy_of) until a second call of the pair has the standby take
            // it.
            const auto rows = router_.directory().maps();
            if (auto r = rows->replicas.find(t.name); r != rows->replicas.end()) {
                log_line("`" + t.name + "` keeps its replica on `" + r->second + "`: " + why);
                continue;
            }
            if (!held.held) {
                // What the operation holding it leaves is that one's to say (a repair, say, that
                // finds the pair changed leaves the row kept here): no reason is remembered for
                // it, and a look has the standby the pair names then take it.
                look_after_pair_change(t.name, "another operation held it as its pair changed");
                continue;
            }
            log_line("`" + t.name + "` has no copy: " + why);
            remember(t.name, why);
            continue;
        }
        const auto rows = router_.directory().maps();
        const auto own = rows->replicas.find(t.name);
        const bool own_on_old = own != rows->replicas.end() && own->second == old_standby;
        std::string why;
        const Handed h = handed_to_standby(t.name, standby, request_id, why);
        if (h == Handed::pair_changed) {
            // The later change may have passed it by while this one held it: a look attaches
            // the standby the pair names then.
            look_after_pair_change(t.name, why);
            continue;
        }
        if (h == Handed::behind) {
            // Its own replica stays its copy (DirectoryMaps::copy_of) until a repair hands it
            // over; the standby follows it meanwhile.
            look_again(t.name, standby, why);
            continue;
        }
        // A replica on the old standby was deleted as it was handed over (detach).
        if (old != maps->nodes.end() && old_standby != standby && !own_on_old) {
            (void)calls().remove(old->second, t.name, request_id);
        }
    }
    return unreplicated;
}

std::vector<std::string> Copies::unpaired(const std::string& node, const std::string& old_standby,
                                          const std::vector<std::string>& kept,
                                          std::string_view request_id) {
    std::vector<std::string> unreplicated;
    auto maps = router_.directory().maps();
    auto old = maps->nodes.find(old_standby);
    for (const TenantRow& t : tenants_on(*maps, node)) {
        TenantClaim held(router_, t.name, "pair");
        if (held.held) {  // moved off or deleted before the claim: its copies went with it
            const auto now = router_.directory().maps();
            const auto row = now->tenants.find(t.name);
            if (row == now->tenants.end() || row->second.node != node) continue;
        }
        // Under --replicas the old standby's copies were recorded as replicas with the removal
        // (copied_by_pair): one the old standby does not say follows the primary (it is down,
        // or never took it) is placed afresh, as the pair's copies were before.
        bool old_silent = false;  // then no candidate for the replica placed below
        if (held.held && std::ranges::find(kept, t.name) != kept.end()) {
            const auto now = router_.directory().maps();
            if (const auto row = now->tenants.find(t.name); row != now->tenants.end()) {
                old_silent =
                    check_kept_copy(row->second, old_standby, false, request_id) == Follows::silent;
            }
        }
        // One the standby never took over keeps its own replica, following it still; where that
        // replica is on the old standby, the copy there stays as its replica.
        const auto rows = router_.directory().maps();
        const auto own = rows->replicas.find(t.name);
        const bool kept_there = own != rows->replicas.end() && own->second == old_standby;
        if (old != maps->nodes.end() && !kept_there) {
            NodeAnswer a = calls().remove(old->second, t.name, request_id);
            if (!a.gone()) {
                log_line("the pair of `" + node + "` is removed, but the copy of `" + t.name +
                         "` on `" + old_standby + "` was not deleted (" + a.said(old->second) +
                         ")");
            }
            old_silent = !a.gone();  // it answered the delete: a candidate like any node
        }
        if (!router_.options().replicas) continue;
        if (own != rows->replicas.end()) continue;
        if (!held.held) {
            remember(t.name, "another operation held it as its pair was removed");
            unreplicated.push_back(t.name);
            continue;
        }
        // Not placed back on an old standby that did not answer: a node that answers first.
        std::set<std::string> unwanted;
        if (old_silent) unwanted.insert(old_standby);
        CopyOutcome out = place(t.name, {}, unwanted, request_id);
        if (out.node.empty()) unreplicated.push_back(t.name);
    }
    return unreplicated;
}

std::vector<std::string> Copies::node_removed(const DirectoryMaps& before, const std::string& node,
                                              std::string_view request_id) {
    std::vector<std::string> out;
    for (const auto& [name, t] : before.tenants) {
        if (before.copy_of(t) != node) continue;
        remember(name, "its copy's node `" + node + "` was removed from the directory");
        out.push_back(name);
    }
    // Its copies there go too: no row names them now, and each would stream from its primary
    // for ever, the primary's writes waiting on it while it keeps up (a black-box pass found them
    // following after the DELETE). The node is asked once what it holds, so a dead one costs one
    // --upstream-timeout, not one a tenant; one that does not answer keeps its files, which a
    // repair deletes once the node is registered again (drop_unrecorded). Only a copy that
    // follows the tenant's primary as the directory had it is deleted.
    const auto removed = before.nodes.find(node);
    if (out.empty() || removed == before.nodes.end()) return out;
    // Only where the primary answers and holds the tenant as a primary of its lineage: with the
    // primary down, or its file gone, the copy here may be the only data left. Under the tenant's
    // claim, the maps and both nodes read again just before (a failover promoting the tenant onto
    // this node meanwhile makes it the tenant's primary).
    const SurveyReply held = calls().tenants(removed->second, true, request_id);
    if (held.status != 200) return out;
    for (const std::string& name : out) {
        const CopyInfo* c = held.find(name);
        if (!c || !c->following) continue;
        TenantClaim claim(router_, name, "node removal");
        if (!claim.held) continue;
        const auto now = router_.directory().maps();
        const auto t = now->tenants.find(name);
        if (t == now->tenants.end() || t->second.node == node) continue;
        const auto primary = now->nodes.find(t->second.node);
        if (primary == now->nodes.end()) continue;
        const DescribeReply p = calls().describe(primary->second, name, request_id);
        if (!p.read || !p.found || !p.following.empty() ||
            (!t->second.lineage.empty() && p.lineage != t->second.lineage)) {
            continue;
        }
        if (follows_primary(t->second, primary->second, removed->second, request_id) !=
            Follows::yes) {
            continue;
        }
        if (calls().remove(removed->second, name, request_id).ok()) {
            log_line("deleted the copy of `" + name + "` on `" + node +
                     "`, removed from the directory");
        }
    }
    return out;
}

std::optional<std::string> Copies::failed(const std::string& tenant) const {
    std::lock_guard lock(why_mu_);
    auto it = why_.find(tenant);
    return it == why_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::optional<std::string> Copies::unreplicated(const DirectoryMaps& maps,
                                                const TenantRow& tenant) const {
    if (std::optional<std::string> why = failed(tenant.name)) return why;
    if (!maps.copy_of(tenant).empty()) return std::nullopt;
    if (!router_.options().replicas) return std::nullopt;  // none was wanted
    auto v = place_replica(maps, tenant);
    if (const auto* none = std::get_if<NoReplica>(&v)) return none->why;
    return std::string("it has no copy yet: a repair (POST /_shard/replicas) gives it one");
}

void Copies::publish_gauges(const DirectoryMaps& maps) {
    std::map<std::string, double> held, unreplicated, same;
    for (const auto& [name, n] : maps.nodes) {
        held[name] = 0;
        unreplicated[n.region] = 0;
        same[n.region] = 0;
    }
    std::set<std::string> failed;
    {
        std::lock_guard lock(why_mu_);
        for (const auto& [t, why] : why_) failed.insert(t);
    }
    for (const auto& [name, t] : maps.tenants) {
        if (home_region(t.node)) continue;  // `@<r>`: its copies are its region's router's (§11.3)
        auto n = maps.nodes.find(t.node);
        const std::string region = n == maps.nodes.end() ? "" : n->second.region;
        const std::string copy = maps.copy_of(t);
        if (copy.empty() || failed.contains(name)) {
            unreplicated[region] += 1;
            continue;
        }
        held[copy] += 1;
        if (same_zone(maps, t.node, copy)) same[region] += 1;
    }
    for (const auto& [node, v] : held) replicas_gauge_->with({node}).set(v);
    for (const auto& [region, v] : unreplicated) unreplicated_gauge_->with({region}).set(v);
    for (const auto& [region, v] : same) same_zone_gauge_->with({region}).set(v);
}

// --- The worker ---------------------------------------------------------------------------

void Copies::start() {
    std::lock_guard lock(mu_);
    if (worker_.joinable() || stopping_) return;
    worker_ = std::thread([this] { work(); });
}

void Copies::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        halt_ = true;
        jobs_.clear();
        queued_.clear();
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
}

bool Copies::post(std::string key, std::function<void()> job) {
    {
        std::lock_guard lock(mu_);
        if (stopping_ || router_.is_superseded()) return false;
        if (queued_.contains(key)) return true;  // the one waiting does it
        if (jobs_.size() >= copies_queue_max) {
            log_line("the copies' worker has " + std::to_string(copies_queue_max) + " jobs waiting: `" +
                     key + "` is dropped");
            return false;
        }
        queued_.insert(key);
        jobs_.emplace_back(std::move(key), std::move(job));
    }
    wake_.notify_one();
    return true;
}

void Copies::work() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
        if (router_.is_superseded()) {
            // Leads nothing (Router::superseded): what is queued is the promoted router's to do.
            jobs_.clear();
            queued_.clear();
            wake_.wait(lock, [&] { return stopping_; });
            continue;
        }
        if (!jobs_.empty()) {
            auto [key, job] = std::move(jobs_.front());
            jobs_.pop_front();
            queued_.erase(key);
            lock.unlock();
            job();
            lock.lock();
            continue;
        }
        const int64_t now = static_cast<int64_t>(router_.now_ms());
        std::vector<std::string> due = schedule_.due(now);
        if (!due.empty()) {
            // A tenant whose primary was silent is scheduled only where a copy was wanted
            // (repair.cc): placed when seen. One looked at again for its pair's hand-over
            // (schedule_look) is owed a standby, not a replica: one of its own is placed only
            // under --replicas.
            Scope silent, handover;
            silent.tenants.emplace();
            silent.asked = true;
            handover.tenants.emplace();
            handover.asked = router_.options().replicas;
            for (const std::string& t : due) {
                (catch_up_looks_.contains(t) ? *handover.tenants : *silent.tenants).insert(t);
            }
            lock.unlock();
            for (const Scope* scope : {&silent, &handover}) {
                if (scope->tenants->empty()) continue;
                log_repair(
                    "the scheduled look at " + std::to_string(scope->tenants->size()) + " tenants",
                    run_repair(*scope, router_.new_request_id(std::nullopt)), false);
            }
            lock.lock();
            continue;
        }
        if (auto next = schedule_.next_ms()) {
            wake_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(1, *next - now)));
        } else {
            wake_.wait(lock);
        }
    }
}

void Copies::repair(std::string reason, std::optional<std::string> region) {
    const std::string key = "repair " + (region ? "region `" + *region + "`" : "everywhere");
    post(key, [this, reason = std::move(reason), region] {
        log_line("a repair " + (region ? "of region `" + *region + "`" : "of every region") + " (" +
                 reason + ")");
        Scope scope;
        scope.region = region;
        log_repair("the repair (" + reason + ")",
                   run_repair(scope, router_.new_request_id(std::nullopt)), false);
    });
}

RepairReport Copies::repair_now(const std::optional<std::string>& region,
                                std::string_view request_id) {
    Scope scope;
    scope.region = region;
    scope.asked = true;
    RepairReport r = run_repair(scope, request_id);
    log_repair("the repair asked for " + (region ? "region `" + *region + "`" : "every region"), r,
               true);
    return r;
}

void Copies::log_repair(const std::string& what, const RepairReport& r, bool asked) {
    if (!asked && r.replicated.empty() && r.failed.empty() && r.unreplicated.empty() &&
        r.dropped.empty()) {
        return;
    }
    // Names at most this many tenants of each list; the answer (or the gauges) has the rest.
    constexpr size_t named_max = 5;
    auto some = [&](const auto& list, auto name_of) {
        std::string out;
        for (size_t i = 0; i < list.size() && i < named_max; ++i) {
            out += (i == 0 ? " (" : ", ") + name_of(list[i]);
        }
        if (list.size() > named_max) out += ", …";
        return list.empty() ? out : out + ")";
    };
    const auto tenant = [](const auto& x) { return "`" + x.tenant + "`"; };
    const auto placed = [](const RepairReport::Placed& p) {
        return "`" + p.tenant + "` on `" + p.replica + "`";
    };
    log_line(what + ": " + std::to_string(r.replicated.size()) + " copies attached" +
             some(r.replicated, placed) + ", " + std::to_string(r.failed.size()) + " failed" +
             some(r.failed, tenant) + ", " + std::to_string(r.unreplicated.size()) +
             " left without one" + some(r.unreplicated, tenant) + ", " +
             std::to_string(r.dropped.size()) + " unrecorded copies deleted" +
             some(r.dropped, [](const RepairReport::Dropped& d) {
                 return "`" + d.tenant + "` on `" + d.node + "`";
             }));
}

void Copies::node_answered(const std::string& node) {
    if (thaws_owed_by(node)) {
        post("thaws owed by " + node, [this, node] { thaw_owed(node); });
    }
    if (!quotas_.owed_by(node)) return;
    post("quotas owed by " + node,
         [this, node] { quotas_.resend(node, router_.new_request_id(std::nullopt)); });
}

void Copies::owe_thaw(const OwedThaw& thaw) {
    std::lock_guard lock(thaws_mu_);
    thaws_owed_[thaw.node][thaw.tenant].insert(thaw.freeze_id);
}

std::vector<OwedThaw> Copies::owed_thaws() {
    std::map<std::string, std::set<std::string>> by_node;  // node → tenants
    for (const auto& [node, tenants] : router_.directory().maps()->thaws) {
        for (const auto& [tenant, ids] : tenants) by_node[node].insert(tenant);
    }
    {
        std::lock_guard lock(thaws_mu_);
        for (const auto& [node, tenants] : thaws_owed_) {
            for (const auto& [tenant, ids] : tenants) by_node[node].insert(tenant);
        }
    }
    std::vector<OwedThaw> out;
    for (const auto& [node, tenants] : by_node) {
        for (const std::string& tenant : tenants) out.push_back({node, tenant, ""});
    }
    return out;
}

bool Copies::thaws_owed_by(const std::string& node) {
    if (router_.directory().maps()->thaws.contains(node)) return true;
    std::lock_guard lock(thaws_mu_);
    return thaws_owed_.contains(node);
}

void Copies::thaw_owed(const std::string& node) {
    // What the directory records, with what it could not (owe_thaw).
    std::map<std::string, std::set<std::string>> owed;
    if (auto maps = router_.directory().maps(); maps->thaws.contains(node)) {
        owed = maps->thaws.find(node)->second;
    }
    {
        std::lock_guard lock(thaws_mu_);
        if (auto it = thaws_owed_.find(node); it != thaws_owed_.end()) {
            for (const auto& [tenant, ids] : it->second)
                owed[tenant].insert(ids.begin(), ids.end());
        }
    }
    for (const auto& [tenant, ids] : owed) {
        if (router_.is_superseded()) return;  // leads nothing: a newer router's copy, maybe
        TenantClaim held(router_, tenant, repair_claim);
        if (!held.held) continue;  // an operation on it: asked again at the node's next answer
        // Asked wherever the tenant is placed now: failed over meanwhile, the copy the late freeze
        // froze is an old primary the repair may make its replica, promoted again later. The
        // freeze id has the node thaw only that freeze (a later move's stays), and a copy it
        // no longer holds answers 404.
        auto maps = router_.directory().maps();
        auto n = maps->nodes.find(node);
        auto t = maps->tenants.find(tenant);
        // Moving or importing now: asked again once that is over. Placed in another region (a
        // release, its copy here frozen until the drop) or deleted: not sent.
        if (t != maps->tenants.end() && t->second.state != "active") continue;
        const bool here = t != maps->tenants.end() && !home_region(t->second.node);
        for (const std::string& id : ids) {
            // No freeze id (a stopped move's whose row was marked before rows named theirs): a
            // thaw that would undo any freeze, sent only while the tenant is placed on that node.
            // Elsewhere, its copy there may be one a later move left frozen and unrouted.
            std::string outcome = n == maps->nodes.end()
                                      ? "not sent: the node is not in the directory"
                                  : !here ? "not sent: the tenant is not in this directory now"
                                  : id.empty() && t->second.node != node
                                      ? "not sent: the tenant is on `" + t->second.node +
                                            "` now, and the thaw names no freeze"
                                      : "";
            if (outcome.empty()) {
                const std::string request_id = router_.new_request_id(std::nullopt);
                std::vector<http::Header> headers;
                if (!id.empty()) headers.push_back({"Fenec-Freeze-Id", id});
                server::CallResult w = router_.upstream().admin(
                    n->second, {.method = "POST",
                                .target = "/_admin/tenants/" + tenant + "/thaw",
                                .request_id = request_id,
                                .resendable = true,
                                .headers = std::move(headers)});
                // Paid by a 200 (thawed, or another freeze holds it) or a 404 (no copy there).
                // Unanswered, a failure of the node's own, or a refusal that may pass (a token
                // this router lacks, another authority's lease): owed still.
                if (!w.answer || (w.answer->status != 200 && w.answer->status != 404)) continue;
                outcome = w.answer->status != 200
                              ? "answered " + std::to_string(w.answer->status) + ": " +
                                    node_answers::error_of(w.answer->body)
                          : w.answer->body.find("\"frozen\":false") != std::string::npos
                              ? "thawed"
                              : "left frozen: a later freeze holds it";
            }
            {
                std::lock_guard lock(thaws_mu_);
                auto it = thaws_owed_.find(node);
                if (it != thaws_owed_.end()) {
                    auto tt = it->second.find(tenant);
                    if (tt != it->second.end()) {
                        tt->second.erase(id);
                        if (tt->second.empty()) it->second.erase(tt);
                    }
                    if (it->second.empty()) thaws_owed_.erase(it);
                }
            }
            const OwedThaw paid{node, tenant, id};
            if (auto on = maps->thaws.find(node); on != maps->thaws.end() &&
                                                  on->second.contains(tenant) &&
                                                  on->second.find(tenant)->second.contains(id)) {
                // Not forgotten: asked again at the node's next answer, and answered alike.
                if (engine::Status st = router_.directory().paid_thaw(paid); !st.is_ok()) {
                    outcome += "; not yet forgotten: " + st.to_string();
                }
            }
            log_line("`" + tenant + "`: the thaw its undone move owed `" + node + "`: " + outcome);
        }
    }
}

// --- GET /_shard/pairs ---------------------------------------------------------------------

http::Response serve_pairs(Router& router, const server::Request& request) {
    if (auto r = method_refusal(request.head)) return std::move(*r);
    auto maps = router.directory().maps();
    http::Response r;
    json::Writer w(r.body);
    w.begin_array();
    for (const auto& [node, standby] : maps->pairs) {
        w.begin_object();
        w.key("node");
        w.string(node);
        w.key("standby");
        w.string(standby);
        w.end_object();
    }
    w.end_array();
    return r;
}

}  // namespace fenec::shard
