// fuzz/region_body_fuzz.cc: fuzz_region_body, bytes as what the router reads of the two-level
// directory's API (router.md §11.3, §11.4, §11.7, §11.9; shard/regions.h, shard/relay.h,
// shard/whose.h, shard/handoff.h, shard/adopt.h): the first byte picks the reader, '0' the body
// of `PUT /_shard/regions/<r>` (parse_region_routers), '2' another router's answer to a relayed
// change (parse_relay_answer), '3' a change's body as §11.4's table reads its `region`
// (region_named), '4' the body of a handoff's export or release (parse_handoff_to), '5' the body
// of a relayed `POST /_shard/adopt` (parse_adopt_body), anything else another router's answer to
// `GET /_health` (parse_router_health); the rest is the input.
// Seeds: fuzz/corpus/region_body/, bodies as docs/http-router.md shows them, /_health answers
// of a primary, a standby and a region's router, a standby's and an existing tenant's 409s, and
// adoptions as the global router writes them.
//
// Invariants (a broken one traps, so libFuzzer keeps the input):
//   - routers: either URLs and no error, or an error and no URL; 1 to region_routers_max URLs,
//     each http://host:port as replica_addr reads it, none twice;
//   - handoff: a valid region name and no error, or an error and no region;
//   - adoptions: either rows or an error, never both; rows read back are written (adopt_body)
//     and read again to the same rows, each name valid and each node in the body's region;
//   - every reader gives the same answer read twice (no state kept between calls).
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>

#include "shard/adopt.h"
#include "shard/directory.h"
#include "shard/handoff.h"
#include "shard/options.h"
#include "shard/regions.h"
#include "shard/relay.h"
#include "shard/whose.h"

namespace {

using namespace fenec::shard;

constexpr size_t kInputBytesMax = 64 << 10;

[[noreturn]] void broken(const char* what, const std::string& detail = "") {
    std::fprintf(stderr, "fuzz_region_body: invariant broken: %s %s\n", what, detail.c_str());
    __builtin_trap();
}

void routers(std::string_view body) {
    const RegionRouters got = parse_region_routers(body);
    if (got.error.empty() == got.urls.empty()) broken("neither or both of urls and error");
    if (got.urls.size() > region_routers_max) broken("more routers than the bound");
    std::set<std::string> seen;
    for (const std::string& url : got.urls) {
        if (replica_addr(url).empty()) broken("a URL that is not http://host:port", url);
        if (!seen.insert(url).second) broken("a URL taken twice", url);
    }
    const RegionRouters again = parse_region_routers(body);
    if (again.urls != got.urls || again.error != got.error) broken("a second read differs");
}

void adoption(std::string_view body) {
    const ParsedRegionRows got = parse_adopt_body(body);
    const RegionRows& rows = got.rows;
    if (!got.error.empty()) {
        if (!rows.region.empty() || !rows.nodes.empty() || !rows.tenants.empty()) {
            broken("rows beside an error", got.error);
        }
    } else {
        if (!valid_name(rows.region)) broken("an invalid region", rows.region);
        for (const NodeRow& n : rows.nodes) {
            if (!valid_name(n.name) || n.region != rows.region) broken("a node out of place", n.name);
        }
        for (const TenantRow& t : rows.tenants) {
            if (!valid_name(t.name) || t.state != "active") broken("a tenant out of place", t.name);
        }
        const std::string written = adopt_body(rows);
        const ParsedRegionRows back = parse_adopt_body(written);
        if (!back.error.empty()) broken("rows written are refused read back", back.error);
        if (adopt_body(back.rows) != written) broken("rows do not survive a round trip", written);
    }
    const ParsedRegionRows again = parse_adopt_body(body);
    if (again.error != got.error || adopt_body(again.rows) != adopt_body(rows)) {
        broken("a second read differs");
    }
}

void health(std::string_view body) {
    const std::optional<RouterSelf> got = parse_router_health(body);
    const std::optional<RouterSelf> again = parse_router_health(body);
    if (got.has_value() != again.has_value() ||
        (got && (got->role != again->role || got->scope != again->scope))) {
        broken("a second read differs");
    }
}

void relay_answer(std::string_view body) {
    const RelayAnswer got = parse_relay_answer(body);
    const RelayAnswer again = parse_relay_answer(body);
    if (got.primary != again.primary || got.exists != again.exists) broken("a second read differs");
}

void region_of_change(std::string_view body) {
    const std::optional<std::string> got = region_named(body);
    if (got != region_named(body)) broken("a second read differs");
    if (got && got->size() > body.size()) broken("a region longer than the body");
}

void handoff_to(std::string_view body) {
    const HandoffTo got = parse_handoff_to(body);
    if (got.error.empty() == got.region.empty()) broken("neither or both of region and error");
    if (!got.region.empty() && !valid_name(got.region)) broken("not a region name", got.region);
    const HandoffTo again = parse_handoff_to(body);
    if (again.region != got.region || again.error != got.error) broken("a second read differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > kInputBytesMax) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] == '0') {
        routers(in);
    } else if (data[0] == '2') {
        relay_answer(in);
    } else if (data[0] == '3') {
        region_of_change(in);
    } else if (data[0] == '4') {
        handoff_to(in);
    } else if (data[0] == '5') {
        adoption(in);
    } else {
        health(in);
    }
    return 0;
}
