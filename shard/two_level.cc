// shard/two_level.cc: creates and deletes in two levels, and their settling (shard/two_level.h,
// router.md §11.4), on the global router.
#include "shard/two_level.h"

#include <simdjson.h>

#include <chrono>

#include "json/writer.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/handoff.h"
#include "shard/log_line.h"
#include "shard/move.h"
#include "shard/move_image.h"
#include "shard/node_calls.h"
#include "shard/router.h"
#include "shard/standby.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

std::string tenant_target(const std::string& tenant) { return "/_shard/tenants/" + tenant; }

// A 500 for a directory write that failed, naming what it was for.
http::Response not_recorded(const std::string& what, const engine::Status& st) {
    return Router::error(500, "the directory could not record " + what + ": " + st.to_string());
}

// A create's or delete's answer from the region's router: made (or there already: a create
// whose answer was lost, §11.4), or gone.
bool made(const Relayed& r) {
    return r.status == 201 || r.status == 200 ||
           (r.status == 409 && parse_relay_answer(r.body).exists);
}
bool gone(const Relayed& r) { return r.status == 204 || r.status == 200 || r.status == 404; }

}  // namespace

// After the settling activated `tenant`'s import on a node of this directory's (the home
// statement: its row is the home): the source region, which released it, asked to drop its
// frozen copy and its row `@<here>`, as the move's own step 6 would have (shard/handoff.h); never
// before the home moved, since until then that row passes the tenant's requests on. A drop not
// taken is left for the next import into that region, which drops them first.
void drop_source(Router& router, const RelayTo& source, const std::string& tenant,
                 const Asker& asker) {
    // §11.7 step 5, as the move's own drop: every standby keeping up was sent the new home first
    // (at most a second), or a router whose copy lags would send the tenant's requests on to a
    // source that no longer has it (404: a tenant nowhere, §7.4).
    router.standby().wait_for_standbys(standby_wait_ms_max);
    const Relayed r = router.relays().relay(source, {.method = "POST",
                                                     .target = "/_shard/handoff/" + tenant + "/drop",
                                                     .body = "{}",
                                                     .client = asker.client,
                                                     .request_id = asker.request_id});
    log_line("the import of `" + tenant + "` activated by a settling: region `" + source.scope +
             "` " +
             (r.answered && r.status == 200
                  ? "dropped its frozen copy and row"
                  : "did not drop its frozen copy (" +
                        (r.answered ? std::to_string(r.status) + " " + node_error(r.body) : r.why) +
                        "): its next import of the tenant drops them"));
}

TwoLevel::TwoLevel(Router& router) : router_(router) {}

TwoLevel::~TwoLevel() { stop(); }

http::Response TwoLevel::create(const std::string& tenant, const RelayTo& region,
                                const std::optional<std::string>& node,
                                const std::optional<std::string>& schema, const Asker& asker) {
    TenantRow row;
    row.name = tenant;
    row.node = "@" + region.scope;
    row.state = "creating";
    if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
        return not_recorded("tenant `" + tenant + "`", st);
    }
    // The region places it itself: its nodes are in no directory of this router's.
    std::string body;
    {
        json::Writer w(body);
        w.begin_object();
        if (node) {  // with its region, so a node of another region is refused 409 there
            w.key("node");
            w.string(*node);
            w.key("region");
            w.string(region.scope);
        }
        if (schema) {
            w.key("schema");
            w.raw(*schema);
        }
        w.end_object();
    }
    const std::string target = tenant_target(tenant);
    const Relayed r = router_.relays().relay(region, {.method = "PUT",
                                                      .target = target,
                                                      .body = body,
                                                      .client = asker.client,
                                                      .request_id = asker.request_id});
    test_hooks::stall_after_two_level_step("relayed");
    if (!r.answered || !made(r)) {
        if (r.may_have_run) {
            // It may be there: the row stays `creating` until settle() asks.
            log_line("create of `" + tenant + "` in region `" + region.scope +
                     "` unanswered, left creating: " + r.why);
            return none_took(region, r);
        }
        // Refused, or no router took it: the name is given back.
        if (engine::Status st = router_.directory().remove_tenant(tenant); !st.is_ok()) {
            log_line("tenant `" + tenant + "` left creating: " + st.to_string());
        }
        return r.answered ? passed_on(r) : none_took(region, r);
    }
    row.state = "active";
    if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
        return not_recorded("tenant `" + tenant + "` as active (settled later)", st);
    }
    return passed_on(r);
}

http::Response TwoLevel::remove(const TenantRow& row, const RelayTo& region, const Asker& asker) {
    TenantRow deleting = row;
    deleting.state = "deleting";
    if (engine::Status st = router_.directory().put_tenant(deleting); !st.is_ok()) {
        return not_recorded("tenant `" + row.name + "` as deleting", st);
    }
    const std::string target = tenant_target(row.name);
    const Relayed r = router_.relays().relay(region, {.method = "DELETE",
                                                      .target = target,
                                                      .client = asker.client,
                                                      .request_id = asker.request_id});
    test_hooks::stall_after_two_level_step("relayed");
    if (r.answered && gone(r)) {
        if (engine::Status st = router_.directory().remove_tenant(row.name); !st.is_ok()) {
            return not_recorded("tenant `" + row.name + "` as deleted (settled later)", st);
        }
        http::Response done;
        done.status = 204;
        done.content_type = "";
        return done;
    }
    if (r.may_have_run) {
        log_line("delete of `" + row.name + "` in region `" + region.scope +
                 "` unanswered, left deleting: " + r.why);
        return none_took(region, r);
    }
    // Refused there, or not reached: nothing changed, the row as it was.
    if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
        log_line("tenant `" + row.name + "` left deleting: " + st.to_string());
    }
    return r.answered ? passed_on(r) : none_took(region, r);
}

std::optional<bool> TwoLevel::ask(const RelayTo& region, const std::string& tenant,
                                  const Asker& asker) {
    const std::string target = tenant_target(tenant);
    // A standby's copy may lag its primary by the very create or delete settled: only a primary
    // says.
    const Relayed r = router_.relays().relay(region, {.method = "GET",
                                                      .target = target,
                                                      .client = asker.client,
                                                      .request_id = asker.request_id,
                                                      .from_primary = true});
    if (!r.answered || (r.status != 200 && r.status != 404)) {
        log_line("settling `" + tenant + "`: region `" + region.scope + "` did not say (" +
                 (r.answered ? std::to_string(r.status) : r.why) + ")");
        return std::nullopt;
    }
    return r.status == 200;
}

void TwoLevel::settle_one(const std::string& tenant) {
    TenantClaim claim(router_, tenant, "settle");
    if (!claim.held) return;  // a create or delete in progress settles it itself
    auto maps = router_.directory().maps();
    auto it = maps->tenants.find(tenant);
    if (it == maps->tenants.end()) return;
    const TenantRow row = it->second;
    const std::optional<std::string_view> home = home_region(row.node);
    if (!home || (row.state != "creating" && row.state != "deleting")) return;
    auto routers = maps->regions.find(*home);
    if (routers == maps->regions.end()) {
        log_line("settling `" + tenant + "`: region `" + std::string(*home) +
                 "` has no routers recorded");
        return;
    }
    const RelayTo region{std::string(*home), routers->second};
    const Asker asker{peer_host(router_.options().listen), router_.new_request_id(std::nullopt)};
    const std::optional<bool> there = ask(region, tenant, asker);
    if (!there) return;
    engine::Status st;
    if (row.state == "creating") {
        if (*there) {
            TenantRow active = row;
            active.state = "active";
            st = router_.directory().put_tenant(active);
        } else {
            st = router_.directory().remove_tenant(tenant);
        }
    } else {
        if (*there) {
            const Relayed r = router_.relays().relay(region, {.method = "DELETE",
                                                              .target = tenant_target(tenant),
                                                              .client = asker.client,
                                                              .request_id = asker.request_id});
            if (!r.answered || !gone(r)) {
                log_line("settling `" + tenant + "`: region `" + region.scope +
                         "` did not delete it (" + (r.answered ? std::to_string(r.status) : r.why) +
                         ")");
                return;
            }
        }
        st = router_.directory().remove_tenant(tenant);
    }
    log_line(
        "settled `" + tenant + "` left " + row.state + ": " +
        (*there ? "region `" + region.scope + "` has it" : "not in region `" + region.scope + "`") +
        (st.is_ok() ? "" : "; the directory refused: " + st.to_string()));
}

void TwoLevel::settle_import(const std::string& tenant) {
    TenantClaim claim(router_, tenant, "settle");
    if (!claim.held) return;  // the move that imported it runs still, and settles it itself
    auto maps = router_.directory().maps();
    auto it = maps->tenants.find(tenant);
    if (it == maps->tenants.end() || it->second.state != "importing") return;
    const TenantRow row = it->second;
    auto node = maps->nodes.find(row.node);
    if (node == maps->nodes.end()) {
        log_line("the import of `" + tenant + "` is left importing: its node `" + row.node +
                 "` is not in the directory; move or delete it by hand");
        return;
    }
    const std::string here = "@" + node->second.region;
    const Asker asker{peer_host(router_.options().listen), router_.new_request_id(std::nullopt)};
    auto ask_region = [&](const RelayTo& to) {
        return ask_tenant(router_.relays(), to, tenant, asker.client, asker.request_id);
    };
    std::optional<RelayTo> found;
    TenantWord word;
    if (const std::optional<std::string_view> from = home_region(row.moving_from)) {
        auto routers = maps->regions.find(*from);
        if (routers == maps->regions.end()) {
            log_line("the import of `" + tenant + "` is left importing: the region it came from (`" +
                     row.moving_from + "`) is not recorded as keeping its own directory");
            return;
        }
        found = RelayTo{std::string(*from), routers->second};
        word = ask_region(*found);
    } else {
        // A row written before `moving_from`: the source is the one region that knows the
        // tenant, every other answering that it does not; anything less is left to a person.
        std::string unsure;
        for (const auto& [region, routers] : maps->regions) {
            RelayTo to{region, routers};
            TenantWord asked = ask_region(to);
            const Relayed& got = asked.relayed;
            if (got.answered && got.status == 404) continue;
            if (!got.answered || got.status != 200 || found) {
                unsure = got.answered && got.status == 200
                             ? "more than one region knows it"
                             : "region `" + region + "` did not say (" +
                                   (got.answered ? std::to_string(got.status) : got.why) + ")";
                break;
            }
            found = std::move(to);
            word = std::move(asked);
        }
        if (!found || !unsure.empty()) {
            log_line("the import of `" + tenant + "` is left importing: it names no region it "
                     "came from (written before it did), and " +
                     (found ? unsure : std::string("no region knows it")) +
                     "; move or delete it by hand");
            return;
        }
    }
    const RelayTo& source = *found;
    const Relayed& r = word.relayed;
    const std::string& at = word.node;
    const std::string& state = word.state;
    if (!word.said) {
        log_line("the import of `" + tenant + "` is left importing: region `" + source.scope +
                 "` did not say where it is (" + (r.answered ? std::to_string(r.status) : r.why) +
                 ")");
        return;
    }
    // Released here: activated (the home statement), and the source asked to drop what it kept.
    auto activate_here = [&] {
        const http::Response a = activate_import(router_, tenant);
        log_line("the import of `" + tenant + "` settled: region `" + source.scope +
                 "` released it here" +
                 (a.status == 200 ? "; activated"
                                  : "; not activated (" + std::to_string(a.status) + " " +
                                        node_error(a.body) + ")"));
        if (a.status == 200) drop_source(router_, source, tenant, asker);
    };
    if (at == here) return activate_here();
    if (at.starts_with('@') || (state != "active" && state != "moving")) {
        // A home elsewhere: asked again next round.
        log_line("the import of `" + tenant + "` is left importing: region `" + source.scope +
                 "` has it at `" + at + "` (" + state + ")");
        return;
    }
    if (state == "moving") {
        // Its export not released (or its release still being written): no move of this
        // router's runs on it (it would hold the claim), but a release it sent may yet arrive,
        // and a router promoted there without the export's lapse would wait on this import for
        // good. The source decides, once: its undo-export either undoes the export (a release
        // after it refused), or says it was released here.
        const Relayed undone =
            router_.relays().relay(source, {.method = "POST",
                                            .target = "/_shard/handoff/" + tenant + "/undo-export",
                                            .body = "{}",
                                            .client = asker.client,
                                            .request_id = asker.request_id});
        if (undone.answered && undone.status == 409 && released_to(undone.body) == here) {
            return activate_here();
        }
        // Undone there, or lapsed, or being thawed: the tenant is the source's again. "nothing"
        // (no export there, and no row moving) says nothing of where it is: asked next round.
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        std::string_view how;
        const bool undone_there = undone.answered && undone.status == 200 &&
                                  !parser.parse(undone.body).get(doc) &&
                                  !doc["undone"].get_string().get(how) && how != "nothing";
        if (!undone_there) {
            log_line("the import of `" + tenant + "` is left importing: region `" + source.scope +
                     "` has it moving, and its undo-export was " +
                     (undone.answered ? "answered " + std::to_string(undone.status) + " " +
                                            node_error(undone.body)
                                      : "not answered (" + undone.why + ")"));
            return;
        }
    }
    // On a node of its own there: active, the export lapsed and the release never ran; `moving`,
    // its export undone just now. Either way the import is stale, and nothing activated it.
    NodeAnswer del = router_.node_calls().remove(node->second, tenant, asker.request_id);
    if (!del.gone()) {
        log_line("the import of `" + tenant + "` is left importing: region `" + source.scope +
                 "` holds it, but its copy on `" + row.node + "` was not deleted (" +
                 del.said(node->second) + ")");
        return;
    }
    router_.copies().left(row, *maps, asker.request_id);
    TenantRow home = row;
    home.node = "@" + source.scope;
    home.state = "active";
    home.moving_to.clear();
    home.moving_from.clear();
    engine::Status st = router_.directory().put_tenant(home);
    router_.cluster().changed(row.node);
    log_line("the import of `" + tenant + "` settled: region `" + source.scope +
             "` holds it on a node of its own; the import deleted" +
             (st.is_ok() ? ", its home `" + home.node + "` again"
                         : ", but its home not put back: " + st.to_string()));
}

void TwoLevel::settle() {
    // A standby's rows are its primary's to settle; a superseded router's, the promoted one's.
    if (router_.standby().following() || router_.is_superseded()) return;
    std::vector<std::string> left, imports, moves;
    for (const auto& [name, t] : router_.directory().maps()->tenants) {
        if ((t.state == "creating" || t.state == "deleting") && home_region(t.node)) {
            left.push_back(name);
        } else if (t.state == "importing") {
            imports.push_back(name);
        } else if (t.state == "moving" && home_region(t.moving_to)) {
            moves.push_back(name);
        }
    }
    for (const std::string& tenant : left) settle_one(tenant);
    for (const std::string& tenant : imports) settle_import(tenant);
    // A move out of a region kept here that a stop left `moving` and whose thaw at start was not
    // answered (settle_moves): tried again; a move running holds the claim.
    for (const std::string& tenant : moves) {
        TenantClaim claim(router_, tenant, "settle");
        if (!claim.held) continue;
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(tenant);
        if (it == maps->tenants.end() || it->second.state != "moving" ||
            !home_region(it->second.moving_to)) {
            continue;
        }
        settle_move(router_, tenant, it->second, MoveRows::own);
    }
    settle_moves_left(router_);
}

void TwoLevel::start() {
    const int64_t period_ms = test_hooks::settle_period_ms(settle_period_ms);
    thread_ = std::thread([this, period_ms] {
        std::unique_lock lock(mu_);
        while (!stopping_) {
            lock.unlock();
            settle();
            lock.lock();
            wake_.wait_for(lock, std::chrono::milliseconds(period_ms), [&] { return stopping_; });
        }
    });
}

void TwoLevel::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

}  // namespace fenec::shard
