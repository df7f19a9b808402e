// shard/test_hooks.h: the router's test hook, the one way a test reaches into fenec-shard's
// timing: FENEC_TEST_MOVE_STALL=<step>:<ms> in its environment holds every move `ms` after the
// step named (`marked`, `frozen`, `installed`, `flipped`; across regions `exported`,
// `import-recorded`, `import-installed`, `imported`, `releasing`, `released`), so a test can write
// during the freeze or stop the router mid-move; FENEC_TEST_FEED_STALL=<ms> holds each change of
// the directory's feed `ms` before it is sent to a standby, so a test can see a move wait for its
// standbys; FENEC_TEST_NO_CUT=1 has a failover cut nothing out to the old node (§9.10 off), so
// `make drill` can time the same failover with its requests left to `--upstream-timeout`;
// FENEC_TEST_TOKENS_STALL=<ms> holds a standby's first ask for its primary's tokens `ms`, so a
// test can see it wait for them with its directory already there;
// FENEC_TEST_TWO_LEVEL_STALL=<step>:<ms> holds a two-level create or delete on the global router
// `ms` after the step named (`relayed`: the region's router answered, the row not yet written
// `active` or removed), so a test can kill it between its two writes; FENEC_TEST_SETTLE_MS=<ms>
// settles rows left `creating` or `deleting` (§11.4), and a region's router rows left
// `importing` (shard/handoff.h), every `ms` rather than every minute; FENEC_TEST_SETTLE_STALL=<ms>
// holds a region's router's first settling of an `importing` row `ms` with its claim taken, having
// said so on stderr, so a test can meet that claim; FENEC_TEST_PAIR_STALL=<ms> holds a pair's
// recording before it claims each tenant of its node, having said so, so a test can move one
// meanwhile; FENEC_TEST_FORWARD_STALL=<tenant>:<ms> holds each forward of that tenant between its
// lookup in the directory and its record among the requests out, having said so, so a test can
// fail its node over meanwhile; FENEC_TEST_HANDOVER_STALL=<step>:<ms> holds the first hand-over
// of a tenant's copy to its node's standby that reaches the step named (`repair`: a repair about to
// hand it over; `caught-up`: the standby found caught up, its own replica not yet detached), having
// said so, so a test can change the pair meanwhile; FENEC_TEST_REPAIR_STALL=<ms> holds a repair's
// claim of each tenant it looks at `ms`, having said so, so a test can ask for a change of it
// meanwhile (`gate:<path>`: until the file `path` exists, at most a minute);
// FENEC_TEST_PROMOTE_STALL=<ms> holds a standby's promotion `ms` once its directory forked, before
// it settles the moves left behind and starts leasing, having said so, so a test can ask a change
// in between; FENEC_TEST_REPAIR_LOOK_MS=<ms> has a repair's scheduled looks begin `ms` after a
// tenant was left without its copy rather than 10 s, the later ones in proportion, so a test can
// see them go on.
//
// Two implementations, chosen at link time (shard/CMakeLists.txt): test_hooks_off.cc does
// nothing and names no variable; it is the library's default, so fenec-shard and every program
// linking fenec_shard get it. test_hooks_on.cc reads the variable; linked only into
// fenec-shard-hooks, the router the integration tests start. Invariant: a release binary carries
// no hook (test/shard/test_hooks_test.cc checks fenec-shard's bytes).
#pragma once

#include <cstdint>
#include <string_view>

namespace fenec::shard::test_hooks {

// After the move step `step`: sleeps what FENEC_TEST_MOVE_STALL asks for that step.
void stall_after_move_step(std::string_view step);
// Before a change of the directory's feed goes to a standby: sleeps FENEC_TEST_FEED_STALL ms.
void stall_feed_change();
// True when FENEC_TEST_NO_CUT=1: a failover leaves what is out to the old node to time out.
bool skip_failover_cut();
// Before a standby first asks its primary for the nodes' tokens: sleeps FENEC_TEST_TOKENS_STALL ms.
void stall_first_tokens();
// True when FENEC_TEST_HANDOFF_FAIL names `step` (export, import, release, drop, activate): a
// region's router refuses that step of a move across regions 500 before it changes anything (an
// export: once it froze the tenant, undoing that itself); `home` fails the global router's step,
// `home-statement` its answer to a settling's `POST …/home`.
bool fail_handoff_step(std::string_view step);
// After a two-level create's or delete's step `step`: sleeps what FENEC_TEST_TWO_LEVEL_STALL asks.
void stall_after_two_level_step(std::string_view step);
// How often rows left `creating` or `deleting` are settled: FENEC_TEST_SETTLE_MS, else `ms`.
int64_t settle_period_ms(int64_t ms);
// When a repair's scheduled looks begin: FENEC_TEST_REPAIR_LOOK_MS, else `ms` (the later looks
// keep their proportions, RepairSchedule).
int64_t repair_look_ms(int64_t ms);
// Once a process, with the claim of an `importing` row `tenant` taken to settle it: says so on
// stderr and sleeps FENEC_TEST_SETTLE_STALL ms.
void stall_first_settle(std::string_view tenant);
// Before a pair claims `tenant` to give it its copy on the standby: says so on stderr and sleeps
// FENEC_TEST_PAIR_STALL ms.
void stall_pair_tenant(std::string_view tenant);
// Between a forward's lookup and its record (Router::forward_to_node): sleeps what
// FENEC_TEST_FORWARD_STALL asks for `tenant`, once a process.
void stall_forward(std::string_view tenant);
// In a hand-over to a standby (Copies::handed_to_standby, and a repair before it): sleeps what
// FENEC_TEST_HANDOVER_STALL asks for `step`, having said so.
void stall_handover(std::string_view step, std::string_view tenant);
// With a repair's claim of `tenant` taken (Copies::repair_tenant): says so on stderr and sleeps
// FENEC_TEST_REPAIR_STALL ms, or waits for its gate file.
void stall_repair_claim(std::string_view tenant);
// Once a promotion forked the directory (Standby::promote): says so on stderr and sleeps
// FENEC_TEST_PROMOTE_STALL ms.
void stall_promotion();

}  // namespace fenec::shard::test_hooks
