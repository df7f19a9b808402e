// engine/rate.h: a rate limit (rows/s or bytes/s) as a token bucket (engine.md §9, "Rates").
//
// Invariant: the level never exceeds the capacity, one second's worth (`per_s`); it refills at
// `per_s` per second on the steady clock and may go below zero, into debt, when a block larger
// than what is left is charged — that block goes through and the next waits the debt out. The
// bucket reads no clock: every call takes `now_ns` from the caller's steady clock, so rates are
// testable without sleeping. Not synchronized: the owner serializes calls.
#pragma once

#include <cstdint>

namespace fenec::engine {

// What a block needs from a bucket to begin (`need` below): a row's worth from the rows bucket,
// any bytes at all from the bytes bucket (a millionth of a byte stands for "more than zero").
inline constexpr double kRowsNeed = 1.0;
inline constexpr double kBytesNeed = 1e-6;

class RateBucket {
public:
    // Full at `now_ns`. `per_s` > 0.
    RateBucket(double per_s, int64_t now_ns);

    // True while the level at `now_ns` is at least `need`.
    bool can_begin(double need, int64_t now_ns) const;
    // 0 when can_begin(need, now_ns); else the least whole ms m such that, with no charge in
    // between, can_begin(need, now_ns + m ms) is true.
    int64_t retry_after_ms(double need, int64_t now_ns) const;
    // Takes `amount` (>= 0) at `now_ns`; the level may go negative.
    void charge(double amount, int64_t now_ns);
    // A new rate from `now_ns`: the level refilled so far is kept, clipped to the new capacity;
    // a debt is kept as it is.
    void set_rate(double per_s, int64_t now_ns);

    double per_s() const { return per_s_; }
    // The level at `now_ns`: tokens, at most per_s(), negative in debt.
    double level(int64_t now_ns) const;

private:
    // The level is kept as (level at an anchor instant, anchor) and refilled lazily from the
    // anchor, so reading it accumulates no rounding; only charges and rate changes move the
    // anchor.
    void settle(int64_t now_ns);

    double per_s_;
    double anchor_level_;
    int64_t anchor_ns_;
};

}  // namespace fenec::engine
