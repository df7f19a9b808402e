// shard/region_move.cc: the global router's move across two regions keeping their own
// directories (shard/region_move.h; router.md §11.7): the request read, the regions' routers
// called step by step with the relay mark and the routers' token, the image streamed from the
// source's export into the target's import over two connections of the blocking client's own,
// the home moved in the global directory, and each step undone where the next fails.
//
// The steps without an image go through the relay every two-level change uses (shard/relay.h);
// the export and import, whose bodies are images, over connections of their own, the routers
// tried in their `regions` order (one that cannot be reached, or a standby naming its primary,
// passes the step to the next).
#include "shard/region_move.h"

#include <simdjson.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "json/writer.h"
#include "server/runtime/client.h"
#include "server/runtime/mark.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/handoff.h"
#include "shard/log_line.h"
#include "shard/move_image.h"
#include "shard/node_calls.h"
#include "shard/placement.h"
#include "shard/relay.h"
#include "shard/standby.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

using Response = http::Response;
using server::Connection;

// §11.4 [ours]: a region out of reach is a partition, not a blip.
constexpr std::string_view region_retry_after_s = "5";
// Issue 20: the target's activate asked this many times (each through its routers in order)
// before the move is answered with it pending; a few, since the home has moved and the target's
// own settling takes over after (shard/handoff.h).
constexpr int activate_attempts_max = 3;

// One region's answer to a step: its status and body, or why no router of it took the step.
struct RegionAnswer {
    bool answered = false;
    int status = 0;
    std::string body;
    std::string why;  // not answered
};

// Whether a 409 is a standby's (§6.1: it names the primary it follows), or a router's promoted
// over (Router::superseded): either refused the step unrun, and the next router is asked.
bool standby_refusal(int status, std::string_view body) {
    if (status != 409) return false;
    const RelayAnswer said = parse_relay_answer(body);
    return !said.primary.empty() || said.superseded;
}

class RegionMove {
  public:
    RegionMove(Router& router, const server::Request& request, const Router::Answering& a,
               std::string tenant)
        : router_(router), request_(request), a_(a), tenant_(std::move(tenant)) {}

    // nullopt: not a move across the levels.
    std::optional<Response> run();

  private:
    // The request for `target` to region `routers`' `url`, headed with the routers' token, the
    // request id and the relay mark over them; `body_bytes` when the caller sends the body.
    std::string head_for(const std::string& url, std::string_view method, const std::string& target,
                         std::string_view body, std::optional<uint64_t> body_bytes,
                         std::vector<http::Header> headers = {}) const;
    // A step without an image, through the relay (shard/relay.h) to `region`'s routers.
    RegionAnswer call(const std::string& region, std::string_view method, const std::string& step,
                      std::string_view body = {});
    std::optional<Response> transfer();
    // Steps 1 and 2 from a region the global directory keeps itself (§11.7: "the global router
    // does that side's part itself"): exported here, the image sent whole to the target's routers.
    std::optional<Response> transfer_from_here();
    // Step 2 into a region the global directory keeps itself: the row `importing` (synced) in
    // place of `@<from>`, then the image installed on one of its nodes, its replica made.
    std::optional<Response> import_here(const ImageHeaders& image, std::string_view body);
    // The target router `url`'s answer to the import: taken (nullopt, `imported_` its body), or
    // refused, the export undone.
    std::optional<Response> import_answered(const std::string& url, int status, std::string body);
    // The other steps, for a side the global directory keeps itself, answered as its region's
    // router would answer them.
    RegionAnswer here(std::string_view method, const std::string& step);
    bool is_here(const std::string& region) const {
        return (region == from_ && from_here_) || (region == to_ && to_here_);
    }
    // Undoes, best effort and logged.
    // Whether the step was undone (answered below 300); logged when not.
    bool undo(const std::string& region, std::string_view method, const std::string& step);
    // Step 4 failed: the release undone, and then the import deleted; the import kept when the
    // release could not be undone.
    void undo_release_then_import();
    Response refused_by(const std::string& region, std::string_view step, const RegionAnswer& r);
    Response out_of_reach(const std::string& region, std::string_view step, const std::string& why);
    // A release sent and not answered, and the undo-export that would have told whether it ran
    // not answered either: 503, the outcome left to the regions' routers (shard/handoff.h).
    Response unsettled(const std::string& why);
    // Step 5: the target's activate, asked up to activate_attempts_max times; whether one took.
    bool activate();
    Response answer(bool removed, bool activated, uint64_t ms);
    std::string step_target(const std::string& step) const {
        return "/_shard/handoff/" + tenant_ + "/" + step;
    }

    Router& router_;
    const server::Request& request_;
    const Router::Answering& a_;
    const std::string tenant_;
    std::string from_, to_;  // the regions
    std::string node_;       // the node the request named in the target region, if it did
    std::vector<std::string> from_routers_, to_routers_;
    TenantRow row_;
    bool from_here_ = false, to_here_ = false;  // a side the global directory keeps itself
    std::string imported_on_;                   // to_here_: the node the import installed on
    uint64_t bytes_ = 0;
    std::string imported_;  // the target's import answer
};

std::string RegionMove::head_for(const std::string& url, std::string_view method,
                                 const std::string& target, std::string_view body,
                                 std::optional<uint64_t> body_bytes,
                                 std::vector<http::Header> headers) const {
    const std::string addr = replica_addr(url);
    http::OutRequest out{.method = method, .target = target, .host = addr};
    out.headers = std::move(headers);
    out.headers.push_back({"X-Request-Id", a_.request_id});
    // Header holds views: the values' bytes live here until write_request below.
    std::string relay, auth;
    if (const std::optional<std::string>& token = router_.options().token) {
        auth = "Bearer " + *token;
        out.headers.push_back({"Authorization", auth});
        const std::string client = peer_host(request_.peer);
        relay = client + " " + server::relay_mark(*token, client, a_.request_id, method, target);
        out.headers.push_back({"Fenec-Relay", relay});
    } else {
        out.headers.push_back({"Via", relay_via});
    }
    out.body = body;
    out.body_bytes = body_bytes;
    out.close = true;
    std::string bytes;
    http::write_request(out, bytes);
    return bytes;
}

server::CallRequest to_router(const std::string& url) {
    server::CallRequest r;
    r.peer = url;
    r.peer_text = "router " + url;
    r.addr = replica_addr(url);
    return r;
}

RegionAnswer RegionMove::call(const std::string& region, std::string_view method,
                              const std::string& step, std::string_view body) {
    if (is_here(region)) return here(method, step);
    const std::string target = step_target(step);
    const Relayed r =
        router_.relays().relay(RelayTo{region, region == from_ ? from_routers_ : to_routers_},
                               {.method = method,
                                .target = target,
                                .body = body,
                                .client = peer_host(request_.peer),
                                .request_id = a_.request_id});
    return RegionAnswer{r.answered, r.status, r.body, r.why};
}

bool RegionMove::undo(const std::string& region, std::string_view method, const std::string& step) {
    RegionAnswer r = call(region, method, step, method == "DELETE" ? "" : "{}");
    if (!r.answered || r.status >= 300) {
        log_line("move of `" + tenant_ + "` from region `" + from_ + "` to `" + to_ + "`: the " +
                 step + " was not undone (" +
                 (r.answered ? std::to_string(r.status) + " " + node_error(r.body) : r.why) + ")");
        return false;
    }
    return true;
}

void RegionMove::undo_release_then_import() {
    // The import goes only once the source has taken its tenant back: a source still released
    // (its undo not answered, or refused after a restart of its router, which keeps the release
    // in memory) holds only a frozen copy, and the import is then the tenant's one live copy,
    // which the target region's settling activates (shard/handoff.h).
    if (undo(from_, "POST", "undo-release")) {
        undo(to_, "DELETE", "import");
        return;
    }
    log_line("move of `" + tenant_ + "` from region `" + from_ + "` to `" + to_ +
             "`: the import is kept, the source still released; region `" + to_ + "` activates it");
}

Response RegionMove::out_of_reach(const std::string& region, std::string_view step,
                                  const std::string& why) {
    // Cut by this router's stop (Relays::stop_calls): the undos it asked after were cut too, so
    // an export that froze the tenant is undone by its own lapse, not by this router.
    const bool stopping = router_.relays().stopping().cancelled() && step != "release";
    Response r = Router::error(
        503, stopping ? why + ": the move of `" + tenant_ + "` is cut at its " + std::string(step) +
                            "; it stays in region `" + from_ +
                            "`, whose router thaws it by itself if the export froze it, once "
                            "nothing follows (twice its --upstream-timeout)"
                      : "region `" + region + "` is out of reach (" + why + "): `" + tenant_ +
                            "` stays where it was, taking writes");
    r.header("Retry-After", std::string(region_retry_after_s));
    r.body.pop_back();
    r.body += ",\"region\":\"" + region + "\",\"step\":\"" + std::string(step) + "\"}";
    return r;
}

Response RegionMove::unsettled(const std::string& why) {
    Response r = Router::error(
        503, "region `" + from_ + "` did not answer the release of `" + tenant_ + "` (" + why +
                 "), nor say whether it ran: its router thaws the tenant in place if it did not, "
                 "and region `" +
                 to_ +
                 "`'s router takes it at its next settling (at start "
                 "and every minute) once the import is older than twice its "
                 "--upstream-timeout, if it did");
    r.header("Retry-After", std::string(region_retry_after_s));
    r.body.pop_back();
    r.body += ",\"region\":\"" + from_ + "\",\"step\":\"release\"}";
    return r;
}

Response RegionMove::refused_by(const std::string& region, std::string_view step,
                                const RegionAnswer& got) {
    const int status = got.status >= 400 && got.status < 500 ? got.status : 502;
    Response r = Router::error(status, "region `" + region + "`'s router answered " +
                                           std::to_string(got.status) + " to the " +
                                           std::string(step) + ": " + node_error(got.body));
    r.body.pop_back();
    r.body += ",\"region\":\"" + region + "\",\"step\":\"" + std::string(step) + "\"}";
    return r;
}

std::optional<Response> RegionMove::run() {
    if (router_.global_copy()) return std::nullopt;  // a region's router: not the global one
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view s;
    std::optional<std::string> region;
    if (!parser.parse(request_.body.data(), request_.body.size()).get(doc)) {
        if (!doc["region"].get_string().get(s)) region = std::string(s);
        if (!doc["to"].get_string().get(s)) node_ = std::string(s);
    }
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant_);
    if (t == maps->tenants.end()) return std::nullopt;  // move.cc's 404
    row_ = t->second;
    const std::optional<std::string_view> home = home_region(row_.node);
    const bool to_own = region && maps->regions.contains(*region);
    if (!home && !to_own) return std::nullopt;  // within this directory
    if (home) {
        from_ = std::string(*home);
        if (!region) {
            return Router::error(409, "tenant `" + tenant_ + "` is at home in region `" + from_ +
                                          "`: a move within it is its router's; a move out "
                                          "names \"region\"");
        }
    } else {
        // On a node this directory keeps, to a region keeping its own: this side is ours.
        from_here_ = true;
        auto n = maps->nodes.find(row_.node);
        if (n == maps->nodes.end() || row_.state != "active") {
            return Router::error(409, "tenant `" + tenant_ + "` is " + row_.state + " on `" +
                                          row_.node +
                                          "`: only a tenant active on a node is moved across "
                                          "regions");
        }
        from_ = n->second.region;
    }
    to_ = *region;
    if (to_ == from_) {
        return Router::error(409, "tenant `" + tenant_ + "` is at home in region `" + from_ +
                                      "` already: a move within it is its router's");
    }
    if (!node_.empty() && !valid_name(node_)) {
        return Router::error(400, "field `to`: `" + node_ + "` is not [a-z0-9_-]{1,64}");
    }
    if (!to_own) {
        // A region whose nodes this directory keeps: this side is ours.
        const bool kept =
            !to_.empty() && std::any_of(maps->nodes.begin(), maps->nodes.end(),
                                        [&](const auto& n) { return n.second.region == to_; });
        if (!kept) return Router::error(404, "no region `" + to_ + "`");
        to_here_ = true;
        if (!node_.empty()) {
            auto n = maps->nodes.find(node_);
            if (n == maps->nodes.end()) return Router::error(404, "no node `" + node_ + "`");
            if (n->second.region != to_) {
                return Router::error(409, "node `" + node_ + "` is in region `" + n->second.region +
                                              "`, not `" + to_ + "`");
            }
            if (maps->is_standby(node_)) {
                return Router::error(409, "node `" + node_ + "` is a standby in a pair");
            }
        }
    }
    if (!from_here_) from_routers_ = maps->regions.at(from_);
    if (!to_here_) to_routers_ = maps->regions.at(to_);
    AskedClaim claim(router_, tenant_, "move");
    if (!claim.held) {
        return Router::error(409, "another operation on `" + tenant_ +
                                      "` is in progress: " + router_.held_by(tenant_));
    }
    // The row again, under the claim: the steps write it back whole, and a repair waited for
    // (AskedClaim) may have learnt its lineage, or an operation that ended before the claim
    // moved it.
    {
        auto now = router_.directory().maps();
        auto fresh = now->tenants.find(tenant_);
        if (fresh == now->tenants.end()) {
            return Router::error(404, "tenant `" + tenant_ + "` is not in the directory");
        }
        if (fresh->second.node != row_.node || fresh->second.state != row_.state) {
            return Router::error(
                409, "tenant `" + tenant_ + "` changed while this move waited for it: ask again");
        }
        row_ = fresh->second;
    }
    const uint64_t start = router_.now_ms();
    auto count = [&](std::string_view outcome) {
        if (auto* m = router_.metrics().moves) m->with({outcome, "regions"}).inc();
    };
    // Steps 1 and 2.
    if (std::optional<Response> failed = transfer()) {
        count("failed");
        return failed;
    }
    // Step 3: the source lets it go.
    const std::string release = "{\"to\":\"@" + to_ + "\"}";
    RegionAnswer released = call(from_, "POST", "release", release);
    if (!released.answered) {
        // Sent, and no answer: it may have run, and a release is past an undo of the import
        // (the target's router activates an import its source released). The undo-export asks
        // which: it refuses with `released_to` once the release ran, and otherwise undoes the
        // export, after which a late release is refused.
        RegionAnswer undone = call(from_, "POST", "undo-export", "{}");
        if (undone.answered && undone.status == 409 && released_to(undone.body) == "@" + to_) {
            released = RegionAnswer{true, 200, std::move(undone.body), ""};
        } else if (undone.answered && undone.status == 200) {
            undo(to_, "DELETE", "import");
            count("failed");
            return out_of_reach(from_, "release", released.why);
        } else {
            // Neither heard: the regions settle it between them (shard/handoff.h): an export
            // that was not released lapses and thaws, and the target's router then deletes its
            // import; one that was is activated by the target's router.
            count("failed");
            return unsettled(released.why);
        }
    }
    if (released.status != 200) {
        undo(to_, "DELETE", "import");
        undo(from_, "POST", "undo-export");
        count("failed");
        if (released.status == 409) {
            return out_of_reach(from_, "release", node_error(released.body));
        }
        return refused_by(from_, "release", released);
    }
    test_hooks::stall_after_move_step("released");  // released, the home not yet moved
    // Step 4: the home moved, one statement, synced. From a region kept here, the release was
    // that statement; into one, the activation is (the row `importing` made `active`).
    bool activated = false;
    if (to_here_) {
        RegionAnswer homed = test_hooks::fail_handoff_step("home")
                                 ? RegionAnswer{true, 500, "the test hook failed the home", ""}
                                 : here("POST", "activate");
        if (homed.status != 200) {
            undo_release_then_import();
            count("failed");
            return Router::error(500, "the global directory could not move the home of `" +
                                          tenant_ + "`: " + node_error(homed.body));
        }
        activated = true;
    } else if (!from_here_) {
        TenantRow moved = row_;
        moved.node = "@" + to_;
        moved.state = "active";
        moved.moving_to.clear();
        engine::Status st = router_.directory().put_tenant(moved);
        if (st.is_ok() && test_hooks::fail_handoff_step("home")) {
            moved = row_;  // the hook: as if the statement had failed, the row as it was
            st = router_.directory().put_tenant(row_);
            if (st.is_ok()) {
                st = engine::Status::error(engine::Code::io_error,
                                           "the test hook failed the home statement");
            }
        }
        if (!st.is_ok()) {
            undo_release_then_import();
            count("failed");
            return Router::error(500, "the global directory could not move the home of `" +
                                          tenant_ + "`: " + st.to_string());
        }
    }
    // Step 5 (issue 20): the target's copy leased only now, with the source released and the
    // home moved: nothing can undo the import any more. Not taken: the move is done all the same
    // (the home has moved), and the target region's router activates it itself (shard/handoff.h).
    if (!to_here_) activated = activate();
    // Step 6: every standby keeping up was sent the new home before the source copy goes.
    router_.standby().wait_for_standbys(standby_wait_ms_max);
    RegionAnswer dropped = call(from_, "POST", "drop", "{}");
    bool removed = false;
    if (dropped.answered && dropped.status == 200) {
        simdjson::dom::element d;
        bool b = false;
        if (!parser.parse(dropped.body).get(d) && !d["source_removed"].get_bool().get(b))
            removed = b;
    } else {
        log_line("move of `" + tenant_ + "` to region `" + to_ +
                 "`: the source region did not drop its copy (" +
                 (dropped.answered ? node_error(dropped.body) : dropped.why) +
                 "); it stays frozen and unrouted there");
    }
    count("done");
    return answer(removed, activated, router_.now_ms() - start);
}

bool RegionMove::activate() {
    std::string why;
    for (int attempt = 1; attempt <= activate_attempts_max; ++attempt) {
        RegionAnswer r = call(to_, "POST", "activate", "{}");
        if (r.answered && r.status == 200) return true;
        why = r.answered ? std::to_string(r.status) + " " + node_error(r.body) : r.why;
    }
    log_line("move of `" + tenant_ + "` to region `" + to_ +
             "`: its home moved, but the activation was not taken (" + why + "); region `" + to_ +
             "`'s router activates it itself");
    return false;
}

// Steps 1 and 2: the export's answer streamed into the import; the export undone when the
// import fails.
std::optional<Response> RegionMove::transfer() {
    if (from_here_) return transfer_from_here();
    const std::string export_body = "{\"to\":\"@" + to_ + "\"}";
    std::unique_ptr<Connection> source;
    http::ResponseHead head;
    std::string why;
    for (const std::string& url : router_.relays().ordered(from_, from_routers_)) {
        server::CallError error;
        auto conn = router_.upstream().blocking().connect(
            to_router(url), {.cancel = &router_.relays().stopping()}, error);
        if (!conn || !conn->send(head_for(url, "POST", step_target("export"), export_body,
                                          std::nullopt, {{"Content-Type", "application/json"}}),
                                 error)) {
            why += (why.empty() ? "" : "; ") + router_.relays().said(url, error.message);
            continue;
        }
        if (!conn->read_head(head, error)) {
            // Sent whole, no answer: it may have frozen the tenant; its lapse thaws it.
            undo(from_, "POST", "undo-export");
            return out_of_reach(from_, "export", router_.relays().said(url, error.message));
        }
        if (head.status == 409 && head.content_length) {
            std::string body;
            (void)conn->read_body(*head.content_length, body, error);
            if (standby_refusal(409, body)) {
                why += (why.empty() ? "" : "; ") + url + " is a standby";
                continue;
            }
            return refused_by(from_, "export", {true, 409, body, ""});
        }
        router_.relays().answered(from_, url);
        source = std::move(conn);
        break;
    }
    if (!source) return out_of_reach(from_, "export", from_routers_.empty() ? "no router" : why);
    if (head.status != 200 || !head.content_length) {
        std::string body;
        server::CallError ignored;
        (void)source->read_body(head.content_length.value_or(0), body, ignored);
        return refused_by(from_, "export", {true, head.status, body, ""});
    }
    bytes_ = *head.content_length;
    if (to_here_) {
        // The image read whole (the region bounds it by its --max-body), then installed here.
        std::string image;
        server::CallError error;
        if (!source->read_body(bytes_, image, error)) {
            undo(from_, "POST", "undo-export");
            if (router_.relays().stopping().cancelled()) {
                return out_of_reach(from_, "export",
                                    Relays::stopped_call("region `" + from_ + "`'s router"));
            }
            return Router::error(502, "region `" + from_ + "`'s export of `" + tenant_ +
                                          "` ended short: " + error.message);
        }
        const ImageHeaders sent{head.header("Fenec-Image-Digest").value_or(""),
                                head.header("Fenec-Seq").value_or(""),
                                head.header("Fenec-Lineage").value_or("")};
        if (std::optional<Response> failed = import_here(sent, image)) {
            undo(from_, "POST", "undo-export");
            return failed;
        }
        return std::nullopt;
    }
    std::vector<http::Header> image_headers = {{"Content-Type", "application/octet-stream"}};
    for (std::string_view name : {"Fenec-Seq", "Fenec-Lineage", "Fenec-Image-Digest"}) {
        if (auto v = head.header(name))
            image_headers.push_back({name, *v});  // views into `head`, alive to the end
    }
    why.clear();
    for (const std::string& url : router_.relays().ordered(to_, to_routers_)) {
        server::CallError error;
        auto target = router_.upstream().blocking().connect(
            to_router(url), {.cancel = &router_.relays().stopping()}, error);
        const std::string put =
            "/_shard/handoff/" + tenant_ + "/import" + (node_.empty() ? "" : "?node=" + node_);
        if (!target || !target->send(head_for(url, "PUT", put, {}, bytes_, image_headers), error)) {
            why += (why.empty() ? "" : "; ") + router_.relays().said(url, error.message);
            continue;
        }
        if (auto failed = source->relay_to(*target, bytes_)) {
            undo(from_, "POST", "undo-export");
            if (router_.relays().stopping().cancelled()) {
                return out_of_reach(to_, failed->source ? "export" : "import",
                                    Relays::stopped_call(url));
            }
            if (failed->source) {
                return Router::error(502, "region `" + from_ + "`'s export of `" + tenant_ +
                                              "` ended short: " + failed->message);
            }
            http::ResponseHead refused;
            std::string body;
            if (target->read_head(refused, error)) {
                (void)target->read_body(refused.content_length.value_or(0), body, error);
                return refused_by(to_, "import", {true, refused.status, body, ""});
            }
            return out_of_reach(to_, "import", router_.relays().said(url, failed->message));
        }
        http::ResponseHead got;
        std::string body;
        if (!target->read_head(got, error) ||
            !target->read_body(got.content_length.value_or(0), body, error)) {
            // It may have installed: undone both ways.
            undo(to_, "DELETE", "import");
            undo(from_, "POST", "undo-export");
            return out_of_reach(to_, "import", router_.relays().said(url, error.message));
        }
        if (standby_refusal(got.status, body)) {
            // A standby took the image and refused it: the export's bytes are spent. The move
            // is undone and asked again, which reaches the region's primary.
            undo(from_, "POST", "undo-export");
            return out_of_reach(to_, "import", url + " is a standby");
        }
        return import_answered(url, got.status, std::move(body));
    }
    undo(from_, "POST", "undo-export");
    return out_of_reach(to_, "import", to_routers_.empty() ? "no router" : why);
}

// Steps 1 and 2 from a region kept here: `moving` to `@<to>` (synced), frozen, the image taken
// whole (shard/handoff.h, the node's part a region's router runs), then sent whole to the
// target's routers in their order.
std::optional<Response> RegionMove::transfer_from_here() {
    auto maps = router_.directory().maps();
    const NodeRow node = maps->nodes.at(row_.node);
    TenantRow moving = row_;
    moving.state = "moving";
    moving.moving_to = "@" + to_;
    if (engine::Status st = router_.directory().put_tenant(moving); !st.is_ok()) {
        return Router::error(
            500, "the directory could not mark `" + tenant_ + "` moving: " + st.to_string());
    }
    // The row `moving` sent to the standby routers before the copy freezes: one promoted later
    // thaws a copy its row says is moving, and would leave one it reads `active` frozen.
    router_.standby().wait_for_standbys(standby_wait_ms_max);
    auto taken = freeze_and_take_image(router_, node, tenant_, a_.request_id);
    if (const MoveFailure* f = std::get_if<MoveFailure>(&taken)) {
        undo(from_, "POST", "undo-export");
        Response r = Router::error(f->status, f->message);
        r.body.pop_back();
        r.body += ",\"step\":\"export\"}";
        return r;
    }
    const Response& image = std::get<Response>(taken);
    bytes_ = image.body.size();
    auto header_of = [&](std::string_view name) -> std::string_view {
        for (const auto& [k, v] : image.headers) {
            if (k == name) return v;
        }
        return {};
    };
    std::vector<http::Header> image_headers = {{"Content-Type", "application/octet-stream"}};
    for (std::string_view name : {"Fenec-Seq", "Fenec-Lineage", "Fenec-Image-Digest"}) {
        image_headers.push_back({name, header_of(name)});  // views into `image`, alive to the end
    }
    const std::string put =
        "/_shard/handoff/" + tenant_ + "/import" + (node_.empty() ? "" : "?node=" + node_);
    std::string why;
    for (const std::string& url : router_.relays().ordered(to_, to_routers_)) {
        server::CallError error;
        auto target = router_.upstream().blocking().connect(
            to_router(url), {.cancel = &router_.relays().stopping()}, error);
        if (!target ||
            !target->send(head_for(url, "PUT", put, image.body, std::nullopt, image_headers),
                          error)) {
            why += (why.empty() ? "" : "; ") + router_.relays().said(url, error.message);
            continue;
        }
        http::ResponseHead got;
        std::string body;
        if (!target->read_head(got, error) ||
            !target->read_body(got.content_length.value_or(0), body, error)) {
            undo(to_, "DELETE", "import");  // it may have installed
            undo(from_, "POST", "undo-export");
            return out_of_reach(to_, "import", router_.relays().said(url, error.message));
        }
        if (standby_refusal(got.status, body)) {
            why += (why.empty() ? "" : "; ") + url + " is a standby";
            continue;  // the image is still here: the next router is sent it
        }
        return import_answered(url, got.status, std::move(body));
    }
    undo(from_, "POST", "undo-export");
    return out_of_reach(to_, "import", to_routers_.empty() ? "no router" : why);
}

std::optional<Response> RegionMove::import_here(const ImageHeaders& image, std::string_view body) {
    if (test_hooks::fail_handoff_step("import")) {
        return Router::error(500, "the test hook failed the import of `" + tenant_ + "`");
    }
    auto maps = router_.directory().maps();
    const NodeRow* node = nullptr;
    if (!node_.empty()) {
        node = &maps->nodes.at(node_);  // checked as the move was read
    } else {
        auto placed = place_tenant(*maps, to_, {}, [&](const NodeRow& n) {
            return router_.placement_bytes(n, a_.request_id);
        });
        if (const NodeRow* const* p = std::get_if<const NodeRow*>(&placed)) {
            node = *p;
        } else {
            const bool none = std::get<NoTenantPlace>(placed) == NoTenantPlace::none_answered;
            Response r = Router::error(none ? 503 : 409,
                                       "no node of region `" + to_ + "` to take `" + tenant_ + "`");
            if (none) r.header("Retry-After", "1");
            return r;
        }
    }
    TenantRow row = row_;  // its quota and history kept; the home `@<from>` becomes its node
    row.node = node->name;
    row.state = "importing";  // no grant names it until the home statement (step 4)
    row.moving_to.clear();
    row.moving_from = "@" + from_;  // what a settling asks, should this router stop meanwhile
    row.lineage = std::string(image.lineage);
    // The row before the copy, as a region's import writes it (shard/handoff.cc): stopped once
    // the image is installed, this router's settling finds the row and deletes the copy.
    std::optional<InstallingMark> installing(std::in_place, router_.handoffs(), tenant_);
    if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
        return Router::error(500,
                             "the directory could not record `" + tenant_ + "`: " + st.to_string());
    }
    test_hooks::stall_after_move_step("import-recorded");  // the row, not yet the copy
    if (auto refused = install_image(router_, *node, tenant_, a_.request_id, image, body)) {
        not_installed(router_, *node, tenant_, a_.request_id, row_);
        refused->body.pop_back();
        refused->body += ",\"step\":\"import\"}";
        return refused;
    }
    installing.reset();
    test_hooks::stall_after_move_step("import-installed");  // the row and the copy, not the home
    imported_on_ = node->name;
    test_hooks::stall_after_move_step("imported");  // recorded, not yet the home
    const CopyOutcome copy = router_.copies().created(tenant_, a_.request_id);
    imported_ = import_answer(tenant_, *node, image.seq, copy);
    return std::nullopt;
}

std::optional<Response> RegionMove::import_answered(const std::string& url, int status,
                                                    std::string body) {
    if (status != 201) {
        undo(from_, "POST", "undo-export");
        return refused_by(to_, "import", {true, status, body, ""});
    }
    router_.relays().answered(to_, url);
    imported_ = std::move(body);
    return std::nullopt;
}

RegionAnswer RegionMove::here(std::string_view method, const std::string& step) {
    auto said = [](const Response& r) { return RegionAnswer{true, r.status, r.body, ""}; };
    auto ok = [&] { return RegionAnswer{true, 200, "{}", ""}; };
    auto failed = [&](const std::string& why) {
        return said(Router::error(500, "the global directory: " + why));
    };
    auto maps = router_.directory().maps();
    auto node_of = [&](const std::string& name) -> std::optional<NodeRow> {
        auto n = maps->nodes.find(name);
        if (n == maps->nodes.end()) return std::nullopt;
        return n->second;
    };
    auto thaw = [&](const NodeRow& node) {
        const server::CallResult w =
            router_.upstream().admin(node, {.method = "POST",
                                            .target = "/_admin/tenants/" + tenant_ + "/thaw",
                                            .request_id = a_.request_id,
                                            .resendable = true});
        return w.answer && w.answer->status == 200;
    };
    if (step == "undo-export" || step == "undo-release") {
        // The row as it was, on its node, thawed; its node granted with it again. A thaw not
        // answered 200 leaves the row `moving` to `@<to>` rather than `active` over a frozen
        // copy: the settling thread asks the thaw again each round (TwoLevel::settle).
        const std::optional<NodeRow> node = node_of(row_.node);
        TenantRow back = row_;
        if (!node || !thaw(*node)) {
            back.state = "moving";
            back.moving_to = "@" + to_;
            log_line("move of `" + tenant_ + "` to region `" + to_ + "` undone, but `" +
                     row_.node + "` did not thaw it: left moving, the thaw asked again each "
                     "settling round");
        }
        engine::Status st = router_.directory().put_tenant(back);
        router_.cluster().changed(row_.node);
        if (!st.is_ok()) return failed(st.to_string());
        router_.standby().wait_for_standbys(
            standby_wait_ms_max);  // as a region's undo (handoff.cc)
        return ok();
    }
    if (step == "release") {
        // §11.7 step 3, and step 4 with it: the home `@<to>`, one statement, synced; the source
        // node granted at once without the tenant; the frozen copy stays until the drop.
        if (test_hooks::fail_handoff_step("release") || test_hooks::fail_handoff_step("home")) {
            return failed("the test hook failed the release");
        }
        TenantRow moved = row_;
        moved.node = "@" + to_;
        moved.state = "active";
        moved.moving_to.clear();
        if (engine::Status st = router_.directory().put_tenant(moved); !st.is_ok()) {
            return failed(st.to_string());
        }
        router_.cluster().changed(row_.node);
        // Before the target is activated (step 5): a standby promoted after it, its row still
        // `moving`, would find the import not yet active and thaw the source beside it.
        router_.standby().wait_for_standbys(standby_wait_ms_max);
        return ok();
    }
    if (step == "drop") {
        // The frozen source copy and its copies deleted; the row, the tenant's home, stays.
        if (test_hooks::fail_handoff_step("drop")) return failed("the test hook failed the drop");
        bool removed = false;
        if (auto node = node_of(row_.node)) {
            NodeAnswer del = router_.node_calls().remove(*node, tenant_, a_.request_id);
            removed = del.gone();
            if (!removed) return said(Router::error(502, del.said(*node)));
        }
        router_.copies().left(row_, *maps, a_.request_id);
        return {true, 200, removed ? "{\"source_removed\":true}" : "{\"source_removed\":false}",
                ""};
    }
    if (step == "import" && method == "DELETE") {
        // The import undone: its copy and their copies deleted, the home `@<from>` back.
        auto t = maps->tenants.find(tenant_);
        if (auto node = node_of(imported_on_)) {
            NodeAnswer del = router_.node_calls().remove(*node, tenant_, a_.request_id);
            if (!del.gone()) return said(Router::error(502, del.said(*node)));
        }
        if (t != maps->tenants.end() && t->second.node == imported_on_) {
            router_.copies().left(t->second, *maps, a_.request_id);
        }
        engine::Status st = router_.directory().put_tenant(row_);
        if (!imported_on_.empty()) router_.cluster().changed(imported_on_);
        return st.is_ok() ? RegionAnswer{true, 204, "", ""} : failed(st.to_string());
    }
    if (step == "activate") return said(activate_import(router_, tenant_));
    return failed("no step `" + step + "` for a region it keeps");
}

Response RegionMove::answer(bool removed, bool activated, uint64_t ms) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view node, replica, unreplicated;
    bool same_zone = false;
    if (parser.parse(imported_).get(doc) || doc.type() != simdjson::dom::element_type::OBJECT) {
        imported_ = "{}";  // the target's 201 said nothing more: nothing passed on
        if (parser.parse(imported_).get(doc)) return Router::error(500, "unreachable");
    }
    if (doc["node"].get_string().get(node)) node = "";
    const bool has_replica = !doc["replica_on"].get_string().get(replica);
    const bool has_none = !doc["unreplicated"].get_string().get(unreplicated);
    if (doc["same_zone"].get_bool().get(same_zone)) same_zone = false;
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("from");
    w.string("@" + from_);
    w.key("to");
    w.string(node);
    w.key("region");
    w.string(to_);
    w.key("bytes");
    w.uint64(bytes_);
    w.key("ms");
    w.uint64(ms);
    w.key("source_removed");
    w.boolean(removed);
    w.key("activated");  // false: pending, the target region's router settles it
    w.boolean(activated);
    if (has_replica) {
        w.key("replica_on");
        w.string(replica);
        if (same_zone) {
            w.key("same_zone");
            w.boolean(true);
        }
    }
    if (has_none) {
        w.key("unreplicated");
        w.string(unreplicated);
    }
    w.end_object();
    return r;
}

}  // namespace

std::optional<http::Response> serve_region_move(Router& router, const server::Request& request,
                                                const Router::Answering& a,
                                                const std::string& tenant) {
    return RegionMove(router, request, a, tenant).run();
}

}  // namespace fenec::shard
