// shard/test_hooks_off.cc: the router's test hook in a release (shard/test_hooks.h): none. A move
// never waits on its environment, and nothing here names the hook's variable.
#include "shard/test_hooks.h"

namespace fenec::shard::test_hooks {

void stall_after_move_step(std::string_view) {}
void stall_feed_change() {}
bool skip_failover_cut() { return false; }
void stall_first_tokens() {}
void stall_promotion() {}
bool fail_handoff_step(std::string_view) { return false; }
void stall_after_two_level_step(std::string_view) {}
int64_t settle_period_ms(int64_t ms) { return ms; }
int64_t repair_look_ms(int64_t ms) { return ms; }
void stall_first_settle(std::string_view) {}
void stall_pair_tenant(std::string_view) {}
void stall_forward(std::string_view) {}
void stall_handover(std::string_view, std::string_view) {}
void stall_repair_claim(std::string_view) {}

}  // namespace fenec::shard::test_hooks
