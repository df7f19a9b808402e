// server/runtime/flags.cc: the flag reader and the common setters (server/runtime/flags.h).
#include "server/runtime/flags.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace fenec::server::flags {

Outcome parse(const std::vector<Flag>& table, const std::vector<std::string>& args) {
    Outcome out;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string name = args[i];
        std::optional<std::string> inline_value;
        if (name == "--help" || name == "-h") {
            out.help = true;
            return out;
        }
        if (name == "--version") {
            out.version = true;
            return out;
        }
        if (size_t eq = name.find('='); eq != std::string::npos && name.starts_with("--")) {
            inline_value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        const Flag* flag = nullptr;
        for (const Flag& f : table) {
            if (name == f.name) flag = &f;
        }
        if (!flag) {
            out.error = "unknown flag " + name + " (see --help)";
            return out;
        }
        std::string value;
        if (flag->value) {
            if (inline_value) {
                value = *inline_value;
            } else if (i + 1 < args.size()) {
                value = args[++i];
            } else {
                out.error = name + " needs a value " + flag->value;
                return out;
            }
        } else if (inline_value) {
            out.error = name + " takes no value";
            return out;
        }
        if (!flag->set(value)) {
            out.error =
                name + ": cannot use `" + value + "` (" + (flag->value ? flag->value : "") + ")";
            return out;
        }
    }
    return out;
}

std::string help_text(std::string_view preamble, const std::vector<Flag>& table, size_t column) {
    std::string out(preamble);
    const auto line = [&](std::string left, std::string_view help) {
        if (left.size() < column) {
            left.resize(column, ' ');
        } else {
            left += "\n" + std::string(column, ' ');
        }
        out += left;
        out += help;
        out += '\n';
    };
    for (const Flag& f : table) {
        line(std::string("  ") + f.name + (f.value ? std::string(" ") + f.value : ""), f.help);
    }
    line("  --help", "this text");
    line("  --version", "print the version and exit");
    return out;
}

bool read_u64(const std::string& text, uint64_t& out, uint64_t max) {
    if (text.empty()) return false;
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v > max) return false;
    out = v;
    return true;
}

Setter text(std::string& field) {
    return [&field](const std::string& v) { return !v.empty() && (field = v, true); };
}

Setter text(std::optional<std::string>& field) {
    return [&field](const std::string& v) { return !v.empty() && (field = v, true); };
}

Setter on(bool& field) {
    return [&field](const std::string&) { return field = true; };
}

Setter number(uint32_t& field, uint64_t max, uint64_t min) {
    return [&field, max, min](const std::string& v) {
        uint64_t n = 0;
        if (!read_u64(v, n, max) || n < min) return false;
        field = static_cast<uint32_t>(n);
        return true;
    };
}

Setter number(uint64_t& field, uint64_t max, uint64_t min) {
    return [&field, max, min](const std::string& v) {
        uint64_t n = 0;
        if (!read_u64(v, n, max) || n < min) return false;
        field = n;
        return true;
    };
}

Setter size_bytes(uint64_t& field) {
    return [&field](const std::string& v) {
        if (v.empty()) return false;
        uint64_t shift = 0;
        switch (v.back()) {
            case 'k':
            case 'K':
                shift = 10;
                break;
            case 'm':
            case 'M':
                shift = 20;
                break;
            case 'g':
            case 'G':
                shift = 30;
                break;
            default:
                break;
        }
        const std::string digits = shift ? v.substr(0, v.size() - 1) : v;
        uint64_t n = 0;
        if (!read_u64(digits, n, (uint64_t{1} << 40) >> shift) || n == 0) return false;
        field = n << shift;
        return true;
    };
}

Setter seconds_as_ms(uint64_t& field) {
    return [&field](const std::string& v) {
        char* end = nullptr;
        const double s = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(s) || s <= 0 || s > 86'400) return false;
        const auto ms = static_cast<uint64_t>(std::llround(s * 1000));
        if (ms == 0) return false;
        field = ms;
        return true;
    };
}

bool is_loopback(const std::string& listen) {
    std::string host = listen.substr(0, listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace fenec::server::flags
