// shard/whose.h: whose a `/_shard/` change is (router.md §11.4), decided in one place from one
// table, so every change a router takes is either its own or relayed, once, to the router that
// owns it.
//
// - A node added, changed or removed, or a pair: on a region's router, here, or the region its
//   body names (a node this directory keeps is here whatever it names: the API refuses it); on
//   the global router, the region its body names where that one keeps its own directory, else
//   here.
// - A failover by hand: here, on either.
// - A tenant's quota (read too): here on a region's router; on the global router, the tenant's
//   home region (`@<r>`).
// - A move: on a region's router, here for a tenant this directory places, else (another
//   region's, or one naming another region) the global router; on the global router, the
//   tenant's home region, or here for a move naming another region.
// - A repair (`POST /_shard/replicas`): here on a region's router; the region its body names on
//   the global router.
// - A create or a delete: the global router, from a region's router (relayed back from it: here);
//   here on the global router (in two levels where the region keeps its own).
// - `regions` rows: the global router's.
//
// A region "keeping its own directory" is one with a `regions` row in the global directory (the
// global router's own, or a region's router's copy of it). Reads are always here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/runtime/http.h"
#include "shard/directory.h"
#include "shard/relay.h"
#include "shard/routes.h"

namespace fenec::shard {

// A change as the API reads it before it runs.
struct ChangeAsked {
    ShardRouteId route;
    http::Method method;
    std::string_view name;  // the node or tenant the path names, "" for none
    std::string_view body;
    bool relayed = false;  // carried a valid relay mark (§11.5)
};

// What this router is: its own directory's maps, its copy of the global one (a region's router;
// nullptr on the global router), and the --global URLs (empty on the global router).
struct ChangeContext {
    const DirectoryMaps& own;
    const DirectoryMaps* global_copy;
    std::vector<std::string> global_routers;
};

struct Whose {
    bool here = true;
    RelayTo to;  // when not here: the routers owning it
};

Whose whose_change(const ChangeContext& at, const ChangeAsked& change);

// The `region` member of a JSON object body: nullopt when the body is not an object, has none,
// or has one that is not a string (the API's own check answers that 400).
std::optional<std::string> region_named(std::string_view body);

// §11.4: a relayed change that is not this router's either, refused 409 naming the router that
// owns it (`owner`) and its scope (`region`).
http::Response refused_relayed(const Whose& whose);

}  // namespace fenec::shard
