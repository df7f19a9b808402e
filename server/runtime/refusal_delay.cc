// server/runtime/refusal_delay.cc: refusal delays per address (server/runtime/refusal_delay.h).
#include "server/runtime/refusal_delay.h"

#include <algorithm>
#include <iterator>

namespace fenec::server {

int64_t RefusalDelay::refused(std::string_view address, int64_t now_ms) {
    if (base_ms_ == 0) return 0;
    std::lock_guard lock(mu_);
    std::string key(address);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
        while (entries_.size() >= delayed_addresses_max && !order_.empty()) {
            entries_.erase(order_.front());
            order_.pop_front();
        }
        order_.push_back(key);
        it = entries_.emplace(std::move(key), Entry{0, now_ms, std::prev(order_.end())}).first;
    } else {
        order_.splice(order_.end(), order_, it->second.order);  // now the most recent
    }
    Entry& e = it->second;
    e.count = (e.count > 0 && now_ms - e.last_ms < refusal_window_ms) ? e.count + 1 : 1;
    e.last_ms = now_ms;
    int64_t delay = std::min(base_ms_, refusal_delay_max_ms);
    for (uint32_t i = 1; i < e.count && delay < refusal_delay_max_ms; ++i) delay *= 2;
    return std::min(delay, refusal_delay_max_ms);
}

void RefusalDelay::accepted(std::string_view address) {
    if (base_ms_ == 0) return;
    std::lock_guard lock(mu_);
    auto it = entries_.find(std::string(address));
    if (it == entries_.end()) return;
    order_.erase(it->second.order);
    entries_.erase(it);
}

size_t RefusalDelay::addresses() const {
    std::lock_guard lock(mu_);
    return entries_.size();
}

}  // namespace fenec::server
