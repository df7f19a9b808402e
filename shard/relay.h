// shard/relay.h: a `/_shard/` request relayed to another level's router (router.md §11.4, §11.5):
// the global router to a region's routers, a region's router to the global one (--global's URLs),
// or the global router asking a region's router its half of a create or a delete.
//
// Rules kept here, once:
// - the routers are tried in their order (a `regions` row's, or --global's), the one that answered
//   last first; one that cannot be reached, or a standby answering that it follows another (§6.1's
//   409 naming its primary), passes the relay to the next; none taking it is the caller's 503
//   `Retry-After: 5` naming the scope (none_took); a read a settling decides on goes with
//   `Fenec-Read: primary`, which a standby refuses the same way, so only a primary answers it;
// - each relay carries `Authorization: Bearer <--token>`, the request id, and `Fenec-Relay:
//   <client address> <mark>` (server/runtime/mark.h), the mark over that id, the method and the
//   target, so the router it reaches relays it no further; among routers without --token, `Via`
//   says a router sent it (forward.cc's data relays do the same);
// - each relay goes on a fresh connection of its own (none pooled: a change cannot be resent, so it
//   is never risked on a connection the far end may have closed meanwhile; relays are an
//   operator's few); a change sent whole whose connection ended unanswered is `may_have_run`,
//   never passed to the next router.
//
// Threads: relay() blocks (the runtime's blocking client), so it runs on an API worker or a
// settling thread, never on a loop. Thread-safe: the routers that answered last are kept under a
// mutex.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/runtime/cancel.h"
#include "server/runtime/client.h"
#include "server/runtime/http.h"
#include "server/runtime/http_server.h"

namespace fenec::shard {

// A relayed answer's body in this router's hands: a `/_shard/` answer about one tenant, node or
// region is a few hundred bytes; past this another router is answering something it should not.
inline constexpr uint64_t relay_answer_bytes_max = 1 << 20;
// §11.4 [ours]: what a client is told to wait before asking again when no router of the scope
// took a change; a region out of reach is a partition, not a blip.
inline constexpr std::string_view relay_retry_after_s = "5";

// Where a relay goes: the routers keeping one scope's directory, its primary first.
struct RelayTo {
    std::string scope;                 // "global", or the region
    std::vector<std::string> routers;  // http://host:port
};

// The request relayed.
struct RelayCall {
    std::string_view method{};
    std::string_view target{};      // origin form, as the mark covers it
    std::string_view body{};        // JSON, or empty
    std::string_view client{};      // the address the first router saw
    std::string_view request_id{};  // X-Request-Id, which the mark covers
    // A read a decision rests on (a settling's): sent with `Fenec-Read: primary`, so a standby,
    // whose copy may lag its primary's by a feed it has not been sent, refuses it naming its
    // primary and the next router is asked, as for a change.
    bool from_primary = false;
};

struct Relayed {
    bool answered = false;  // a router took it: its answer below
    int status = 0;
    std::string body;
    std::optional<std::string> retry_after;  // the answer's Retry-After
    std::string router;                      // the router that answered, or the last asked
    // Not answered: sent whole to `router`, whose connection ended or timed out before an
    // answer, so it may have run there.
    bool may_have_run = false;
    std::string why;  // not answered: what each router tried said, for the answer and logs
};

class Relays {
  public:
    // `token`: the routers' shared --token (nullopt: routers without one, marked by `Via`);
    // `timeout_ms`: --upstream-timeout, each connect, read or write.
    Relays(std::optional<std::string> token, uint64_t timeout_ms);

    // Sends `call` to `to`'s routers by the rules above. Blocks.
    Relayed relay(const RelayTo& to, const RelayCall& call);

    // `routers` with the one of `scope` that answered last first, the rest in their order.
    std::vector<std::string> ordered(const std::string& scope,
                                     const std::vector<std::string>& routers) const;
    // `url` answered for `scope`: asked first next time.
    void answered(const std::string& scope, const std::string& url);
    // The router stops (Router::drain, past its 10 s): each relay still out ends at once, as
    // unanswered (a change sent whole may have run), and any asked after fails at once.
    void stop_calls() { stop_.cancel(); }
    // What stop_calls cancels, for a caller that opens its own connection to another router (a
    // move's export and import, a region's hand-over): BlockingClient::connect's or call's
    // Until::cancel. Outlives every call (the Relays lives as long as the router).
    const server::Cancel& stopping() const { return stop_; }
    // What a call to `to` (a router's url, or its name) cut by stop_calls says.
    static std::string stopped_call(std::string_view to);
    // What a failed call to the router at `url` says: stopped_call where stop_calls cut it; else
    // `url` and the call's own message.
    std::string said(const std::string& url, std::string_view message) const;

  private:
    server::BlockingClient client_;  // no pool
    server::Cancel stop_;
    const std::optional<std::string> token_;
    const uint64_t timeout_ms_;
    mutable std::mutex mu_;
    std::map<std::string, std::string, std::less<>> last_;  // scope → the router that answered
};

// §11.4: no router of `to` took the change: 503 `Retry-After: 5`, naming the region (or the
// global router) and what its routers said, `outcome: unknown` where it may have run.
http::Response none_took(const RelayTo& to, const Relayed& r);
// A relayed answer passed back as the client's: status, body, Retry-After.
http::Response passed_on(const Relayed& r);

// What another router's JSON answer says for a relay (parse_relay_answer): the primary a standby
// names when it refuses a change (§6.1), and whether a create was refused because the tenant
// exists there (`"exists":true`, §11.4's name kept). Anything else, or a body that is not a JSON
// object, reads as neither.
struct RelayAnswer {
    std::string primary;
    bool exists = false;
    bool superseded = false;  // a router promoted over (Router::superseded): it took nothing
};
RelayAnswer parse_relay_answer(std::string_view body);

// Another router's word on one tenant (`GET /_shard/tenants/<t>`), asked of a primary alone
// (`Fenec-Read: primary`): what the settlings decide on. `said`: answered 200 naming its node and
// state; otherwise `relayed` tells what came back (a 404, another status, no answer).
struct TenantWord {
    Relayed relayed;
    bool said = false;
    std::string node, state;
    std::string region;  // the region of its node, where the answer names one
};
TenantWord ask_tenant(Relays& relays, const RelayTo& to, std::string_view tenant,
                      std::string_view client, std::string_view request_id);

// R25, §11.5: the client a `/_shard/` or `/t/` request was relayed for, or "" for a request from a
// client: the client named by a valid `Fenec-Relay` mark under `token` (over `request_id`, the
// method and the target); among routers without a token, the relaying router's address when
// `Via` names fenec-shard. A mark that does not verify counts as none: the request is direct.
std::string relayed_for(const server::Request& request, std::string_view request_id,
                        const std::optional<std::string>& token);

// R25: what a router relaying without a token says it is in `Via` (RFC 9110 §7.6.3, there for
// finding loops), which a client can only set to keep its own request from being relayed.
inline constexpr std::string_view relay_via = "1.1 fenec-shard";
// A `/_shard/` read only a primary answers (router.md §6.1 [ours]): `Fenec-Read: primary`.
inline constexpr std::string_view read_header = "Fenec-Read";
inline constexpr std::string_view read_from_primary = "primary";
// On every refusal of a router promoted over (Router::superseded), with `"superseded":true` in
// its body: refused unrun, so a relay or a forward across the levels asks the next router.
inline constexpr std::string_view superseded_header = "Fenec-Superseded";

}  // namespace fenec::shard
