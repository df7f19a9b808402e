// engine/clock.h: time and randomness, passed in. Nothing in engine/ reads a clock or draws a
// random number except through these, so replay, TTL, rates and leases are testable without
// sleeping and files are reproducible byte for byte under a fixed seed.
#pragma once

#include <atomic>
#include <cstdint>

namespace fenec::engine {

// Nanoseconds in a millisecond: the steady and boot clocks count ns, leases and rates speak ms.
inline constexpr int64_t kNsPerMs = 1'000'000;

class Clock {
public:
    virtual ~Clock() = default;
    virtual int64_t wall_ms() const = 0;    // UTC milliseconds since the epoch
    virtual int64_t steady_ns() const = 0;  // monotonic, for rate buckets and flush intervals
};

// The clock a lease is measured on: CLOCK_BOOTTIME, which counts a suspend.
class BootClock {
public:
    virtual ~BootClock() = default;
    virtual int64_t now_ns() const = 0;
};

class Random {
public:
    virtual ~Random() = default;
    virtual uint64_t next_u64() = 0;
};

// The defaults: the system's clocks and a seeded-from-the-OS generator.
class SystemClock final : public Clock {
public:
    int64_t wall_ms() const override;
    int64_t steady_ns() const override;
};

class PosixBootClock final : public BootClock {
public:
    int64_t now_ns() const override;
};

class SystemRandom final : public Random {
public:
    SystemRandom();
    uint64_t next_u64() override;

private:
    uint64_t state_[2];
};

// Deterministic doubles for tests and tools.
class FakeClock final : public Clock {
public:
    explicit FakeClock(int64_t wall_ms = 1'700'000'000'000, int64_t steady_ns = 1'000'000'000)
        : wall_ms_(wall_ms), steady_ns_(steady_ns) {}
    int64_t wall_ms() const override { return wall_ms_.load(); }
    int64_t steady_ns() const override { return steady_ns_.load(); }
    void advance_ms(int64_t ms) {
        wall_ms_ += ms;
        steady_ns_ += ms * 1'000'000;
    }
    void set_wall_ms(int64_t ms) { wall_ms_ = ms; }

private:
    std::atomic<int64_t> wall_ms_;  // atomic: tests move it while background threads read it
    std::atomic<int64_t> steady_ns_;
};

class FakeBootClock final : public BootClock {
public:
    explicit FakeBootClock(int64_t now_ns = 1'000'000'000) : now_ns_(now_ns) {}
    int64_t now_ns() const override { return now_ns_.load(); }
    void advance_ms(int64_t ms) { now_ns_ += ms * 1'000'000; }

private:
    std::atomic<int64_t> now_ns_;
};

// splitmix64 from a seed: the same seed draws the same ids.
class SeededRandom final : public Random {
public:
    explicit SeededRandom(uint64_t seed) : state_(seed) {}
    uint64_t next_u64() override;

private:
    uint64_t state_;
};

}  // namespace fenec::engine
