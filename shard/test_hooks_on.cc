// shard/test_hooks_on.cc: the router's test hooks that act (shard/test_hooks.h), linked only into
// fenec-shard-hooks, the router the integration tests start.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "shard/log_line.h"
#include "shard/test_hooks.h"

namespace fenec::shard::test_hooks {

namespace {

// `<step>:<ms>` in variable `name`: sleeps `ms` when `step` is the one named.
void stall_at(const char* name, std::string_view step) {
    const char* env = std::getenv(name);
    if (!env) return;
    std::string_view v(env);
    const size_t colon = v.find(':');
    if (colon == std::string_view::npos || v.substr(0, colon) != step) return;
    const long ms = std::strtol(std::string(v.substr(colon + 1)).c_str(), nullptr, 10);
    if (ms <= 0) return;
    // Said first, in one line, so a test can wait for the stall to have begun.
    log_line("test hook: held after `" + std::string(step) + "` " + std::to_string(ms) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

void stall_after_move_step(std::string_view step) { stall_at("FENEC_TEST_MOVE_STALL", step); }

void stall_after_two_level_step(std::string_view step) {
    stall_at("FENEC_TEST_TWO_LEVEL_STALL", step);
}

int64_t settle_period_ms(int64_t ms) {
    const char* env = std::getenv("FENEC_TEST_SETTLE_MS");
    if (!env) return ms;
    const long v = std::strtol(env, nullptr, 10);
    return v > 0 ? v : ms;
}

int64_t repair_look_ms(int64_t ms) {
    const char* env = std::getenv("FENEC_TEST_REPAIR_LOOK_MS");
    if (!env) return ms;
    const long v = std::strtol(env, nullptr, 10);
    return v > 0 ? v : ms;
}

void stall_feed_change() {
    const char* env = std::getenv("FENEC_TEST_FEED_STALL");
    if (!env) return;
    const long ms = std::strtol(env, nullptr, 10);
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void stall_promotion() {
    const char* env = std::getenv("FENEC_TEST_PROMOTE_STALL");
    if (!env) return;
    const long ms = std::strtol(env, nullptr, 10);
    if (ms <= 0) return;
    log_line("test hook: the promotion held " + std::to_string(ms) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void stall_first_tokens() {
    const char* env = std::getenv("FENEC_TEST_TOKENS_STALL");
    if (!env) return;
    const long ms = std::strtol(env, nullptr, 10);
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool fail_handoff_step(std::string_view step) {
    const char* env = std::getenv("FENEC_TEST_HANDOFF_FAIL");
    return env && std::string_view(env) == step;
}

void stall_first_settle(std::string_view tenant) {
    static std::atomic<bool> stalled{false};
    const char* env = std::getenv("FENEC_TEST_SETTLE_STALL");
    if (!env || stalled.exchange(true)) return;
    const long ms = std::strtol(env, nullptr, 10);
    if (ms <= 0) return;
    // One line through the router's log, which writes whole lines: pieces written straight to
    // stderr interleaved with a lease thread's line, and the test reading it missed it.
    log_line("test hook: settling `" + std::string(tenant) + "` held " + std::to_string(ms) +
             " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool skip_failover_cut() {
    const char* env = std::getenv("FENEC_TEST_NO_CUT");
    return env && std::string_view(env) == "1";
}

void stall_pair_tenant(std::string_view tenant) {
    const char* env = std::getenv("FENEC_TEST_PAIR_STALL");
    if (!env) return;
    const long ms = std::strtol(env, nullptr, 10);
    if (ms <= 0) return;
    log_line("test hook: pairing `" + std::string(tenant) + "` held " + std::to_string(ms) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void stall_repair_claim(std::string_view tenant) {
    const char* env = std::getenv("FENEC_TEST_REPAIR_STALL");
    if (!env) return;
    const std::string_view v(env);
    if (v.starts_with("gate:")) {
        // Held until the test makes the file (at most a minute): it lets go when the test has
        // put what it needs in place, not after a time it guessed.
        const std::string gate(v.substr(5));
        log_line("test hook: repair holding `" + std::string(tenant) + "` until " + gate);
        const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(1);
        while (::access(gate.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return;
    }
    const long ms = std::strtol(env, nullptr, 10);
    if (ms <= 0) return;
    log_line("test hook: repair holding `" + std::string(tenant) + "` " + std::to_string(ms) +
             " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void stall_forward(std::string_view tenant) {
    const char* env = std::getenv("FENEC_TEST_FORWARD_STALL");
    if (!env) return;
    const std::string_view v(env);
    const size_t colon = v.find(':');
    if (colon == std::string_view::npos || v.substr(0, colon) != tenant) return;
    static std::atomic<bool> stalled{false};
    if (stalled.exchange(true)) return;
    const long ms = std::strtol(std::string(v.substr(colon + 1)).c_str(), nullptr, 10);
    if (ms <= 0) return;
    log_line("test hook: forward of `" + std::string(tenant) + "` held " + std::to_string(ms) +
             " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void stall_handover(std::string_view step, std::string_view tenant) {
    const char* env = std::getenv("FENEC_TEST_HANDOVER_STALL");
    if (!env) return;
    const std::string_view v(env);
    const size_t colon = v.find(':');
    if (colon == std::string_view::npos || v.substr(0, colon) != step) return;
    const long ms = std::strtol(std::string(v.substr(colon + 1)).c_str(), nullptr, 10);
    if (ms <= 0) return;
    log_line("test hook: handing `" + std::string(tenant) + "` over held after `" +
             std::string(step) + "` " + std::to_string(ms) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace fenec::shard::test_hooks
