// server/runtime/refusal_delay.h: the delay before a refusal (node-http.md §3.3, router.md §3),
// kept per client address, shared by the node's 401s and the router's. An address's first refusal
// waits base_ms; each further one less than refusal_window_ms after its previous refusal waits
// twice the last, up to refusal_delay_max_ms. A refusal a window or more after the previous one
// starts again at base. At most delayed_addresses_max addresses are remembered; past that the one
// refused longest ago is forgotten. base_ms 0 turns it off (nothing recorded). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fenec::server {

// §12: a bound on memory under a flood of bad credentials from many addresses.
inline constexpr size_t delayed_addresses_max = 10000;
// §3.3: refusal delays: the window in which refusals from one address add up, and the cap.
inline constexpr int64_t refusal_window_ms = 60'000;
inline constexpr int64_t refusal_delay_max_ms = 5000;

class RefusalDelay {
  public:
    explicit RefusalDelay(int64_t base_ms) : base_ms_(base_ms < 0 ? 0 : base_ms) {}

    // Records a refusal from `address` at `now_ms` (any monotonic ms clock); returns the delay.
    int64_t refused(std::string_view address, int64_t now_ms);
    // An accepted credential from `address`: its count starts again.
    void accepted(std::string_view address);
    size_t addresses() const;

  private:
    struct Entry {
        uint32_t count;
        int64_t last_ms;
        std::list<std::string>::iterator order;
    };
    const int64_t base_ms_;
    mutable std::mutex mu_;
    std::unordered_map<std::string, Entry> entries_;
    std::list<std::string> order_;  // least recently refused first
};

}  // namespace fenec::server
