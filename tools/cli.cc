// tools/cli.cc: the commands' one argument reader and their help (tools/cli.h).
#include "tools/cli.h"

#include <cstdio>
#include <cstdlib>

namespace fenec::tools {

namespace {

const Option* find_option(const Command& c, std::string_view name) {
    for (const Option& o : c.options) {
        if (o.name == name || (!o.alias.empty() && o.alias == name)) return &o;
    }
    return nullptr;
}

}  // namespace

bool Args::has(std::string_view name) const { return value(name).has_value(); }

std::optional<std::string> Args::value(std::string_view name) const {
    std::optional<std::string> out;
    for (const auto& [k, v] : given) {
        if (k == name) out = v;
    }
    return out;
}

std::vector<std::string> Args::values(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : given) {
        if (k == name) out.push_back(v);
    }
    return out;
}

std::string usage_line(const Command& c) {
    std::string out = "usage: fenec " + std::string(c.name);
    if (!c.args.empty()) out += " " + std::string(c.args);
    return out + "  (fenec " + std::string(c.name) + " --help)";
}

int usage_error(const Command& c, std::string_view why) {
    std::fprintf(stderr, "fenec %.*s: %.*s\n%s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(why.size()), why.data(), usage_line(c).c_str());
    return exit_usage;
}

int failed(std::string_view name, std::string_view why) {
    std::fprintf(stderr, "fenec %.*s: %.*s\n", static_cast<int>(name.size()), name.data(),
                 static_cast<int>(why.size()), why.data());
    return exit_failed;
}

std::string help_text(const Command& c) {
    std::string out = "fenec " + std::string(c.name) + ": " + std::string(c.summary) + "\n\n";
    out += "usage: fenec " + std::string(c.name) + " " + std::string(c.args) + "\n";
    out += "\noptions:\n";
    constexpr size_t column = 28;
    for (const Option& o : c.options) {
        std::string left = "  ";
        if (!o.alias.empty()) left += std::string(o.alias) + ", ";
        left += o.name;
        if (!o.value.empty()) left += " " + std::string(o.value);
        if (left.size() < column) {
            left.resize(column, ' ');
        } else {
            left += "\n" + std::string(column, ' ');
        }
        out += left + std::string(o.help);
        if (!o.env.empty()) out += " (env " + std::string(o.env) + ")";
        out += "\n";
    }
    std::string help = "  --help";
    help.resize(column, ' ');
    out += help + "this text\n";
    if (!c.details.empty()) out += "\n" + std::string(c.details) + "\n";
    return out;
}

std::optional<int> read_args(const Command& c, int argc, char** argv, Args& out) {
    bool options_end = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (!options_end && (arg == "--help" || arg == "-h")) {
            std::fputs(help_text(c).c_str(), stdout);
            return exit_ok;
        }
        if (!options_end && arg == "--") {
            options_end = true;
            continue;
        }
        if (options_end || arg.size() < 2 || arg[0] != '-') {
            out.positional.push_back(arg);
            continue;
        }
        std::optional<std::string> inline_value;
        if (size_t eq = arg.find('='); eq != std::string::npos && arg.starts_with("--")) {
            inline_value = arg.substr(eq + 1);
            arg.resize(eq);
        }
        const Option* o = find_option(c, arg);
        if (!o) return usage_error(c, "unknown option " + arg);
        std::string value;
        if (!o->value.empty()) {
            if (inline_value) {
                value = *inline_value;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                return usage_error(c, arg + " needs a value " + std::string(o->value));
            }
        } else if (inline_value) {
            return usage_error(c, arg + " takes no value");
        }
        if (!o->repeats && out.has(o->name)) {
            return usage_error(c, std::string(o->name) + " is given twice");
        }
        out.given.emplace_back(std::string(o->name), std::move(value));
    }
    for (const Option& o : c.options) {
        if (o.env.empty() || out.has(o.name)) continue;
        const std::string env(o.env);
        if (const char* v = std::getenv(env.c_str()); v && *v) out.given.emplace_back(o.name, v);
    }
    if (out.positional.size() < c.positional_min) {
        return usage_error(c, out.positional.empty() ? "missing arguments" : "missing an argument");
    }
    if (out.positional.size() > c.positional_max) {
        return usage_error(c, "unexpected argument `" + out.positional[c.positional_max] + "`");
    }
    return std::nullopt;
}

}  // namespace fenec::tools
