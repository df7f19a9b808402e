// shard/region_move.h: the global router's move of a tenant between two regions, one of them at
// least keeping its own directory (router.md §11.7), `POST /_shard/tenants/<t>/move
// {"region":"us"}` on the router of the global directory for a tenant at home (`@<r>`) in such a
// region, or on a node of its own to such a region. The regions'
// parts are their routers' relay-only steps (shard/handoff.h); the global router calls them in
// order and undoes each where the next fails:
//
//   1 export   source `POST …/export`: claimed, `moving`, frozen, the image answered
//   2 import   target `PUT …/import[?node=]`: the image streamed from the export's answer through
//              the router (a bounded buffer, server/runtime/client.h relay_to), placed, installed,
//              recorded `importing` (no lease names it), replicated
//                                                                  undone by `DELETE …/import`
//   3 release  source `POST …/release`: placed nowhere there        undone by `undo-release`
//   4 home     the global directory's row `@<target>`, one statement, synced
//   5 activate target `POST …/activate`: `active`, its node granted at once; asked up to three
//              times; not taken, the move is answered done with `"activated": false` and logged,
//              and the target region's router activates it itself (shard/handoff.h)
//   6 drop     after the standbys and region routers keeping up were sent step 4 (≤ 1 s), the
//              source's frozen copy and its copies deleted; a failure is logged
//
// Deviation from router.md §11.7 (issue 20), which leases the target at the import: the target is
// leased only after the source was released and the home moved, so no write can land on a copy an
// undo would discard, and no two leases name the tenant at once.
//
// A step 1 that fails leaves nothing to undo (the source undid itself); from step 2 on a failure
// undoes the export (`undo-export`), and from step 3 on the import. A release sent and not
// answered may have run, which no undo of the import may follow: the undo-export asks (it undoes
// the export, or refuses naming `released_to`, and the move goes on); neither heard, the move is
// 503 and the regions settle it (the export lapses, or the target activates its import). A region whose routers none
// took a step (unreachable, or each a standby naming its primary) is 503 `Retry-After: 5`, the
// tenant left where it was, taking writes again; a source that hears nothing after its export
// thaws the tenant itself (shard/handoff.h).
//
// One side kept by the global directory itself (§11.7: "the global router does that side's part
// itself"): out of such a region, the export's node part (shard/handoff.h freeze_and_take_image)
// runs here and the image goes whole to the target's import; the release is the home statement,
// and the drop keeps the row. Into one, the export is read whole and installed here
// (install_image), the row `importing` in place of `@<source>`; the home statement is its
// activation (activate_import).
#pragma once

#include <optional>
#include <string>

#include "server/runtime/http.h"
#include "shard/router.h"

namespace fenec::shard {

// The answer of a move of `tenant` that crosses the two levels (the tenant at home in a region
// keeping its own directory, or `region` naming one), or nullopt for a move within this
// router's directory (shard/move.h's). On an API worker: it blocks on the regions' routers.
std::optional<http::Response> serve_region_move(Router& router, const server::Request& request,
                                                const Router::Answering& a,
                                                const std::string& tenant);

}  // namespace fenec::shard
