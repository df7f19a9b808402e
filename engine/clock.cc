// engine/clock.cc: the system clocks and generators behind engine/clock.h.
#include "engine/clock.h"

#include <sys/random.h>
#include <time.h>

#include <chrono>

namespace fenec::engine {

int64_t SystemClock::wall_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

int64_t SystemClock::steady_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int64_t PosixBootClock::now_ns() const {
    timespec ts{};
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace {
uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
}  // namespace

SystemRandom::SystemRandom() {
    uint64_t seed[2] = {0, 0};
    if (getrandom(seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
        uint64_t t = static_cast<uint64_t>(SystemClock().steady_ns());
        seed[0] = splitmix(t);
        seed[1] = splitmix(t);
    }
    state_[0] = seed[0] | 1;
    state_[1] = seed[1];
}

// xorshift128+: fast and good enough for ids; never used for secrets.
uint64_t SystemRandom::next_u64() {
    uint64_t s1 = state_[0];
    const uint64_t s0 = state_[1];
    state_[0] = s0;
    s1 ^= s1 << 23;
    state_[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return state_[1] + s0;
}

uint64_t SeededRandom::next_u64() { return splitmix(state_); }

}  // namespace fenec::engine
