// shard/move.h: moving a tenant between nodes within one directory (router.md §7.1–§7.4, seed
// 000's five steps): `POST /_shard/tenants/<t>/move` and the settling of moves a stopped router
// left behind, as it starts. A move names its target node (`to`), a region whose node with the
// fewest bytes takes the tenant (`region`, as a create picks one), or both, which must agree; a
// target in another region than the tenant's must be named with its region (§7.1, §11.1). The
// answer's `region` is the tenant's now. A move across two regions keeping their own directories
// (§11.7) is the global router's, step by step through the regions' routers: shard/region_move.h
// (the global side), shard/handoff.h (each region's side); api.cc sends it there before this.
//
// The steps, each before the next: claim, and a replica of the tenant's own on the target
// detached; the row marked `moving` (synced, still routed to the source); the source frozen; its
// image streamed from the source's GET …/file into the target's PUT …/file through a bounded
// buffer (shard/move_image.h: at most relay_buffer_bytes of it in the router's hands at once),
// the Fenec-* headers passed along and the answers checked against them; the recorded quota sent
// to the target; the flip, one statement, synced; the copies moved (the pairs', and the own
// replica re-pointed where it still fits, else placed again: in the target's region, so a move
// across regions leaves no copy in the region it left); the source copy deleted. A failure
// before the flip thaws the source and puts the row back; a copy's failure after it is answered
// as `unreplicated`, never as the move's.
#pragma once

#include <set>
#include <string>

#include "server/runtime/http.h"
#include "shard/router.h"

namespace fenec::shard {

// §7: the move of `tenant` the request asks for; on an API worker (it waits on both nodes and
// on the directory's fsync). Counts the move (fenec_router_moves_total) once begun.
http::Response serve_move(Router& router, const server::Request& request,
                          const Router::Answering& a, const std::string& tenant);

// Whose rows a settling reads. `own`: rows this directory's line of starts marked itself: one
// still `moving` was never flipped, since the flip is written, synced, before the target is
// granted anything. `inherited`: a standby's copy as it is promoted, whose rows may have been
// marked by an old primary that flipped a move and had writes acknowledged on its target while
// the copy was behind (§7.2 step 10 waits for the standbys a second at most): the target is
// asked. `by_row`: a start's, each row by the term its move marked it under
// (TenantRow::moving_term): own where that is the directory's term now (or the directory was
// never promoted), inherited where an older term's router marked it, or a row marked before the
// field was in a directory promoted since.
enum class MoveRows { own, inherited, by_row };

// §2.3 step 4, §7.3: as the router starts, each tenant left `moving` has its source thawed (under
// the stopped move's freeze id, TenantRow::moving_freeze), so it takes writes where it is; it
// stays `moving` (and routed to the source) until moved again, but for a move to another region's
// directory (`@<r>`), whose release never ran: its row goes back `active`, which the target
// region's router reads to delete its import. One stderr line each. Never fails the start, nor
// waits on a timeout a tenant: each node is given a second (settle_ask_bound), once a pass. A
// source that does not answer: a move of this router's own term has its row put back `active`
// with the thaw owed (Directory::put_tenant with an OwedThaw, paid as an undone move's: Copies);
// an inherited one is left `moving` and settled again each round; one across regions is asked
// again each settling round. A move within the directory
// whose target holds the tenant past its source (or whose source is gone, deleted after the flip)
// went through: routed to the target. An inherited one whose target does not answer is left
// frozen on its source, and settled again each round until it does (Router::keep_settling_move).
void settle_moves(Router& router, MoveRows rows);
// One such tenant, `t` its row: also the settling, every period, of a row still `moving` to
// `@<r>` with no move holding it (its source did not answer the thaw at start), and of an
// inherited one left for its silent target. `silent`, when given, holds the nodes that said
// nothing this pass (not asked again in it), and gains those that say nothing now.
void settle_move(Router& router, const std::string& name, const TenantRow& t, MoveRows rows,
                 std::set<std::string>* silent = nullptr);
// The inherited moves left for their silent target, settled again, each under its claim (one an
// operation holds is kept for the next round): the settling thread's, each round, on a router
// that leads.
void settle_moves_left(Router& router);

}  // namespace fenec::shard
