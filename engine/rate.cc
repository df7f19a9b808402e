// engine/rate.cc: the token bucket behind rows/s and bytes/s (engine.md §9). Refill is computed
// from the last anchor in one expression, and retry_after_ms is checked against that same
// expression, so the wait it names is exactly the wait after which can_begin says yes.
#include "engine/rate.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/clock.h"

namespace fenec::engine {
namespace {

constexpr double kNsPerS = 1e9;
// A retry-after past a day means a rate so low or a debt so large that the exact figure no
// longer matters; bounding it keeps the ns arithmetic far from overflow.
constexpr int64_t kRetryAfterMsMax = 24 * 3600 * 1000;

}  // namespace

RateBucket::RateBucket(double per_s, int64_t now_ns)
    : per_s_(per_s), anchor_level_(per_s), anchor_ns_(now_ns) {
    assert(per_s > 0);
}

double RateBucket::level(int64_t now_ns) const {
    // A steady clock never runs back; if a caller's does, no refill rather than a drain.
    const int64_t elapsed_ns = std::max<int64_t>(now_ns - anchor_ns_, 0);
    // per_s * ns first, then / 1e9: exact for whole rates and whole-ns waits of a few seconds.
    const double refilled = anchor_level_ + per_s_ * static_cast<double>(elapsed_ns) / kNsPerS;
    return std::min(refilled, per_s_);
}

bool RateBucket::can_begin(double need, int64_t now_ns) const { return level(now_ns) >= need; }

int64_t RateBucket::retry_after_ms(double need, int64_t now_ns) const {
    const double deficit = need - level(now_ns);
    if (deficit <= 0) return 0;
    assert(need <= per_s_);  // else the bucket could never hold it
    const double wait_ms = std::ceil(deficit * kNsPerS / per_s_ / kNsPerMs);
    int64_t ms = static_cast<int64_t>(std::min(wait_ms, static_cast<double>(kRetryAfterMsMax)));
    ms = std::max<int64_t>(ms, 1);
    // The estimate may be a ulp off either way; settle it against level() itself.
    auto enough = [&](int64_t m) { return level(now_ns + m * kNsPerMs) >= need; };
    while (ms < kRetryAfterMsMax && !enough(ms)) ++ms;
    while (ms > 1 && enough(ms - 1)) --ms;
    return ms;
}

void RateBucket::settle(int64_t now_ns) {
    anchor_level_ = level(now_ns);
    anchor_ns_ = std::max(anchor_ns_, now_ns);
}

void RateBucket::charge(double amount, int64_t now_ns) {
    assert(amount >= 0);
    settle(now_ns);
    anchor_level_ -= amount;
}

void RateBucket::set_rate(double per_s, int64_t now_ns) {
    assert(per_s > 0);
    settle(now_ns);
    per_s_ = per_s;
    anchor_level_ = std::min(anchor_level_, per_s_);
}

}  // namespace fenec::engine
