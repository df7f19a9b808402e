// shard/handoff.cc: a region's half of a move across regions (shard/handoff.h; router.md §11.7):
// the relay-only steps on the region's router, each claimed, written to the directory synced,
// and answered as JSON (the export answers the image itself); the timer that lapses an export
// nothing followed; and the settling of imports left `importing`. The node calls go through
// Upstream::admin and shard/node_calls.h; an image is installed on a node over a connection of
// the blocking client's own.
//
// Test hooks (fenec-shard-hooks only, shard/test_hooks.h): FENEC_TEST_HANDOFF_FAIL=<step> has the
// step named (import, release, drop, activate) refused 500 before it changes anything (the
// settling of `importing` rows activates through no hook), and an export fail once frozen (undone
// by the region itself); FENEC_TEST_SETTLE_MS=<ms> settles `importing` rows every `ms`;
// FENEC_TEST_MOVE_STALL=exported:<ms> holds an export `ms` once its image is taken, the tenant
// frozen; import-recorded:<ms> an import `ms` once its row is recorded, before its image is
// installed; import-installed:<ms> once the image is too, before its replica is made and it is
// answered; and imported:<ms> once all are done.
#include "shard/handoff.h"

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "json/writer.h"
#include "server/runtime/client.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/global_copy.h"
#include "shard/leases.h"
#include "shard/log_line.h"
#include "shard/move.h"
#include "shard/move_image.h"
#include "shard/node_calls.h"
#include "shard/placement.h"
#include "shard/relay.h"
#include "shard/standby.h"
#include "shard/test_hooks.h"
#include "shard/two_level.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

// Issue 20: the state of a target's row between its import and its activation.
constexpr std::string_view importing_state = "importing";
// What an import's settling names its claim (held_by answers it).
constexpr std::string_view settle_claim = "settle";

std::string path_of(const std::string& tenant) { return "/_admin/tenants/" + tenant; }

// `tenant`'s copy on `node` thawed (POST …/thaw).
server::CallResult thaw_on(Router& router, const NodeRow& node, const std::string& tenant) {
    return router.upstream().admin(node, {.method = "POST",
                                          .target = path_of(tenant) + "/thaw",
                                          .request_id = router.new_request_id(std::nullopt),
                                          .resendable = true});
}

// What a node call not answered 200 says: the node's status and error, or why it got none.
std::string refusal_text(const NodeRow& node, const server::CallResult& c, std::string_view step) {
    if (!c.answer) return c.error.message;
    return who(node) + " answered " + std::to_string(c.answer->status) + " to the " +
           std::string(step) + ": " + node_error(c.answer->body);
}

Response ok_json(const std::initializer_list<std::pair<std::string_view, std::string>>& kv) {
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    for (const auto& [k, v] : kv) {
        w.key(k);
        w.string(v);
    }
    w.end_object();
    return r;
}

// The copy an import installed deleted with its copies, and its row removed, the caller holding
// the tenant's claim: 204, or why not.
Response remove_import(Router& router, const std::string& tenant, const std::string& request_id) {
    auto maps = router.directory().maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end()) {
        return Router::error(
            404, "tenant `" + tenant + "` is not in region `" + maps->scope + "`'s directory");
    }
    if (auto n = maps->nodes.find(t->second.node); n != maps->nodes.end()) {
        NodeAnswer del = router.node_calls().remove(n->second, tenant, request_id);
        if (!del.gone()) return Router::error(502, del.said(n->second));
    }
    router.copies().deleted(t->second, *maps, request_id);
    if (engine::Status st = router.directory().remove_tenant(tenant); !st.is_ok()) {
        return Router::error(500,
                             "the directory could not forget `" + tenant + "`: " + st.to_string());
    }
    router.handoffs().forget_import(tenant);
    router.cluster().changed(t->second.node);
    Response r;
    r.status = 204;
    r.content_type = "";
    return r;
}

std::string header_of(const server::Answer& a, std::string_view name) {
    auto v = a.header(name);
    return v ? std::string(*v) : std::string();
}

// `released` (a row placing `tenant` in another region) as it was on the node of this region
// whose list has the tenant's primary copy frozen: every copy here is a leftover (an import back
// would have made the row `importing`, which a drop refuses), and the export's is the frozen
// primary. None where no node that answered lists one.
std::optional<TenantRow> frozen_source(Router& router, const DirectoryMaps& maps,
                                       const TenantRow& released, const std::string& tenant,
                                       const std::string& request_id, bool& every_node_said) {
    every_node_said = true;
    for (const auto& [name, node] : maps.nodes) {
        const SurveyReply listed = router.node_calls().tenants(node, false, request_id);
        if (listed.status != 200) every_node_said = false;
        const CopyInfo* c = listed.find(tenant);
        if (!c || c->role != "primary" || !c->frozen) continue;
        TenantRow before = released;
        before.node = name;
        return before;
    }
    return std::nullopt;
}

}  // namespace

std::optional<Response> drop_leftover(Router& router, const DirectoryMaps& maps,
                                      const TenantRow& released, const std::string& tenant,
                                      const std::string& request_id, bool& removed,
                                      bool copy_first) {
    // The row as it was on the source node: noted at the release, or, where this router restarted
    // since and kept no note, found as the region's nodes list the copy the export froze.
    std::optional<TenantRow> source;
    bool every_node_said = true;
    if (std::optional<Handoffs::Entry> e = router.handoffs().find(tenant);
        e && e->state == Handoffs::Entry::State::released) {
        source = e->before;
    } else {
        source = frozen_source(router, maps, released, tenant, request_id, every_node_said);
    }
    removed = false;
    auto kept = [&](const std::string& why) {
        Response r = Router::error(503, "the row `" + released.node + "` a move out of `" + tenant +
                                            "` left here is kept: " + why);
        r.header("Retry-After", "1");
        return r;
    };
    if (copy_first && !source && !every_node_said) {
        return kept("a node that did not answer may hold its frozen copy");
    }
    if (source) {
        if (auto n = maps.nodes.find(source->node); n != maps.nodes.end()) {
            const NodeRow* node = &n->second;
            NodeAnswer del = router.node_calls().remove(*node, tenant, request_id);
            removed = del.gone();
            if (!removed && copy_first) {
                return kept("its frozen copy on `" + node->name + "` was not deleted (" +
                            del.said(*node) + ")");
            }
            if (!removed) {
                log_line("handoff of `" + tenant + "`: the source copy on `" + node->name +
                         "` was not deleted (" + del.said(*node) +
                         "); it stays frozen and unrouted");
            }
        }
        router.copies().deleted(*source, maps, request_id);
    } else {
        log_line("handoff of `" + tenant +
                 "`: dropped without its source node (this router restarted since the "
                 "release), and none of this region's nodes that answered lists a frozen copy "
                 "of it");
    }
    if (engine::Status st = router.directory().remove_tenant(tenant); !st.is_ok()) {
        return Router::error(500,
                             "the directory could not forget `" + tenant + "`: " + st.to_string());
    }
    router.handoffs().forget(tenant);
    return std::nullopt;
}

namespace {

class Step {
  public:
    Step(Router& router, const server::Request& request, const Router::Answering& a,
         std::string tenant)
        : router_(router), request_(request), a_(a), tenant_(std::move(tenant)) {}

    Response export_image();
    Response undo_export();
    Response import_image();
    Response delete_import();
    Response release();
    Response undo_release();
    Response drop();
    Response activate();
    Response home();

  private:
    std::optional<Response> drop_released(const DirectoryMaps& maps, const TenantRow& released,
                                          bool& removed) {
        return drop_leftover(router_, maps, released, tenant_, a_.request_id, removed, false);
    }
    Handoffs& handoffs() { return router_.handoffs(); }
    // `{"to":"@<region>"}`: the region named, another than this router's; or the refusal.
    std::optional<Response> read_to(std::string& to);
    server::CallResult admin(const NodeRow& node, std::string_view method, std::string target) {
        return router_.upstream().admin(node, {.method = method,
                                               .target = std::move(target),
                                               .request_id = a_.request_id,
                                               .resendable = true});
    }
    // Whether the node answered the thaw 200. Not answered, the copy may still be frozen: the
    // row is left `moving`, which the settling thaws again each round (Handoffs::settle_moving).
    bool thaw(const NodeRow& node) {
        const server::CallResult r = admin(node, "POST", path_of(tenant_) + "/thaw");
        return r.answer && r.answer->status == 200;
    }
    std::optional<NodeRow> node_of(const TenantRow& row) {
        auto maps = router_.directory().maps();
        auto n = maps->nodes.find(row.node);
        if (n == maps->nodes.end()) return std::nullopt;
        return n->second;
    }
    // The export undone before it was answered: thawed, the row put back, the claim released.
    Response undone(const TenantRow& before, const NodeRow& node, MoveFailure f);
    Response busy() {
        const std::string what = router_.held_by(tenant_);
        return Router::error(409, "another operation on `" + tenant_ + "` is in progress: " + what,
                             {{"held_by", what}});
    }
    Response hooked(std::string_view step) {
        return Router::error(500, "the test hook failed the handoff's " + std::string(step) +
                                      " step of `" + tenant_ + "`");
    }

    Router& router_;
    const server::Request& request_;
    const Router::Answering& a_;
    const std::string tenant_;
};

std::optional<Response> Step::read_to(std::string& to) {
    const HandoffTo got = parse_handoff_to(request_.body);
    if (!got.error.empty()) return Router::error(400, got.error);
    if (got.region == router_.directory().maps()->scope) {
        return Router::error(409, "`@" + got.region + "` is this router's own region");
    }
    to = "@" + got.region;
    return std::nullopt;
}

Response Step::undone(const TenantRow& before, const NodeRow& node, MoveFailure f) {
    if (!thaw(node)) {
        log_line("handoff of `" + tenant_ + "`: the export failed and `" + node.name +
                 "` did not answer its thaw: left moving; the thaw is asked again each settling "
                 "round");
    } else if (engine::Status st = router_.directory().put_tenant(before); !st.is_ok()) {
        log_line("handoff of `" + tenant_ +
                 "`: the export failed and the directory could not put it back to active: " +
                 st.to_string() + "; it is thawed at the next start");
    }
    router_.release(tenant_);
    return Router::error(f.status, f.message, {{"step", f.step}});
}

// Step 1: claim; `moving` to `@<r>`, synced; frozen; the image answered whole.
Response Step::export_image() {
    std::string to;
    if (auto refused = read_to(to)) return *refused;
    if (!router_.claim_after(tenant_, "handoff", {repair_claim}, repair_claim_wait_ms)) {
        return busy();
    }
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant_);
    auto refuse = [&](int status, std::string message) {
        router_.release(tenant_);
        return Router::error(status, std::move(message));
    };
    if (t == maps->tenants.end()) {
        return refuse(
            404, "tenant `" + tenant_ + "` is not in region `" + maps->scope + "`'s directory");
    }
    const TenantRow before = t->second;
    if (home_region(before.node) || before.state != "active") {
        return refuse(409, "tenant `" + tenant_ + "` is " + before.state + " on `" + before.node +
                               "`: only a tenant active on a node of this region is exported");
    }
    auto n = maps->nodes.find(before.node);
    if (n == maps->nodes.end()) {
        return refuse(409, "tenant `" + tenant_ + "` is on node `" + before.node +
                               "`, which is not in the directory");
    }
    const NodeRow node = n->second;
    TenantRow moving = before;
    moving.state = "moving";
    moving.moving_to = to;
    if (engine::Status st = router_.directory().put_tenant(moving); !st.is_ok()) {
        return refuse(500,
                      "the directory could not mark `" + tenant_ + "` moving: " + st.to_string());
    }
    // The row `moving` sent to the standby routers before the copy freezes: one promoted later
    // thaws a copy its row says is moving (the settling), and would leave one it reads `active`
    // frozen, refusing every write.
    router_.standby().wait_for_standbys(standby_wait_ms_max);
    auto taken = freeze_and_take_image(router_, node, tenant_, a_.request_id);
    if (MoveFailure* f = std::get_if<MoveFailure>(&taken)) return undone(before, node, *f);
    Response r = std::move(std::get<Response>(taken));
    test_hooks::stall_after_move_step("exported");  // frozen, the image taken
    handoffs().exported(before, to, router_.now_ms() + 2 * router_.options().upstream_timeout_ms);
    return r;  // the claim stays held: release, undo-export or the lapse ends it
}

Response Step::undo_export() {
    using State = Handoffs::Entry::State;
    // `released_to` tells a global router that lost the release's answer that it ran.
    auto released = [&](const std::string& to) {
        return Router::error(
            409,
            "tenant `" + tenant_ + "` was released to `" + to + "`: undo that with undo-release",
            {{"released_to", to}});
    };
    auto releasing = [&] {
        Response r = Router::error(503, "the release of `" + tenant_ +
                                            "` is being written: it is neither undone nor done");
        r.header("Retry-After", "1");
        return r;
    };
    std::optional<Handoffs::Entry> e = handoffs().find(tenant_);
    if (e && e->state == State::released) return released(e->to);
    if (e && e->state == State::releasing) return releasing();
    Response ok;
    auto answer = [&](std::string_view how) {
        json::Writer w(ok.body);
        w.begin_object();
        w.key("tenant");
        w.string(tenant_);
        w.key("undone");
        w.string(how);
        w.end_object();
        return ok;
    };
    if (e && e->state == Handoffs::Entry::State::lapsed) {
        handoffs().forget(tenant_);
        return answer("lapsed");  // thawed already, by the timer
    }
    if (!e) {
        // Nothing exported here that this process knows of (a restart thawed it, or it never
        // was): a row left `moving` to another region is put back all the same. A row placing
        // the tenant in another region was released there before the restart.
        auto maps = router_.directory().maps();
        auto t = maps->tenants.find(tenant_);
        if (t != maps->tenants.end() && home_region(t->second.node)) {
            return released(t->second.node);
        }
        if (t == maps->tenants.end() || t->second.state != "moving" ||
            !home_region(t->second.moving_to)) {
            return answer("nothing");
        }
        if (!router_.claim_after(tenant_, "handoff", {repair_claim}, repair_claim_wait_ms)) {
            return busy();
        }
        // Read again under the claim: a repair waited for may have learnt its lineage.
        maps = router_.directory().maps();
        t = maps->tenants.find(tenant_);
        if (t == maps->tenants.end() || t->second.state != "moving" ||
            !home_region(t->second.moving_to)) {
            router_.release(tenant_);
            return answer("nothing");
        }
        TenantRow back = t->second;
        back.state = "active";
        back.moving_to.clear();
        if (auto node = node_of(back); node && !thaw(*node)) {
            router_.release(tenant_);  // left `moving`: the settling thaws it
            return answer("thawing");
        }
        engine::Status st = router_.directory().put_tenant(back);
        router_.release(tenant_);
        if (!st.is_ok()) return Router::error(500, "the directory: " + st.to_string());
        return answer("thawed");
    }
    if (!handoffs().set(tenant_, State::exported, State::lapsed)) {
        // Moved on since it was read: a release began or ended, or the timer's lapse came.
        e = handoffs().find(tenant_);
        if (e && e->state == State::released) return released(e->to);
        // Releasing, or back to exported (its release's row not written): ask again.
        if (e && (e->state == State::releasing || e->state == State::exported)) {
            return releasing();
        }
        return answer("lapsed");
    }
    if (auto node = node_of(e->before); node && !thaw(*node)) {
        handoffs().forget(tenant_);
        router_.release(tenant_);  // left `moving`: the settling thaws it
        return answer("thawing");
    }
    engine::Status st = router_.directory().put_tenant(e->before);
    handoffs().forget(tenant_);
    router_.release(tenant_);
    if (!st.is_ok()) {
        return Router::error(500, "tenant `" + tenant_ +
                                      "` was thawed, but the directory could "
                                      "not mark it active: " +
                                      st.to_string());
    }
    return answer("thawed");
}

// The image in the request installed on `node` (its PUT …/file, the Fenec-* headers sent back
// for it to check); a 409 (a stale copy an interrupted attempt left) deletes that copy and asks
// once more.
// Step 2: placed, recorded `importing` (no lease names it until activate), installed,
// replicated.
Response Step::import_image() {
    const http::RequestHead& h = request_.head;
    for (std::string_view name : {"Fenec-Seq", "Fenec-Lineage", "Fenec-Image-Digest"}) {
        if (!h.header(name) || h.header(name)->empty()) {
            return Router::error(400,
                                 "an import needs the image's `" + std::string(name) + "` header");
        }
    }
    if (request_.body.empty()) return Router::error(400, "an import needs the image as its body");
    if (test_hooks::fail_handoff_step("import")) return hooked("import");
    AskedClaim claim(router_, tenant_, "handoff");
    if (!claim.held) return busy();
    auto maps = router_.directory().maps();
    // A row `@<r>` is a move out of this region whose drop never came (its global router
    // stopped, or a settling activated the import there): no move of it runs (the global
    // router's claim would hold this one off), so what it left goes, once the import is placed.
    std::optional<TenantRow> leftover;
    if (auto t = maps->tenants.find(tenant_); t != maps->tenants.end()) {
        if (!home_region(t->second.node)) {
            return Router::error(409, "tenant `" + tenant_ + "` is in region `" + maps->scope +
                                          "`'s directory already, on `" + t->second.node + "`");
        }
        leftover = t->second;
    }
    const NodeRow* node = nullptr;
    if (const std::string* named = h.query_value("node")) {
        auto n = maps->nodes.find(*named);
        if (n == maps->nodes.end()) {
            // This router keeps every node of its region: one not here is not in it, so the move's
            // node and region disagree (409, as a create's), whether or not the node is another's.
            return Router::error(
                409, "node `" + std::string(*named) + "` is not in region `" + maps->scope + "`");
        }
        if (maps->is_standby(n->first)) {
            return Router::error(409, "node `" + n->first + "` is a standby in a pair");
        }
        node = &n->second;
    } else {
        auto placed = place_tenant(*maps, std::nullopt, {}, [&](const NodeRow& n) {
            return router_.placement_bytes(n, a_.request_id);
        });
        if (const NodeRow* const* p = std::get_if<const NodeRow*>(&placed)) {
            node = *p;
        } else {
            const bool none = std::get<NoTenantPlace>(placed) == NoTenantPlace::none_answered;
            Response r = Router::error(none ? 503 : 409, "no node of region `" + maps->scope +
                                                             "` to take `" + tenant_ + "`");
            if (none) r.header("Retry-After", "1");
            return r;
        }
    }
    if (leftover) {
        bool removed = false;
        if (std::optional<Response> refused = drop_released(*maps, *leftover, removed)) {
            return *refused;
        }
        log_line("handoff of `" + tenant_ + "`: the row `" + leftover->node +
                 "` a move out left here dropped before its import" +
                 (removed ? ", its frozen copy deleted" : ""));
    }
    const std::string seq(*h.header("Fenec-Seq"));
    const std::string lineage(*h.header("Fenec-Lineage"));
    TenantRow row;
    row.name = tenant_;
    row.node = node->name;
    row.state = importing_state;  // no grant names it until activate (issue 20)
    row.lineage = lineage;
    // The row before the copy, synced: a router stopped once the image is installed leaves a
    // row `importing` that the global router's delete-import, or the settling, deletes with its
    // copy. A copy with no row would stay frozen on the node, known to no directory.
    std::optional<InstallingMark> installing(std::in_place, handoffs(), tenant_);
    if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
        return Router::error(500,
                             "the directory could not record `" + tenant_ + "`: " + st.to_string());
    }
    test_hooks::stall_after_move_step("import-recorded");  // the row, not yet the copy
    if (auto refused =
            install_image(router_, *node, tenant_, a_.request_id,
                          {*h.header("Fenec-Image-Digest"), seq, lineage}, request_.body)) {
        not_installed(router_, *node, tenant_, a_.request_id, std::nullopt);
        return *refused;
    }
    installing.reset();
    test_hooks::stall_after_move_step("import-installed");  // the row and the copy, not answered
    handoffs().imported(tenant_, router_.now_ms());
    test_hooks::stall_after_move_step("imported");  // recorded, not yet activated
    const CopyOutcome copy = router_.copies().created(tenant_, a_.request_id);
    Response r;
    r.status = 201;
    r.body = import_answer(tenant_, *node, seq, copy);
    return r;
}

// Step 2 undone: the copy and its copies deleted, the row removed.
Response Step::delete_import() {
    AskedClaim claim(router_, tenant_, "handoff");
    if (!claim.held) return busy();
    return remove_import(router_, tenant_, a_.request_id);
}

// After the global router's step 4 (issue 20): `importing` → `active`, its node granted at once.
Response Step::activate() {
    if (test_hooks::fail_handoff_step("activate")) return hooked("activate");
    // A settle of the same import in progress (it may be activating it this moment) is waited
    // for rather than refused: the global router would hear 409 and answer its move
    // `"activated": false` though the row turned active.
    TenantClaim claim(router_, tenant_, "handoff", {settle_claim, repair_claim},
                      router_.options().upstream_timeout_ms / 2);
    if (!claim.held) return busy();
    return activate_import(router_, tenant_);
}

// Step 3: the row `@<r>`, placed nowhere here; the node granted without it; the copy stays.
Response Step::release() {
    std::string to;
    if (auto refused = read_to(to)) return *refused;
    if (test_hooks::fail_handoff_step("release")) return hooked("release");
    using State = Handoffs::Entry::State;
    std::optional<Handoffs::Entry> e = handoffs().find(tenant_);
    if (!e || e->to != to) {
        return Router::error(409, "tenant `" + tenant_ + "` was not exported to `" + to + "`");
    }
    // `releasing` while its row is written: an undo-export meanwhile neither undoes the export
    // nor says it was released (503), since the write may yet fail.
    const bool again = e->state == State::released;  // a release asked again: its answer again
    // Past its deadline the export is lapsed, whether or not the timer has run yet (a settling
    // pass on its thread may hold it): a release now would be of a copy about to be thawed.
    if (e->state == State::exported && router_.now_ms() >= e->deadline_ms) {
        return Router::error(409, "the export of `" + tenant_ +
                                      "` lapsed: it is thawed where it is, and the copy its "
                                      "target took is stale");
    }
    if (!again && !handoffs().set(tenant_, State::exported, State::releasing)) {
        if (auto now = handoffs().find(tenant_); now && now->state == State::releasing) {
            Response r = Router::error(503, "a release of `" + tenant_ + "` is writing its row");
            r.header("Retry-After", "1");
            return r;
        }
        return Router::error(409, "the export of `" + tenant_ +
                                      "` lapsed: it was thawed where "
                                      "it is, and the copy its target took is stale");
    }
    if (!again) {
        test_hooks::stall_after_move_step("releasing");  // releasing, its row not yet written
        TenantRow gone = e->before;
        gone.node = to;
        gone.state = "active";
        gone.moving_to.clear();
        if (engine::Status st = router_.directory().put_tenant(gone); !st.is_ok()) {
            (void)handoffs().set(tenant_, State::releasing, State::exported);
            return Router::error(500, "the directory could not let `" + tenant_ +
                                          "` go: " + st.to_string());
        }
        (void)handoffs().set(tenant_, State::releasing, State::released);
        router_.cluster().changed(e->before.node);
        router_.release(tenant_);
    }
    // Answered only once every standby router keeping up was sent the release (at most its
    // bound), as a move's flip is (§7.2 step 10): one promoted here after the answer would read
    // the row `moving` on its node, and its settling would thaw it beside the target's import.
    router_.standby().wait_for_standbys(standby_wait_ms_max);
    test_hooks::stall_after_move_step("released");  // released, not yet answered
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("node");
    w.string(to);
    w.key("frozen_on");
    w.string(e->before.node);
    w.end_object();
    return r;
}

// Step 3 undone: the row back on its node, thawed, the node granted.
Response Step::undo_release() {
    std::optional<Handoffs::Entry> e = handoffs().find(tenant_);
    if (!e || e->state != Handoffs::Entry::State::released) {
        return Router::error(409, "tenant `" + tenant_ + "` was not released here");
    }
    AskedClaim claim(router_, tenant_, "handoff");
    if (!claim.held) return busy();
    // Thawed first: a row put back `active` over a copy still frozen would refuse every write
    // for good. Not thawed, the row reads `moving` back to its node, which the settling thaws.
    TenantRow back = e->before;
    if (auto node = node_of(e->before); node && !thaw(*node)) {
        back.state = "moving";
        back.moving_to = e->to;
    }
    if (engine::Status st = router_.directory().put_tenant(back); !st.is_ok()) {
        return Router::error(500, "the directory could not put `" + tenant_ + "` back on `" +
                                      e->before.node + "`: " + st.to_string());
    }
    router_.cluster().changed(e->before.node);
    handoffs().forget(tenant_);
    // As the release: a standby promoted after the answer, its row still released, would say so
    // to the target region's router, which activates the import beside the copy thawed here.
    router_.standby().wait_for_standbys(standby_wait_ms_max);
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("node");
    w.string(e->before.node);
    w.end_object();
    return r;
}

// On the global router, asked by a target region's router whose settling activated an import
// released to it while the global router had stopped before its home statement (step 4): the
// home `@<to>` written once both regions say so, each asked of its primary (the source that it
// released the tenant to `<to>`, the target that it holds it active on a node of its own), then
// the source asked to drop what it kept (step 6). The tenant claimed throughout.
Response Step::home() {
    if (test_hooks::fail_handoff_step("home-statement")) return hooked("home-statement");
    std::string to;
    if (auto refused = read_to(to)) return *refused;
    AskedClaim claim(router_, tenant_, "handoff");
    if (!claim.held) return busy();
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant_);
    if (t == maps->tenants.end()) {
        return Router::error(404, "tenant `" + tenant_ + "` is not in the global directory");
    }
    const TenantRow row = t->second;
    if (row.node == to) return ok_json({{"tenant", tenant_}, {"node", to}});  // stated already
    const std::optional<std::string_view> from = home_region(row.node);
    auto from_routers = from ? maps->regions.find(*from) : maps->regions.end();
    auto to_routers = maps->regions.find(to.substr(1));
    if (from_routers == maps->regions.end() || to_routers == maps->regions.end() ||
        row.state != "active") {
        return Router::error(409, "tenant `" + tenant_ + "` is " + row.state + " at `" + row.node +
                                      "`, not at home in a region keeping its own directory "
                                      "that could have released it to `" + to + "`");
    }
    const std::string client = peer_host(router_.options().listen);
    const RelayTo source{std::string(*from), from_routers->second};
    const RelayTo target{to.substr(1), to_routers->second};
    const TenantWord released = ask_tenant(router_.relays(), source, tenant_, client, a_.request_id);
    const TenantWord held = ask_tenant(router_.relays(), target, tenant_, client, a_.request_id);
    if (!released.said || released.node != to || !held.said || held.node.starts_with('@') ||
        held.state != "active") {
        auto said = [](const TenantWord& w) {
            return w.said ? "`" + w.node + "` (" + w.state + ")" : std::string("nothing");
        };
        return Router::error(409, "the home of `" + tenant_ + "` stays `" + row.node +
                                      "`: region `" + source.scope + "` says " + said(released) +
                                      ", region `" + target.scope + "` says " + said(held));
    }
    TenantRow home = row;
    home.node = to;
    if (engine::Status st = router_.directory().put_tenant(home); !st.is_ok()) {
        return Router::error(500, "the directory could not move the home of `" + tenant_ +
                                      "`: " + st.to_string());
    }
    log_line("the home of `" + tenant_ + "` is `" + to + "`, as regions `" + source.scope +
             "` and `" + target.scope + "` say (a settling's home statement)");
    drop_source(router_, source, tenant_, {client, a_.request_id});
    return ok_json({{"tenant", tenant_}, {"node", to}});
}

// Step 5: the frozen source copy and its copies deleted, the row removed.
Response Step::drop() {
    if (test_hooks::fail_handoff_step("drop")) return hooked("drop");
    AskedClaim claim(router_, tenant_, "handoff");
    if (!claim.held) return busy();
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant_);
    if (t == maps->tenants.end() || !home_region(t->second.node)) {
        return Router::error(409, "tenant `" + tenant_ + "` was not released here");
    }
    bool removed = false;
    if (std::optional<Response> refused = drop_released(*maps, t->second, removed)) {
        return *refused;
    }
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("source_removed");
    w.boolean(removed);
    w.end_object();
    return r;
}

}  // namespace

std::string released_to(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view to;
    if (parser.parse(body.data(), body.size()).get(doc) || doc["released_to"].get_string().get(to))
        return "";
    return std::string(to);
}

HandoffTo parse_handoff_to(std::string_view body) {
    HandoffTo out;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object obj;
    if (parser.parse(body.data(), body.size()).get(doc) || doc.get_object().get(obj)) {
        out.error = "the body must be a JSON object {\"to\":\"@<region>\"}";
        return out;
    }
    std::string to;
    for (auto field : obj) {
        if (field.key != "to") {
            out.error = "unknown field `" + std::string(field.key) + "`: a handoff takes to";
            return out;
        }
        std::string_view s;
        if (field.value.get_string().get(s)) {
            out.error = "field `to` must be a string, \"@<region>\"";
            return out;
        }
        to = std::string(s);
    }
    const std::optional<std::string_view> region = home_region(to);
    if (!region || region->empty() || !valid_name(*region)) {
        out.error = "field `to` must name the region the tenant goes to, \"@<region>\"";
        return out;
    }
    out.region = std::string(*region);
    return out;
}

std::optional<HandoffStep> handoff_step(std::string_view name) {
    if (name == "export") return HandoffStep::export_image;
    if (name == "undo-export") return HandoffStep::undo_export;
    if (name == "import") return HandoffStep::import_image;
    if (name == "release") return HandoffStep::release;
    if (name == "undo-release") return HandoffStep::undo_release;
    if (name == "drop") return HandoffStep::drop;
    if (name == "activate") return HandoffStep::activate;
    if (name == "home") return HandoffStep::home;
    return std::nullopt;
}

Handoffs::Handoffs(Router& router) : router_(router), thread_([this] { run(); }) {}

Handoffs::~Handoffs() { stop(); }

void Handoffs::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Handoffs::exported(const TenantRow& before, const std::string& to, uint64_t deadline_ms) {
    {
        std::lock_guard lock(mu_);
        entries_[before.name] = Entry{before, to, deadline_ms, Entry::State::exported};
    }
    wake_.notify_all();
}

std::optional<Handoffs::Entry> Handoffs::find(const std::string& tenant) const {
    std::lock_guard lock(mu_);
    auto it = entries_.find(tenant);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
}

bool Handoffs::set(const std::string& tenant, Entry::State from, Entry::State to) {
    {
        std::lock_guard lock(mu_);
        auto it = entries_.find(tenant);
        if (it == entries_.end() || it->second.state != from) return false;
        it->second.state = to;
    }
    // An entry back to `exported` (a release whose write failed) may be past its deadline: the
    // timer, which passes over the other states, looks again.
    if (to == Entry::State::exported) wake_.notify_all();
    return true;
}

void Handoffs::forget(const std::string& tenant) {
    std::lock_guard lock(mu_);
    entries_.erase(tenant);
}

void Handoffs::imported(const std::string& tenant, uint64_t now_ms) {
    std::lock_guard lock(mu_);
    imports_[tenant] = now_ms;
}

void Handoffs::forget_import(const std::string& tenant) {
    std::lock_guard lock(mu_);
    imports_.erase(tenant);
}

void Handoffs::installing(const std::string& tenant, bool on) {
    std::lock_guard lock(mu_);
    if (on) {
        installing_.insert(tenant);
    } else {
        installing_.erase(tenant);
    }
}

bool Handoffs::installing(const std::string& tenant) const {
    std::lock_guard lock(mu_);
    return installing_.contains(tenant);
}

InstallingMark::InstallingMark(Handoffs& handoffs, std::string tenant)
    : handoffs_(handoffs), tenant_(std::move(tenant)) {
    handoffs_.installing(tenant_, true);
}

InstallingMark::~InstallingMark() { handoffs_.installing(tenant_, false); }

void Handoffs::start_settling(int64_t period_ms) {
    {
        std::lock_guard lock(mu_);
        settle_period_ms_ = std::max<int64_t>(period_ms, 1);
        settle_next_ms_ = 0;  // once now
    }
    wake_.notify_all();
}

void Handoffs::settle_imports() {
    // Its primary's to settle, or the router's promoted over it.
    if (router_.standby().following() || router_.is_superseded()) return;
    const GlobalCopy* copy = router_.global_copy();
    if (!copy || !copy->ready()) return;  // no home to read yet
    std::vector<std::string> left;
    for (const auto& [name, t] : router_.directory().maps()->tenants) {
        if (t.state == importing_state) left.push_back(name);
    }
    for (const std::string& tenant : left) settle_import(tenant);
    // A tenant active here whose home in the global directory is still another region: a
    // settling activated its import while the global router had stopped before its home
    // statement, and the statement asked for then was not made (the global router out of reach
    // or busy). Asked again each pass: the row and the global directory are the memory of what
    // is owed, so a restart of either router loses none of it. A copy of the global directory
    // lagging a statement made asks once for nothing (200, stated already). No claim is taken
    // here: the global router decides from both regions' primaries, not from this row, so no
    // operation on the tenant here waits on the ask.
    if (!copy->refused().empty()) return;  // a copy of another directory: nothing to compare
    const std::string here = "@" + router_.directory().maps()->scope;
    std::vector<std::pair<std::string, std::string>> owed;  // tenant, the home's region
    {
        const auto maps = router_.directory().maps();
        const auto global = copy->maps();
        for (const auto& [name, t] : maps->tenants) {
            if (t.state != "active" || t.node.empty() || t.node.starts_with('@')) continue;
            const auto g = global->tenants.find(name);
            if (g == global->tenants.end() || g->second.state != "active") continue;
            const std::optional<std::string_view> home = home_region(g->second.node);
            if (home && g->second.node != here) owed.emplace_back(name, std::string(*home));
        }
    }
    // One ask not answered (the global router out of reach, or slow on a source it cannot
    // reach) ends the pass rather than cost a timeout a tenant; each pass starts one further
    // along, so a tenant the global router cannot settle holds up no other for good.
    const size_t n = owed.size();
    const size_t from = n ? sweep_from_++ % n : 0;
    for (size_t i = 0; i < n; ++i) {
        const auto& [tenant, home] = owed[(from + i) % n];
        if (!ask_home(tenant, home)) break;
    }
}

// The global router asked to state `tenant`'s home as this region, where it still names `from`
// (shard/handoff.cc's Step::home, which states it only once both regions say so); logged. False
// when no router of the global directory answered.
bool Handoffs::ask_home(const std::string& tenant, std::string_view from) {
    const std::string here = "@" + router_.directory().maps()->scope;
    const Relayed h = router_.relays().relay(
        RelayTo{"global", global_urls(router_.options().global.value_or(""))},
        {.method = "POST",
         .target = "/_shard/handoff/" + tenant + "/home",
         .body = "{\"to\":\"" + here + "\"}",
         .client = peer_host(router_.options().listen),
         .request_id = router_.new_request_id(std::nullopt)});
    log_line("`" + tenant + "`, active here, is at home `@" + std::string(from) +
             "` in the global directory: the global router " +
             (h.answered && h.status == 200
                  ? "stated its home `" + here + "`"
                  : "did not state its home (" +
                        (h.answered ? std::to_string(h.status) + " " + node_error(h.body) : h.why) +
                        "); asked again at the next settling"));
    return h.answered;
}

void Handoffs::settle_moving() {
    // Its primary's to settle, or the router's promoted over it.
    if (router_.standby().following() || router_.is_superseded()) return;
    settle_moves_left(router_);  // moves within this directory a promotion left for their target
    std::vector<std::string> left;
    for (const auto& [name, t] : router_.directory().maps()->tenants) {
        if (t.state == "moving" && home_region(t.moving_to)) left.push_back(name);
    }
    // Each pass starts one further along: one whose node stays silent ends a pass (below), and
    // must not hold up those after it for good.
    if (!left.empty()) {
        std::rotate(left.begin(),
                    left.begin() + static_cast<std::ptrdiff_t>(moving_from_++ % left.size()),
                    left.end());
    }
    for (const std::string& tenant : left) {
        // An export in flight here settles itself; a lapsed one's entry stays only to refuse a
        // late release, and its row is this settling's.
        auto in_flight = [&] {
            const std::optional<Entry> e = find(tenant);
            return e && e->state != Entry::State::lapsed;
        };
        if (in_flight()) continue;
        TenantClaim claim(router_, tenant, settle_claim);
        if (!claim.held) continue;  // an operation on it: looked at again next round
        const auto maps = router_.directory().maps();
        const auto t = maps->tenants.find(tenant);
        if (t == maps->tenants.end() || t->second.state != "moving" || in_flight()) continue;
        settle_move(router_, tenant, t->second, MoveRows::own);  // thawed, its row put back
        // Its node did not answer the thaw: the pass ends here rather than wait out a timeout a
        // tenant on this thread, which also lapses exports (Handoffs::run).
        const auto now = router_.directory().maps();
        const auto after = now->tenants.find(tenant);
        if (after != now->tenants.end() && after->second.state == "moving") return;
    }
}

// One row `importing` (shard/handoff.h's settling): activated where its home is here, or where
// the source says it released it here; deleted where, long unactivated, the source still places
// it on a node of its own, or the global directory has it no more.
void Handoffs::settle_import(const std::string& tenant) {
    const uint64_t now = router_.now_ms();
    uint64_t since = now;
    {
        std::lock_guard lock(mu_);
        since = imports_.try_emplace(tenant, now).first->second;
    }
    TenantClaim claim(router_, tenant, settle_claim);
    if (!claim.held) return;  // an import, activate or delete in progress settles it itself
    test_hooks::stall_first_settle(tenant);
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end() || t->second.state != importing_state) return;
    const std::string here = "@" + maps->scope;
    auto global = router_.global_copy()->maps();
    auto g = global->tenants.find(tenant);
    auto activate = [&](const std::string& why) {
        const Response r = activate_import(router_, tenant);
        log_line("the import of `" + tenant + "` settled: " + why +
                 (r.status == 200 ? "; activated"
                                  : "; not activated (" + std::to_string(r.status) + " " +
                                        node_error(r.body) + ")"));
    };
    if (g != global->tenants.end() && g->second.node == here) {
        return activate("its home in the global directory is this region");
    }
    if (now - since < 2 * router_.options().upstream_timeout_ms) return;  // a move may be on it
    std::string why = "the global directory has it no more";
    if (g != global->tenants.end()) {
        // The source is the region its home names, or, for a home on a node of the global
        // directory's own (a move out of a region the global router keeps itself), the global
        // router. Asked, not read from the copy of the global directory, which may lag a home
        // statement.
        const std::optional<std::string_view> home = home_region(g->second.node);
        std::optional<RelayTo> source;
        if (home) {
            if (auto routers = global->regions.find(*home); routers != global->regions.end()) {
                source = RelayTo{std::string(*home), routers->second};
            }
        } else if (!g->second.node.empty()) {
            source = RelayTo{"global", global_urls(router_.options().global.value_or(""))};
        }
        if (!source || source->routers.empty()) {
            log_line("the import of `" + tenant + "` is left importing: its home `" +
                     g->second.node + "` is no region keeping its own directory");
            return;
        }
        const std::string named =
            home ? "region `" + source->scope + "`" : std::string("the global router");
        // A standby's copy may lag its primary's by the release itself: only a primary says.
        const std::string client = peer_host(router_.options().listen);
        const TenantWord word = ask_tenant(router_.relays(), *source, tenant, client,
                                           router_.new_request_id(std::nullopt));
        const Relayed& r = word.relayed;
        if (!word.said) {
            log_line("the import of `" + tenant + "` is left importing: " + named +
                     " did not say where it is (" +
                     (r.answered ? std::to_string(r.status) : r.why) + ")");
            return;
        }
        const std::string& node = word.node;
        if (node == here) {
            // Released here and the home never moved (the global router stopped between): no
            // lease names it anywhere, and the relays already send its requests here.
            activate(named + " released it here");
            // The home is still `@<source>` (its global router stopped before stating it): the
            // pass's sweep below asks the global router to state it (settle_imports).
            return;
        }
        // Where the global router keeps it, only a row `active` says the move is over: `moving`
        // is a move of its own still running.
        const bool settled = home || word.state == "active";
        if (node.empty() || node.starts_with('@') || !settled) {
            log_line("the import of `" + tenant + "` is left importing: " + named + " has it at `" +
                     node + "`" + (settled ? "" : " (" + word.state + ")"));
            return;
        }
        why = named + " still places it on `" + node + "`";
    }
    const Response d = remove_import(router_, tenant, router_.new_request_id(std::nullopt));
    log_line("the import of `" + tenant + "` was never activated and " + why +
             (d.status == 204
                  ? ": deleted"
                  : ": not deleted (" + std::to_string(d.status) + " " + node_error(d.body) + ")"));
}

// The timer: an export still `exported` at its deadline lapses; imports are settled each period.
void Handoffs::run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
        const uint64_t now = router_.now_ms();
        std::optional<uint64_t> next;
        std::vector<std::pair<std::string, Entry>> due;
        for (auto& [name, e] : entries_) {
            if (e.state != Entry::State::exported) continue;
            if (e.deadline_ms <= now) {
                e.state = Entry::State::lapsed;
                due.emplace_back(name, e);
            } else if (!next || e.deadline_ms < *next) {
                next = e.deadline_ms;
            }
        }
        if (!due.empty()) {
            lock.unlock();
            // A router promoted over thaws nothing: the nodes would refuse it, and the export is
            // the promoted router's to settle (its settle_moving).
            if (!router_.is_superseded()) {
                for (const auto& [name, e] : due) lapse(name, e);
            }
            lock.lock();
            continue;
        }
        if (settle_period_ms_) {
            if (settle_next_ms_ <= now) {
                settle_next_ms_ = now + static_cast<uint64_t>(*settle_period_ms_);
                lock.unlock();
                settle_imports();
                settle_moving();
                lock.lock();
                continue;
            }
            if (!next || settle_next_ms_ < *next) next = settle_next_ms_;
        }
        if (next) {
            wake_.wait_for(lock, std::chrono::milliseconds(*next - now));
        } else {
            wake_.wait(lock);
        }
    }
}

// §11.7: nothing followed the export: the tenant thawed where it is, its row put back, the
// claim released. A release after this is refused (the entry stays, `lapsed`).
void Handoffs::lapse(const std::string& tenant, const Entry& e) {
    auto maps = router_.directory().maps();
    std::string thawed = "its node is not in the directory";
    bool ok = true;
    if (auto n = maps->nodes.find(e.before.node); n != maps->nodes.end()) {
        server::CallResult w = thaw_on(router_, n->second, tenant);
        ok = w.answer && w.answer->status == 200;
        thawed = !w.answer ? "the thaw did not reach it: " + w.error.message
                           : "thaw answered " + std::to_string(w.answer->status);
    }
    if (!ok) {  // left `moving`: the settling thaws it, then puts the row back
        router_.release(tenant);
        log_line("the export of `" + tenant + "` to `" + e.to +
                 "` heard neither release nor undo-export in time: " + thawed +
                 "; left moving, the thaw asked again each settling round");
        return;
    }
    engine::Status st = router_.directory().put_tenant(e.before);
    router_.release(tenant);
    log_line("the export of `" + tenant + "` to `" + e.to +
             "` heard neither release nor undo-export in time: " + thawed +
             (st.is_ok() ? "; active again" : "; the directory: " + st.to_string()));
}

std::optional<std::string> importing_refusal(const DirectoryMaps& maps, const std::string& tenant) {
    auto t = maps.tenants.find(tenant);
    if (t == maps.tenants.end() || t->second.state != importing_state) return std::nullopt;
    std::string body;
    json::Writer w(body);
    w.begin_object();
    w.key("error");
    w.string("tenant `" + tenant + "` is being moved into region `" + maps.scope +
             "`: its copy on `" + t->second.node +
             "` takes writes once the move has moved its home here; ask again");
    w.key("tenant");
    w.string(tenant);
    w.key("moving");
    w.string(importing_state);
    w.key("region");
    w.string(maps.scope);
    w.end_object();
    return body;
}

// The row `importing` made `active` (shard/handoff.h).
Response activate_import(Router& router, const std::string& tenant) {
    auto maps = router.directory().maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end()) {
        return Router::error(
            404, "tenant `" + tenant + "` is not in region `" + maps->scope + "`'s directory");
    }
    TenantRow row = t->second;
    if (row.state == "active" && maps->nodes.contains(row.node)) {
        return ok_json({{"tenant", tenant}, {"node", row.node}, {"state", row.state}});
    }
    if (row.state != importing_state) {
        return Router::error(409, "tenant `" + tenant + "` is " + row.state + " on `" + row.node +
                                      "`: only an imported tenant is activated");
    }
    // Thawed first (the import installed it frozen), so the row's `active` finds it taking
    // writes. The move is past its undo by now: the home has moved, or is about to.
    auto node = maps->nodes.find(row.node);
    if (node == maps->nodes.end()) {
        return Router::error(409, "tenant `" + tenant + "` is importing on `" + row.node +
                                      "`, which is not in this directory");
    }
    server::CallResult thawed = thaw_on(router, node->second, tenant);
    if (!thawed.answer || thawed.answer->status != 200) {
        return Router::error(thawed.answer ? node_status(thawed.answer->status) : 502,
                             "the import of `" + tenant + "` could not be thawed: " +
                                 refusal_text(node->second, thawed, "thaw"));
    }
    row.state = "active";
    row.moving_from.clear();
    if (engine::Status st = router.directory().put_tenant(row); !st.is_ok()) {
        return Router::error(
            500, "the directory could not mark `" + tenant + "` active: " + st.to_string());
    }
    router.handoffs().forget_import(tenant);
    // Leased at once: the home has moved here, so writes come. Waiting for the grant's answer
    // (bounded) lets the first of them land rather than be asked again.
    if (Leases* leases = router.cluster().leases()) {
        const auto bound = static_cast<int64_t>(std::min<uint64_t>(
            router.options().auto_failover_ms, router.options().upstream_timeout_ms));
        (void)leases->grant_and_wait(row.node, bound);
    } else {
        router.cluster().changed(row.node);
    }
    return ok_json({{"tenant", tenant}, {"node", row.node}, {"state", row.state}});
}

// An import's answer (shard/handoff.h).
std::string import_answer(const std::string& tenant, const NodeRow& node, std::string_view seq,
                          const CopyOutcome& copy) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("tenant");
    w.string(tenant);
    w.key("node");
    w.string(node.name);
    w.key("region");
    w.string(node.region);
    w.key("seq");
    w.string(seq);
    w.key("state");
    w.string(importing_state);
    write_copy(w, copy);
    w.end_object();
    return out;
}

// The node's part of an export (shard/handoff.h).
std::variant<Response, MoveFailure> freeze_and_take_image(Router& router, const NodeRow& node,
                                                          const std::string& tenant,
                                                          const std::string& request_id) {
    auto admin = [&](std::string_view method, std::string target) {
        return router.upstream().admin(node, {.method = method,
                                              .target = std::move(target),
                                              .request_id = request_id,
                                              .resendable = true});
    };
    // A call not answered 200: the move's failure at `step`.
    auto refused = [&](const server::CallResult& c, const char* step) {
        return MoveFailure{c.answer ? node_status(c.answer->status) : 502, step,
                           refusal_text(node, c, step)};
    };
    const std::string path = path_of(tenant);
    server::CallResult frozen = admin("POST", path + "/freeze");
    if (!frozen.answer || frozen.answer->status != 200) return refused(frozen, "freeze");
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t seq = 0;
    if (parser.parse(frozen.answer->body).get(doc) || doc["seq"].get_uint64().get(seq)) {
        return MoveFailure{502, "freeze", who(node) + " answered without its seq"};
    }
    server::CallResult image = admin("GET", path + "/file");
    if (!image.answer || image.answer->status != 200) return refused(image, "image");
    if (test_hooks::fail_handoff_step("export")) {  // as if the image had failed, frozen
        return MoveFailure{500, "image", "the test hook failed the export"};
    }
    const uint64_t bytes_max = router.options().max_body_mib << 20;
    if (image.answer->body.size() > bytes_max) {
        return MoveFailure{507, "image",
                           "the image of `" + tenant + "` is " +
                               std::to_string(image.answer->body.size()) +
                               " bytes, past --max-body: a router holds an export "
                               "whole, and a target could not take it"};
    }
    if (header_of(*image.answer, "Fenec-Seq") != std::to_string(seq)) {
        return MoveFailure{502, "image",
                           who(node) + " froze at seq " + std::to_string(seq) +
                               " but its image is at seq " + header_of(*image.answer, "Fenec-Seq")};
    }
    Response r;
    r.content_type = "application/octet-stream";
    for (std::string_view name :
         {"Fenec-Seq", "Fenec-History", "Fenec-Lineage", "Fenec-Image-Digest"}) {
        r.header(std::string(name), header_of(*image.answer, name));
    }
    r.header("Fenec-Node", node.name);
    r.body = std::move(image.answer->body);
    return r;
}

void not_installed(Router& router, const NodeRow& node, const std::string& tenant,
                   const std::string& request_id, const std::optional<TenantRow>& before) {
    // A refusal may follow an install the node made, or is still making (its answer lost or
    // late): the copy goes first. A node that refuses the delete (409: it is installing still)
    // is asked again for a few of its timeouts.
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(2 * router.options().upstream_timeout_ms);
    NodeAnswer del = router.node_calls().remove(node, tenant, request_id);
    while (del.answered && !del.gone() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        del = router.node_calls().remove(node, tenant, request_id);
    }
    router.handoffs().forget_import(tenant);
    if (del.answered && !del.gone()) {
        // Its copy may stay: the row does too, `importing`, for the settling, which deletes the
        // copy before it lets the row go.
        log_line("the import of `" + tenant + "` failed and `" + node.name +
                 "` refused to delete what it may have installed (" + del.said(node) +
                 "): its row is left importing for the settling");
        return;
    }
    // Not answered: the row goes all the same, or the tenant would wait on a node that may be
    // gone. A copy the node made stays frozen, named by no directory and no lease, until an
    // import there meets it (install_image deletes it then).
    const engine::Status st =
        before ? router.directory().put_tenant(*before) : router.directory().remove_tenant(tenant);
    if (!del.gone() || !st.is_ok()) {
        log_line("the import of `" + tenant + "` failed" +
                 (del.gone() ? std::string()
                             : "; its copy on `" + node.name +
                                   "`, if the node made one, may be "
                                   "left there (" +
                                   del.said(node) + ")") +
                 (st.is_ok()
                      ? std::string()
                      : "; its row is left importing for the settling (" + st.to_string() + ")"));
    }
}

// The node's part of an import (shard/handoff.h).
std::optional<Response> install_image(Router& router, const NodeRow& node,
                                      const std::string& tenant, const std::string& request_id,
                                      const ImageHeaders& image, std::string_view body) {
    const std::string file = path_of(tenant) + "/file";  // OutRequest holds views
    http::OutRequest put{.method = "PUT", .target = file};
    put.headers.push_back({"Fenec-Image-Digest", image.digest});
    put.headers.push_back({"Fenec-Seq", image.seq});
    put.headers.push_back({"Fenec-Lineage", image.lineage});
    // Frozen until activate: a node that takes no lease would otherwise take a write sent to it
    // straight, which an undo of the import would then discard (shard/handoff.h).
    put.headers.push_back({"Fenec-Frozen", "true"});
    put.headers.push_back({"Content-Type", "application/octet-stream"});
    put.body = body;
    put.close = true;
    const std::string bytes = admin_request(node, request_id, put, router.upstream().fence());
    // Ends at once should the node's lease lapse (Upstream::cut_calls); outlives `conn`.
    const std::shared_ptr<const server::Cancel> cut = router.upstream().node_cancel(node.name);
    for (bool again = false;; again = true) {
        server::CallError error;
        auto conn =
            router.upstream().blocking().connect(to_node(node), {.cancel = cut.get()}, error);
        http::ResponseHead head;
        std::string answer;
        if (!conn || !conn->send(bytes, error) || !conn->read_head(head, error) ||
            !conn->read_body(head.content_length.value_or(0), answer, error)) {
            return Router::error(502, router.upstream().said(error, node.name));
        }
        if (head.status == 409 && !again) {
            NodeAnswer del = router.node_calls().remove(node, tenant, request_id);
            if (del.gone()) continue;
        }
        if (head.status != 201 && head.status != 200) {
            return Router::error(node_status(head.status),
                                 who(node) + " answered " + std::to_string(head.status) +
                                     " to the install: " + node_error(answer));
        }
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        uint64_t s = 0;
        std::string_view l;
        if (parser.parse(answer).get(doc) || doc["seq"].get_uint64().get(s) ||
            doc["lineage"].get_string().get(l)) {
            return Router::error(502, who(node) + " answered the install without seq and lineage");
        }
        if (std::to_string(s) != image.seq || l != image.lineage) {
            (void)router.node_calls().remove(node, tenant, request_id);
            return Router::error(502, who(node) + " installed seq " + std::to_string(s) + " of " +
                                          std::string(l) + ", not the image sent");
        }
        return std::nullopt;
    }
}

http::Response serve_handoff(Router& router, const server::Request& request,
                             const Router::Answering& a, const std::string& tenant,
                             HandoffStep step) {
    if (relayed_for(request, a.request_id, router.options().token).empty()) {
        return Router::error(403,
                             "/_shard/handoff/ is the global router's, through a relay "
                             "(a valid Fenec-Relay mark): a move across regions is asked "
                             "of POST /_shard/tenants/<t>/move");
    }
    if (step == HandoffStep::home) {
        if (router.global_copy()) {
            return Router::error(409, "the home statement is the global router's: this router "
                                      "keeps a region's directory");
        }
        if (request.head.method != http::Method::post) {
            Response r = Router::error(405, request.head.path + " takes POST");
            r.header("Allow", "POST");
            return r;
        }
        return Step(router, request, a, tenant).home();
    }
    if (!router.global_copy()) {
        return Router::error(409,
                             "this router keeps no region's directory (no --region): a "
                             "handoff is a region's router's");
    }
    Step s(router, request, a, tenant);
    const http::Method m = request.head.method;
    const std::string_view want = step == HandoffStep::import_image ? "PUT or DELETE" : "POST";
    switch (step) {
        case HandoffStep::export_image:
            if (m == http::Method::post) return s.export_image();
            break;
        case HandoffStep::undo_export:
            if (m == http::Method::post) return s.undo_export();
            break;
        case HandoffStep::import_image:
            if (m == http::Method::put) return s.import_image();
            if (m == http::Method::del) return s.delete_import();
            break;
        case HandoffStep::release:
            if (m == http::Method::post) return s.release();
            break;
        case HandoffStep::undo_release:
            if (m == http::Method::post) return s.undo_release();
            break;
        case HandoffStep::drop:
            if (m == http::Method::post) return s.drop();
            break;
        case HandoffStep::activate:
            if (m == http::Method::post) return s.activate();
            break;
        case HandoffStep::home:
            break;  // served above
    }
    Response r = Router::error(405, request.head.path + " takes " + std::string(want));
    r.header("Allow", step == HandoffStep::import_image ? "PUT, DELETE" : "POST");
    return r;
}

}  // namespace fenec::shard
