// shard/move.cc: a tenant's move between two nodes of one directory (shard/move.h; router.md §7):
// the request and its checks, the steps in order (marked, frozen, the image, the flip, the
// source deleted), the rollback before the flip, the answer with its timings; and the settling of
// moves a stopped router left. The image's way from source to target is shard/move_image.cc's;
// freeze and thaw are calls of the admin plane (Upstream::admin), a tenant's delete and its quota
// go through shard/node_calls.h. The tenant's copies keep in step through shard/copies.h: its
// replica on the target detached first (step 1), the quota sent to the target before the flip
// (step 5), the pair's and the replica's copies moved after it (steps 8 and 9). Before the source
// goes, every standby router keeping up was sent the flip, at most a second (step 10,
// shard/standby.h).
//
// Test hook (fenec-shard-hooks only, shard/test_hooks.h): FENEC_TEST_MOVE_STALL=<step>:<ms> makes
// every move wait `ms` after the step named (`marked`, `frozen`, `installed`, `flipped`), so a
// test can write during the freeze or stop the router mid-move.
#include "shard/move.h"

#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "json/writer.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/global_copy.h"
#include "shard/log_line.h"
#include "shard/move_image.h"
#include "shard/node_calls.h"
#include "shard/placement.h"
#include "shard/relay.h"
#include "shard/router.h"
#include "shard/routes.h"
#include "shard/standby.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

// The move's test hook (shard/test_hooks.h): nothing in fenec-shard.
void stall_after(std::string_view step) { test_hooks::stall_after_move_step(step); }

double tenth(double ms) { return static_cast<double>(static_cast<int64_t>(ms * 10 + 0.5)) / 10; }

Response busy_answer(Router& router, const std::string& tenant) {
    const std::string what = router.held_by(tenant);
    Response r = Router::error(409, "another operation on `" + tenant + "` is in progress: " + what);
    r.body.pop_back();
    std::string tail;
    json::Writer w(tail);
    w.begin_object();
    w.key("held_by");
    w.string(what);
    w.end_object();
    r.body += "," + tail.substr(1);
    return r;
}

class Move {
  public:
    Move(Router& router, const Router::Answering& a, std::string tenant)
        : router_(router), a_(a), tenant_(std::move(tenant)) {}

    Response run(const server::Request& request);

  private:
    Response refuse(int status, std::string message) { return Router::error(status, message); }
    std::optional<Response> read_target(std::string_view body, std::string& to_name);
    std::optional<Response> check(const DirectoryMaps& maps, const std::string& to_name);
    std::optional<Response> pick_in_region(const DirectoryMaps& maps);
    // A refusal with `"region"` beside its error: the region the request must name or agree with.
    static Response with_region(Response r, const std::string& region) {
        r.body.pop_back();
        std::string tail;
        json::Writer w(tail);
        w.begin_object();
        w.key("region");
        w.string(region);
        w.end_object();
        r.body += "," + tail.substr(1);
        return r;
    }
    Response steps(const DirectoryMaps& maps);
    Response fail(const MoveFailure& f, bool counted = true);
    Response answer(const Copied& copied, bool removed, const CopyOutcome& copy, uint64_t ms);
    // A call of the admin plane to `node`, for this move's tenant; a freeze and its undo's thaw
    // under this attempt's own freeze id.
    server::CallResult admin(const NodeRow& node, std::string_view method, std::string target,
                             bool resendable, bool freeze_id = false) {
        AdminCall call{.method = method,
                       .target = std::move(target),
                       .request_id = a_.request_id,
                       .resendable = resendable};
        if (freeze_id) call.headers.push_back({"Fenec-Freeze-Id", freeze_id_});
        return router_.upstream().admin(node, call);
    }
    std::optional<MoveFailure> freeze(std::string& seq);
    bool remove_source();
    void roll_back(bool installed);
    void count(std::string_view outcome) {
        if (auto* m = router_.metrics().moves) m->with({outcome, "directory"}).inc();
    }

    Router& router_;
    const Router::Answering& a_;
    const std::string tenant_;
    std::optional<std::string> region_;  // the region the request named, if it named one
    TenantRow row_;     // as it was before the move
    NodeRow from_, to_;
    std::string path_;  // /_admin/tenants/<t>
    // Fenec-Freeze-Id (node-http.md): this attempt's own, not the client's X-Request-Id, which a
    // client may send again on a retry that must freeze.
    const std::string freeze_id_ = router_.new_request_id(std::nullopt);
    MoveSteps steps_;
    uint64_t standbys_ms_ = 0;  // step 10's wait for the standby routers
};

Response Move::fail(const MoveFailure& f, bool counted) {
    if (counted) {
        count("failed");
        // As a move done is said (steps), so the log shows why a tenant was frozen for a while.
        log_line("the move of `" + tenant_ + "` from `" + from_.name + "` to `" + to_.name +
                 "` failed at its step `" + f.step + "` (" + std::to_string(f.status) +
                 "): " + f.message);
    }
    Response r = Router::error(f.status, f.message);
    r.body.pop_back();
    std::string tail;
    json::Writer w(tail);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("step");
    w.string(f.step);
    w.key("from");
    w.string(from_.name);
    w.key("to");
    w.string(to_.name);
    w.end_object();
    r.body += "," + tail.substr(1);
    return r;
}

Response Move::run(const server::Request& request) {
    // §7.1: the body and the checks; a refusal here counts as no move.
    std::string to_name;
    if (auto refused = read_target(request.body, to_name)) return *refused;
    AskedClaim claim(router_, tenant_, "move");
    if (!claim.held) return busy_answer(router_, tenant_);
    auto maps = router_.directory().maps();
    if (auto refused = check(*maps, to_name)) return *refused;
    return steps(*maps);
}

// §7.1: `to`, `region` or both from the body ("" names the unnamed region); or the refusal.
std::optional<Response> Move::read_target(std::string_view text, std::string& to_name) {
    if (text.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        simdjson::dom::object obj;
        if (parser.parse(text.data(), text.size()).get(doc)) {
            return refuse(400, "the body is not JSON");
        }
        if (doc.get_object().get(obj)) return refuse(400, "the body is not a JSON object");
        for (auto field : obj) {
            if (field.key != "to" && field.key != "region") {
                return refuse(400, "unknown field `" + std::string(field.key) +
                                       "`: a move takes to and region");
            }
            if (field.value.is_null()) continue;
            std::string_view s;
            if (field.value.get_string().get(s)) {
                return refuse(400, "field `" + std::string(field.key) + "` must be a string");
            }
            if (field.key == "to") {
                to_name = std::string(s);
            } else {
                region_ = std::string(s);
            }
        }
    }
    if (to_name.empty() && !region_) {
        return refuse(400, "a move needs `to` (the node to move the tenant to), `region` (the "
                           "region whose node with the fewest bytes takes it) or both");
    }
    if (!to_name.empty() && !valid_name(to_name)) {
        return refuse(400, "field `to`: `" + to_name + "` is not [a-z0-9_-]{1,64}");
    }
    if (region_ && !region_->empty() && !valid_name(*region_)) {
        return refuse(400, "field `region`: `" + *region_ + "` is not [a-z0-9_-]{1,64}");
    }
    return std::nullopt;
}

// §7.1: the tenant, its node and the target in the directory: the node named (in the region
// named, if one is), or the one with the fewest bytes of the region named; two nodes of one
// region unless the request named the target's.
std::optional<Response> Move::check(const DirectoryMaps& maps, const std::string& to_name) {
    auto t = maps.tenants.find(tenant_);
    if (t == maps.tenants.end()) {
        return refuse(404, "tenant `" + tenant_ + "` is not in the directory");
    }
    row_ = t->second;
    if (row_.state == "importing") {  // issue 20: a move across regions is not done with it
        return refuse(409, "tenant `" + tenant_ + "` is being moved into this region: move it "
                           "once that move is done");
    }
    if (router_.settling_move(tenant_)) {
        // A move a promotion left for its silent target (settle_move): that target may hold
        // writes the old primary acknowledged, which a move now (deleting its copy, or thawing
        // the source on failing to reach it) would lose.
        return refuse(409, "tenant `" + tenant_ + "` is left moving to `" + row_.moving_to +
                               "`, which has not answered since this router's promotion: it "
                               "may hold acknowledged writes; move it once `" +
                               row_.moving_to + "` answers and the settling has routed it");
    }
    if (!to_name.empty() && !maps.nodes.contains(to_name)) {
        return refuse(404, "no node `" + to_name + "`");
    }
    auto from = maps.nodes.find(row_.node);
    if (from == maps.nodes.end()) {
        return refuse(409, "tenant `" + tenant_ + "` is on node `" + row_.node +
                               "`, which is not in the directory");
    }
    from_ = from->second;
    if (to_name.empty()) {
        if (auto refused = pick_in_region(maps)) return refused;
    } else {
        to_ = maps.nodes.at(to_name);
    }
    if (to_.name == from_.name) {
        return refuse(409, "tenant `" + tenant_ + "` is on node `" + to_.name + "` already");
    }
    if (maps.is_standby(to_.name)) {
        return refuse(409, "node `" + to_.name + "` is a standby in a pair: record its " +
                               "pair's node without a standby first");
    }
    if (region_ && to_.region != *region_) {
        return with_region(refuse(409, "node `" + to_.name + "` is in region `" + to_.region +
                                           "`, not `" + *region_ + "`"),
                           to_.region);
    }
    if (!region_ && to_.region != from_.region) {
        return with_region(refuse(409, "node `" + to_.name + "` is in region `" + to_.region +
                                           "`: name it with \"region\": \"" + to_.region +
                                           "\""),
                           to_.region);
    }
    return std::nullopt;
}

// §7.1 `{"region": r}` alone: the node of `r` with the fewest bytes, as a create picks one
// (shard/placement.h), never the tenant's own; or the refusal.
std::optional<Response> Move::pick_in_region(const DirectoryMaps& maps) {
    auto placed = place_tenant(maps, region_, from_.name, [&](const NodeRow& n) {
        return router_.placement_bytes(n, a_.request_id);
    });
    if (const NodeRow* const* node = std::get_if<const NodeRow*>(&placed)) {
        to_ = **node;
        return std::nullopt;
    }
    const std::string region = "region `" + *region_ + "`";
    switch (std::get<NoTenantPlace>(placed)) {
        case NoTenantPlace::no_node:
            return refuse(404, "no " + region);
        case NoTenantPlace::only_excluded:
            return refuse(409, "no node in " + region + " but `" + from_.name + "`, where `" +
                                   tenant_ + "` is already");
        case NoTenantPlace::standbys_only:
            return refuse(409, "every node of " + region + " is a standby: `" + tenant_ +
                                   "` has nowhere to go there");
        case NoTenantPlace::none_answered:
            break;
    }
    Response r = refuse(503, "no node of " + region + " answered: `" + tenant_ + "` was not moved");
    r.header("Retry-After", "1");
    return r;
}

// §7.2: the steps, each before the next; before the flip a failure rolls back.
Response Move::steps(const DirectoryMaps& maps) {
    path_ = "/_admin/tenants/" + tenant_;
    const uint64_t start = router_.now_ms();
    steps_.lap();

    // A copy a stopped move left on another node than this one's target is stale: it goes.
    if (row_.state == "moving" && !row_.moving_to.empty() && row_.moving_to != to_.name) {
        if (auto old = maps.nodes.find(row_.moving_to); old != maps.nodes.end()) {
            (void)router_.node_calls().remove(old->second, tenant_, a_.request_id);
        }
    }
    // Step 1: a node holds one copy of a tenant, so its own replica on the target goes first.
    router_.copies().before_move(tenant_, to_.name, a_.request_id);

    // Step 2: marked moving, synced; still routed to the source.
    TenantRow moving = row_;
    moving.state = "moving";
    moving.moving_to = to_.name;
    moving.moving_term = maps.term;  // whose move it is, at a start
    moving.moving_freeze = freeze_id_;  // the freeze a start's thaw undoes
    if (engine::Status st = router_.directory().put_tenant(moving); !st.is_ok()) {
        return fail({500, "mark", "the directory could not mark `" + tenant_ +
                                      "` moving: " + st.to_string()});
    }
    steps_.mark = steps_.lap();
    stall_after("marked");

    // Step 3: the source frozen; writes in flight finish, new ones get 503 Retry-After: 1.
    std::string seq;
    if (auto f = freeze(seq)) {
        roll_back(false);
        return fail(*f);
    }
    steps_.freeze = steps_.lap();
    stall_after("frozen");

    // Steps 4 and 5: the image from the source onto the target, then the recorded quota to the
    // target (an image carries none), so it bites from the flip on.
    Copied copied;
    const ImageMove image{from_, to_, tenant_, path_, a_.request_id, seq};
    if (auto f = copy_image(router_.upstream(), image, copied, steps_)) {
        roll_back(false);
        return fail(*f);
    }
    QuotaSent quota = router_.copies().quotas().send_to(to_, row_, "move's target", a_.request_id);
    if (!quota.taken) {
        roll_back(true);
        return fail(
            {502, "quota", "the target did not take the quota of `" + tenant_ + "`: " + quota.why});
    }
    stall_after("installed");

    // Step 6: the flip, one statement, synced. Under leases the target's grants name the tenant
    // only once every standby router keeping up was sent the flip (step 7): a write it
    // acknowledged before would be lost to a standby promoted without the flip, which thaws the
    // source (§7.3).
    router_.cluster().withhold(to_.name, tenant_);
    if (engine::Status st = router_.directory().flip_tenant(tenant_, to_.name); !st.is_ok()) {
        router_.cluster().restore(to_.name, tenant_);
        roll_back(true);
        return fail({500, "flip", "the directory could not point `" + tenant_ + "` at node `" +
                                      to_.name + "`: " + st.to_string()});
    }
    steps_.flip = steps_.lap();
    // Step 10, before step 7: every standby router keeping up was sent the flip (at most a
    // second), so none forwards to a deleted copy for longer than its network trip, nor thaws
    // the source of a target that took writes. Then step 7: under leases, the target granted
    // its new list and the source its list without the tenant, both at once.
    const uint64_t waited_from = router_.now_ms();
    router_.standby().wait_for_standbys(standby_wait_ms_max);
    standbys_ms_ = router_.now_ms() - waited_from;
    router_.cluster().restore(to_.name, tenant_);
    router_.cluster().changed(to_.name);
    router_.cluster().changed(from_.name);
    stall_after("flipped");

    // Steps 8 and 9: the copies follow the tenant to its new node; a failure here is logged and
    // answered as `unreplicated`, never the move's.
    CopyOutcome copy = router_.copies().moved(tenant_, from_.name, a_.request_id);

    const bool removed = remove_source();
    // Step 9 never places the replica on the source, whose copy was still there: where no
    // other node could keep it, the source, now without one, is asked.
    if (removed) copy = router_.copies().after_source_removed(tenant_, copy, a_.request_id);
    const uint64_t ms = router_.now_ms() - start;
    count("done");
    if (auto* h = router_.metrics().move_duration) h->with({}).observe_us(ms * 1000);
    log_line("moved `" + tenant_ + "` from `" + from_.name + "` to `" + to_.name +
             "`: " + std::to_string(copied.bytes) + " bytes in " + std::to_string(ms) + " ms" +
             (!copy.node.empty()           ? "; its copy on `" + copy.node + "`"
              : !copy.unreplicated.empty() ? "; no copy: " + copy.unreplicated
                                           : std::string()) +
             (removed ? "" : "; the source copy was not deleted"));
    return answer(copied, removed, copy, ms);
}

// Step 11: the source copy deleted; its subscriptions end `gone` and reconnect to the target.
// One not deleted stays frozen and unrouted, said on stderr.
bool Move::remove_source() {
    NodeAnswer del = router_.node_calls().remove(from_, tenant_, a_.request_id);
    const bool removed = del.gone();
    steps_.remove = steps_.lap();
    if (!removed) {
        log_line("move of `" + tenant_ + "` to `" + to_.name + "`: the source copy on `" +
                 from_.name + "` was not deleted (" + del.said(from_) +
                 "); it stays frozen and unrouted");
    }
    return removed;
}

Response Move::answer(const Copied& copied, bool removed, const CopyOutcome& copy, uint64_t ms) {
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("from");
    w.string(from_.name);
    w.key("to");
    w.string(to_.name);
    w.key("region");
    w.string(to_.region);
    w.key("bytes");
    w.uint64(copied.bytes);
    w.key("ms");
    w.uint64(ms);
    w.key("source_removed");
    w.boolean(removed);
    write_copy(w, copy);
    w.key("seq");
    w.string(copied.seq);
    w.key("steps");
    w.begin_object();
    for (const auto& [name, took] : {std::pair{"mark", steps_.mark}, {"freeze", steps_.freeze},
                                   {"image", steps_.image}, {"transfer", steps_.transfer},
                                   {"verify", steps_.verify}, {"flip", steps_.flip},
                                   {"delete", steps_.remove}, {"target_receive", steps_.receive},
                                   {"target_install", steps_.install},
                                   {"standbys", static_cast<double>(standbys_ms_)}}) {
        w.key(name);
        w.float64(tenth(took));
    }
    w.end_object();
    w.end_object();
    return r;
}

std::optional<MoveFailure> Move::freeze(std::string& seq) {
    server::CallResult w = admin(from_, "POST", path_ + "/freeze", true, true);
    if (!w.answer) return MoveFailure{502, "freeze", w.error.message};
    if (w.answer->status != 200) {
        return MoveFailure{node_status(w.answer->status), "freeze",
                           who(from_) + " answered " + std::to_string(w.answer->status) +
                               " to the freeze: " + node_error(w.answer->body)};
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t s = 0;
    if (parser.parse(w.answer->body).get(doc) || doc["seq"].get_uint64().get(s)) {
        return MoveFailure{502, "freeze", who(from_) + " answered the freeze without its seq"};
    }
    seq = std::to_string(s);
    return std::nullopt;
}

// Before the flip (§7.2 Rollback): the source thawed, the target's copy deleted if installed
// (best effort), the row back to what it was, synced. A rollback write that fails leaves the
// tenant `moving`, handled as after a stop (settle_moves). A thaw that did not arrive (the source
// silent, or its lease lapsed and the call cut) is owed, recorded with the row put back
// (Copies::owe_thaw says how it is paid): the node may yet run the freeze its kernel holds.
void Move::roll_back(bool installed) {
    std::optional<OwedThaw> owed;
    if (server::CallResult w = admin(from_, "POST", path_ + "/thaw", true, true); !w.answer) {
        owed = OwedThaw{from_.name, tenant_, freeze_id_};
        log_line("the move of `" + tenant_ + "` is undone, but `" + from_.name +
                 "` did not answer its thaw (" + w.error.message +
                 "): it is asked again when the node next answers");
    }
    if (installed) (void)router_.node_calls().remove(to_, tenant_, a_.request_id);
    TenantRow back = row_;
    back.state = "active";
    back.moving_to.clear();
    if (engine::Status st = router_.directory().put_tenant(back, owed); !st.is_ok()) {
        log_line(
            "move of `" + tenant_ +
            "` rolled back but the directory could not put it back to active: " + st.to_string());
        if (owed) router_.copies().owe_thaw(*owed);  // in memory: the row left `moving` too
    }
}

}  // namespace

Response serve_move(Router& router, const server::Request& request, const Router::Answering& a,
                    const std::string& tenant) {
    if (auto r = method_refusal(request.head)) return std::move(*r);
    return Move(router, a, tenant).run(request);
}

namespace {

// A move across regions found to have gone through: the row `active` at home in the region it
// left for (`moving_to`), as the release would have written it.
engine::Status put_home(Router& router, const TenantRow& t) {
    TenantRow home = t;
    home.node = t.moving_to;
    home.state = "active";
    home.moving_to.clear();
    return router.directory().put_tenant(home);
}

// A move across regions left `moving` to `@<r>`: where region `r` says the tenant is active on a
// node of its own, the move went through under a router before this one (a standby promoted that
// had not been sent the release), and `@<r>` is its home; where it says nothing, nothing is
// decided. nullopt: go on and thaw the source.
std::optional<std::string> finished_there(Router& router, const std::string& name,
                                          const TenantRow& t, const DirectoryMaps& maps) {
    const std::optional<std::string_view> region = home_region(t.moving_to);
    if (!region) return std::nullopt;
    // The regions are the global directory's rows: on a region's router, its copy's.
    std::shared_ptr<const DirectoryMaps> global;
    if (const GlobalCopy* copy = router.global_copy()) global = copy->maps();
    const DirectoryMaps& regions = global ? *global : maps;
    auto routers = regions.regions.find(*region);
    if (routers == regions.regions.end()) return std::nullopt;  // no directory of its own to ask
    const TenantWord word =
        ask_tenant(router.relays(), RelayTo{std::string(*region), routers->second}, name,
                   peer_host(router.options().listen), router.new_request_id(std::nullopt));
    const Relayed& r = word.relayed;
    if (r.answered && r.status == 404) return std::nullopt;
    if (!word.said) {
        return "region `" + std::string(*region) + "` did not say where it is (" +
               (r.answered ? std::to_string(r.status) : r.why) + "): left moving";
    }
    if (router.options().region && !word.node.starts_with('@') && word.state == "importing") {
        // On a region's router (a standby promoted here may never have heard a release): not
        // activated yet, the move may be between its release and its home statement, and a thaw
        // here would be a second live copy once it is activated. That region's settling deletes
        // an import its source still places here, and a later round thaws. (On the global router
        // a release is its own home statement: a row still `moving` was never released.)
        return "region `" + std::string(*region) + "` has it importing on `" + word.node +
               "`: left moving, nothing thawed";
    }
    if (word.node.starts_with('@') || word.state != "active") return std::nullopt;
    // No grant is changed here: at start leasing has not begun (the grants are made from the
    // directory as it does), and a later round's row reaches the node with its next renewal.
    const engine::Status st = put_home(router, t);
    return "region `" + std::string(*region) + "` has it active on `" + word.node +
           "`: the move went through, its home is `" + t.moving_to + "`" +
           (st.is_ok() ? "" : ", but the row was not written: " + st.to_string()) +
           "; the frozen copy on `" + t.node + "` is left frozen and unrouted";
}

constexpr std::chrono::seconds settle_ask_bound{1};

// A move within this directory left `moving`: where its target holds the tenant unfrozen, on the
// source's history and further on than the source (or alone), the flip went through under a router
// before this one (a standby promoted that had not been sent it) and writes were acknowledged
// there; thawing the source would lose them. The row is then pointed at the target, as it is where
// the target is silent and the source has the tenant no more (it is deleted only after the flip)
// on rows inherited through a promotion; a target that does not answer there otherwise: left
// moving, the source frozen, asked again each settling round. nullopt: nothing shows it, go on and
// thaw the source (a target at the source's seq took no write: either copy will do; on the router's
// own rows a silent target took none, the flip being written here first).
std::optional<std::string> went_through_here(Router& router, const std::string& name,
                                             const TenantRow& t, const DirectoryMaps& maps,
                                             MoveRows rows, std::set<std::string>* silent) {
    if (home_region(t.moving_to)) return std::nullopt;
    const auto from = maps.nodes.find(t.node);
    const auto to = maps.nodes.find(t.moving_to);
    if (to == maps.nodes.end()) return std::nullopt;
    // What a node says of its copy, or nullopt where it did not say within settle_ask_bound (a
    // promotion, a start or a settling round waits for no timeout per tenant).
    // A node that said nothing this pass is not asked again in it (silent).
    auto ask = [&](const NodeRow& node) -> std::optional<DescribeReply> {
        if (silent && silent->contains(node.name)) return std::nullopt;
        DescribeReply r =
            router.node_calls().describe(node, name, router.new_request_id(std::nullopt),
                                         std::chrono::steady_clock::now() + settle_ask_bound);
        if (!r.answered && silent) silent->insert(node.name);
        if (!r.read) return std::nullopt;
        return r;
    };
    auto routed_to_target = [&](const std::string& why) {
        TenantRow moved = t;
        moved.node = t.moving_to;
        moved.state = "active";
        moved.moving_to.clear();
        engine::Status st = router.directory().put_tenant(moved);
        // At a start or a promotion leasing begins after and grants from this row; in a later
        // settling round it runs: both nodes are granted their new lists now.
        if (Cluster* cluster = router.cluster_if_made(); cluster && st.is_ok()) {
            cluster->changed(t.moving_to);
            cluster->changed(t.node);
        }
        if (!st.is_ok()) router.keep_settling_move(name);  // written at the next round
        return why + ": the flip went through" +
               (st.is_ok() ? "; routed to `" + t.moving_to + "`"
                           : ", but the row was not written: " + st.to_string());
    };
    // Inherited, and not known either way: left for a later round, frozen on its source.
    auto left_moving = [&](const std::string& why) {
        router.keep_settling_move(name);
        return why + ", and the old primary may have flipped the move and had writes taken " +
               "there: left moving, the source frozen; asked again each settling round";
    };
    const std::optional<DescribeReply> there = ask(to->second);
    if (!there) {
        if (rows == MoveRows::own) return std::nullopt;
        std::optional<DescribeReply> source;
        if (from != maps.nodes.end()) source = ask(from->second);
        if (source && !source->found) {
            return routed_to_target("`" + t.moving_to + "` did not answer and the source has it " +
                                    "no more (deleted after a flip)");
        }
        // A source not frozen was never flipped away from (it is frozen before the image is
        // taken, and never thawed after a flip): its thaw below is a no-op.
        if (source && !source->frozen) return std::nullopt;
        return left_moving("`" + t.moving_to + "` did not answer");
    }
    if (!there->found || there->frozen) return std::nullopt;
    std::optional<DescribeReply> source;
    if (from != maps.nodes.end()) source = ask(from->second);
    if (!source) {                                       // not said
        if (rows == MoveRows::own) return std::nullopt;  // the source's thaw below, as before
        return left_moving("`" + t.moving_to + "` has it unfrozen and the source did not answer");
    }
    // The move's image carries the source's history: a target of another (a stale copy a
    // failover left there, with writes of its own the source never got) is no sign of a flip.
    const bool ahead =
        !source->found || (source->lineage == there->lineage && source->history == there->history &&
                           there->seq > source->seq);
    if (!ahead) return std::nullopt;
    return routed_to_target("`" + t.moving_to + "` has it at seq " + std::to_string(there->seq) +
                            ", " +
                            (source->found ? "past the source's " + std::to_string(source->seq)
                                           : std::string("the source none")) +
                            ", writes landed there") +
           (source->found ? "; the frozen copy on `" + t.node + "` is left frozen and unrouted"
                          : "");
}

// A region's router (§11.3), a row left `moving` to region `@<r>`: only the global router's
// primary says whether the move went through. A standby promoted here may never have heard its
// old primary's release: a thaw then would make the tenant live in two regions. Placed in
// another region: the row is written released, as the release would have; still `importing`
// there, or nothing said: left moving, nothing thawed (the settling asks again each period,
// Handoffs::settle_moving); a home here still: nullopt, the target is asked next.
std::optional<std::string> homed_elsewhere(Router& router, const std::string& name,
                                           const TenantRow& t) {
    if (!router.options().region || !home_region(t.moving_to)) return std::nullopt;
    const TenantWord word = ask_tenant(
        router.relays(), RelayTo{"global", global_urls(router.options().global.value_or(""))}, name,
        peer_host(router.options().listen), router.new_request_id(std::nullopt));
    if (!word.said) {
        return "the global router did not say where its home is: left moving, nothing thawed";
    }
    // At home here still, as far as the global router knows: the target region is asked next
    // (finished_there), then the source is thawed.
    if (word.node == "@" + *router.options().region) return std::nullopt;
    // Its home another region (`@<r>`: the target's, or one it moved on to since), or a node of
    // a region the global router keeps itself that it is active on (the import activated, the
    // home statement of such a move): it left this region, whose copy stays frozen.
    const bool left = word.node.starts_with('@') || word.state == "active";
    if (!left) {
        // An import still `importing` there: the move is between its release and its home
        // statement, which a thaw here would make a second live copy beside.
        return "the global router has it " + word.state + " on `" + word.node +
               "`: left moving, nothing thawed";
    }
    const engine::Status st = put_home(router, t);
    return "the global router places it at `" + word.node + "`: the move went through" +
           (st.is_ok() ? "" : ", but the row was not written: " + st.to_string()) +
           "; the frozen copy on `" + t.node + "` is left frozen";
}

}  // namespace

void settle_move(Router& router, const std::string& name, const TenantRow& t, MoveRows rows,
                 std::set<std::string>* silent) {
    auto maps = router.directory().maps();
    std::optional<std::string> decided = homed_elsewhere(router, name, t);
    if (!decided) decided = finished_there(router, name, t, *maps);
    if (!decided) decided = went_through_here(router, name, t, *maps, rows, silent);
    if (decided) {
        log_line("tenant `" + name + "` was left moving from `" + t.node + "` to `" + t.moving_to +
                 "` by a stopped move: " + *decided);
        return;
    }
    auto n = maps->nodes.find(t.node);
    std::string outcome = "its node is not in the directory";
    if (n != maps->nodes.end()) {
        const std::string request_id = router.new_request_id(std::nullopt);
        // Under the stopped move's own freeze id where its row names it: a later move's freeze
        // stays, and the node refuses that freeze should it come after this thaw. Bounded as the
        // asks above, so a start, a promotion or a settling round waits on no --upstream-timeout
        // for a silent source; one silent already this pass is not asked.
        std::vector<http::Header> headers;
        if (!t.moving_freeze.empty()) headers.push_back({"Fenec-Freeze-Id", t.moving_freeze});
        server::CallResult w;
        if (silent && silent->contains(t.node)) {
            w.error.message = "`" + t.node + "` said nothing to this settling already";
        } else {
            w = router.upstream().admin(
                n->second, {.method = "POST",
                            .target = "/_admin/tenants/" + name + "/thaw",
                            .request_id = request_id,
                            .resendable = true,
                            .until = {.deadline = server::Clock::now() + settle_ask_bound},
                            .headers = std::move(headers)});
            if (!w.answer && silent) silent->insert(t.node);
        }
        outcome = !w.answer ? "its source did not answer the thaw: " + w.error.message
                  : w.answer->status == 200
                      ? "its source thawed"
                      : "its source answered the thaw " + std::to_string(w.answer->status);
        // Within this directory, unanswered. A move of this router's own term was not flipped
        // (the flip is written first): the row goes back `active` with the thaw owed in the same
        // block, as an undone move's (Move::roll_back), asked again whenever the node next
        // answers, by whichever router leads then. Left `moving`, the frozen source would wait
        // for an operator's move. An inherited one is looked at again each settling round
        // (went_through_here first): an older term's router may yet flip it.
        if (!w.answer && !home_region(t.moving_to)) {
            if (rows != MoveRows::own) {
                router.keep_settling_move(name);
                log_line("tenant `" + name + "` was left moving from `" + t.node + "` to `" +
                         t.moving_to + "` by a stopped move: " + outcome +
                         "; left moving, the source frozen, settled again each round");
                return;
            }
            TenantRow back = t;
            back.state = "active";
            back.moving_to.clear();
            const OwedThaw owed{t.node, name, t.moving_freeze};
            const engine::Status st = router.directory().put_tenant(back, owed);
            if (st.is_ok()) {
                if (Cluster* cluster = router.cluster_if_made()) cluster->changed(t.node);
                log_line("tenant `" + name + "` was left moving from `" + t.node + "` to `" +
                         t.moving_to + "` by a stopped move: " + outcome +
                         "; its row active again on `" + t.node +
                         "`, the thaw owed and asked again when the node next answers");
                return;
            }
            outcome += "; its row not put back: " + st.to_string();
        }
        // Across regions (`@<r>`): the release never ran here, so the move is over, undone.
        // The row goes back `active`, which is what the target region's router waits to read
        // before it deletes the import this move left there (shard/handoff.h's settling).
        if (w.answer && w.answer->status == 200 && home_region(t.moving_to)) {
            TenantRow back = t;
            back.state = "active";
            back.moving_to.clear();
            engine::Status st = router.directory().put_tenant(back);
            outcome +=
                st.is_ok() ? ", its row active again" : ", its row not put back: " + st.to_string();
            if (st.is_ok()) {
                log_line("tenant `" + name + "` was left moving from `" + t.node + "` to `" +
                         t.moving_to + "` by a stopped move: " + outcome + "; region `" +
                         t.moving_to.substr(1) +
                         "` deletes what it imported; move it again to finish");
                return;
            }
        }
    }
    // Across regions the global router's settling asks the thaw again each round; within one
    // directory a second move finishes it.
    log_line("tenant `" + name + "` was left moving from `" + t.node + "` to `" + t.moving_to +
             "` by a stopped move: still routed to `" + t.node + "`, " + outcome +
             (home_region(t.moving_to) ? "; the thaw is asked again each settling round"
                                       : "; move it again to finish"));
}

void settle_moves_left(Router& router) {
    // Each node is asked for a second at most (went_through_here); a target that stayed silent
    // is not asked again this round for its other tenants, so a dead node holds the settling
    // thread (which also lapses exports) a second or two a round, not that a tenant.
    std::set<std::string> silent;
    for (const std::string& name : router.take_moves_to_settle()) {
        const auto maps = router.directory().maps();
        const auto it = maps->tenants.find(name);
        if (it == maps->tenants.end() || it->second.state != "moving" ||
            home_region(it->second.moving_to)) {
            continue;  // moved, deleted or settled meanwhile
        }
        TenantClaim claim(router, name, "settle");
        if (!claim.held || silent.contains(it->second.moving_to)) {
            router.keep_settling_move(name);  // looked at next round
            continue;
        }
        const TenantRow row = it->second;
        settle_move(router, name, row, MoveRows::inherited, &silent);
        if (router.settling_move(name)) silent.insert(row.moving_to);
    }
}

void settle_moves(Router& router, MoveRows rows) {
    auto maps = router.directory().maps();
    std::set<std::string> silent;  // each node given a second at most in the pass
    for (const auto& [name, t] : maps->tenants) {
        // On a region's router a row moving to another region is settled by asking the global
        // router (homed_elsewhere), which could hold a start or a promotion for a timeout a
        // row: the settling does it once the router is up (Handoffs::settle_moving).
        if (router.options().region && home_region(t.moving_to)) continue;
        if (t.state != "moving") continue;
        const bool own = maps->term == 0 || t.moving_term == maps->term;
        settle_move(router, name, t,
                    rows != MoveRows::by_row ? rows
                    : own                    ? MoveRows::own
                                             : MoveRows::inherited,
                    &silent);
    }
}

}  // namespace fenec::shard
