// server/runtime/host.cc: the open plane's `Host` rule (server/runtime/host.h). A literal is
// judged by inet_pton, so every spelling it takes (and only those) passes.
#include "server/runtime/host.h"

#include <arpa/inet.h>

#include <array>
#include <string>

namespace fenec::server {

namespace {

bool all_digits(std::string_view s) {
    for (char c : s) {
        if (c < '0' || c > '9') return false;
    }
    return !s.empty();
}

bool is_localhost(std::string_view name) {
    constexpr std::string_view localhost = "localhost";
    if (name.size() != localhost.size()) return false;
    for (size_t i = 0; i < name.size(); ++i) {
        const char c = name[i] >= 'A' && name[i] <= 'Z' ? static_cast<char>(name[i] + 32) : name[i];
        if (c != localhost[i]) return false;
    }
    return true;
}

bool literal(int family, std::string_view text) {
    if (text.empty() || text.size() > 45) return false;  // INET6_ADDRSTRLEN - 1
    const std::string z(text);
    std::array<unsigned char, 16> out{};
    return inet_pton(family, z.c_str(), out.data()) == 1;
}

}  // namespace

bool host_is_local_or_literal(std::optional<std::string_view> host, int version_minor) {
    if (!host) return version_minor == 0;
    std::string_view h = *host;
    std::string_view name = h;
    if (!h.empty() && h.front() == '[') {  // [v6] or [v6]:port
        const size_t close = h.find(']');
        if (close == std::string_view::npos) return false;
        std::string_view after = h.substr(close + 1);
        if (!after.empty() &&
            (after.front() != ':' || after.size() > 6 || !all_digits(after.substr(1)))) {
            return false;
        }
        return literal(AF_INET6, h.substr(1, close - 1));
    }
    if (const size_t colon = h.rfind(':'); colon != std::string_view::npos) {
        const std::string_view port = h.substr(colon + 1);
        if (port.size() > 5 || !all_digits(port)) return false;
        name = h.substr(0, colon);
    }
    return is_localhost(name) || literal(AF_INET, name);
}

}  // namespace fenec::server
