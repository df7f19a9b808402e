// server/node/test_hooks_on.cc: the test hooks that act (server/node/test_hooks.h), linked only
// into fenec-node-hooks, the node the integration tests start. Every stall is bounded, so a
// test's typo cannot hold a worker for longer than test_stall_ms_max.
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "json/timestamp.h"
#include "server/node/test_hooks.h"
#include "server/node/wire.h"

namespace fenec::node::test_hooks {

namespace {

// A stall bounds a worker's sleep; the longest the test cases ask for is 6 s (§14 case 63).
constexpr int64_t test_stall_ms_max = 60'000;

// The `<name>=<ms>` part of `Fenec-Test-Stall` (several hooks may share the header,
// comma-separated: `land=800, apply=300`); 0 if absent or not a decimal.
int64_t stall_ms(const http::RequestHead& head, std::string_view name) {
    auto h = head.header("Fenec-Test-Stall");
    if (!h) return 0;
    std::string_view rest = *h;
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view part = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
        while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
        if (!part.starts_with(name) || part.substr(name.size(), 1) != "=") continue;
        if (auto ms = parse_decimal(part.substr(name.size() + 1))) {
            return static_cast<int64_t>(std::min<uint64_t>(*ms, test_stall_ms_max));
        }
    }
    return 0;
}

void sleep_ms(int64_t ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

void stall_landed(const http::RequestHead& head) { sleep_ms(stall_ms(head, "land")); }

bool stalls_landed(const http::RequestHead& head) { return stall_ms(head, "land") > 0; }

void stall_between_statements(const http::RequestHead& head) {
    sleep_ms(stall_ms(head, "between"));
}

int64_t apply_stall_ms(const http::RequestHead& head) { return stall_ms(head, "apply"); }

void stall_apply(int64_t ms) { sleep_ms(std::min(ms, test_stall_ms_max)); }

int64_t install_stall_ms(const http::RequestHead& head) { return stall_ms(head, "install"); }

int64_t received_stall_ms(const http::RequestHead& head) { return stall_ms(head, "received"); }

void stall_install(int64_t ms) { sleep_ms(std::min(ms, test_stall_ms_max)); }

std::optional<int64_t> now_ms(const http::RequestHead& head) {
    auto now = head.header("Fenec-Test-Now");
    if (!now) return std::nullopt;
    return json::parse_timestamp(*now);
}

uint32_t feed_frame_bytes(uint32_t bytes_max) {
    // Read once: both ends of every stream in this process use the one bound.
    static const uint32_t bound = [bytes_max] {
        const char* v = std::getenv("FENEC_TEST_FEED_FRAME_BYTES");
        const unsigned long n = v ? std::strtoul(v, nullptr, 10) : 0;
        return n > 0 && n < bytes_max ? static_cast<uint32_t>(n) : bytes_max;
    }();
    return bound;
}

uint64_t image_in_memory_bytes(uint64_t bytes_max) {
    if (const char* v = std::getenv("FENEC_TEST_IMAGE_IN_MEMORY_BYTES")) {
        if (auto n = parse_decimal(v)) return *n;
    }
    return bytes_max;
}

void stall_image_build() {
    if (const char* v = std::getenv("FENEC_TEST_IMAGE_BUILD_STALL")) {
        if (auto n = parse_decimal(v)) sleep_ms(std::min<int64_t>(int64_t(*n), test_stall_ms_max));
    }
}

bool refuse_image_thread() { return std::getenv("FENEC_TEST_IMAGE_THREAD_REFUSED") != nullptr; }

}  // namespace fenec::node::test_hooks
