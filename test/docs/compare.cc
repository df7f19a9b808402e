// test/docs/compare.cc: the comparison rules of compare.h, over the tests' JSON reader
// (test/support/json_value.h: members in the order written, ints apart from floats).
#include "test/docs/compare.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "server/runtime/http.h"
#include "test/support/json_value.h"

namespace fenec::test::docs {

namespace {

using engine::List;
using engine::Object;
using engine::Value;

const std::string kAny = "…";

std::string show(const Value& v);

std::string show_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string show(const Value& v) {
    if (v.is_null()) return "null";
    if (auto* b = std::get_if<bool>(&v.rep)) return *b ? "true" : "false";
    if (auto* i = std::get_if<int64_t>(&v.rep)) return std::to_string(*i);
    if (auto* d = std::get_if<double>(&v.rep)) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", *d);
        std::string s = buf;
        if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
        return s;
    }
    if (auto* s = std::get_if<std::string>(&v.rep)) return show_string(*s);
    if (auto* l = std::get_if<List>(&v.rep)) {
        std::string out = "[";
        for (size_t i = 0; i < l->items.size(); ++i) out += (i ? "," : "") + show(l->items[i]);
        return out + "]";
    }
    if (auto* o = std::get_if<Object>(&v.rep)) {
        std::string out = "{";
        for (size_t i = 0; i < o->keys.size(); ++i) {
            out += (i ? "," : "") + show_string(o->keys[i]) + ":" + show(o->values[i]);
        }
        return out + "}";
    }
    return v.kind_name();
}

// Long values are cut in a message: the page's line says where to look.
std::string brief(const Value& v) {
    std::string s = show(v);
    return s.size() > 200 ? s.substr(0, 200) + "…" : s;
}

std::optional<std::string> same(const Value& e, const Value& a, const std::string& path) {
    if (auto* s = std::get_if<std::string>(&e.rep); s && *s == kAny) return std::nullopt;
    auto differ = [&] { return path + ": " + brief(a) + ", the page says " + brief(e); };
    if (auto* eo = std::get_if<Object>(&e.rep)) {
        auto* ao = std::get_if<Object>(&a.rep);
        if (!ao) return differ();
        if (eo->keys != ao->keys) {
            std::string ek, ak;
            for (const auto& k : eo->keys) ek += (ek.empty() ? "" : ",") + k;
            for (const auto& k : ao->keys) ak += (ak.empty() ? "" : ",") + k;
            return path + ": keys " + ak + ", the page says " + ek;
        }
        for (size_t i = 0; i < eo->keys.size(); ++i) {
            if (auto d = same(eo->values[i], ao->values[i], path + "." + eo->keys[i])) return d;
        }
        return std::nullopt;
    }
    if (auto* el = std::get_if<List>(&e.rep)) {
        auto* al = std::get_if<List>(&a.rep);
        if (!al || al->items.size() != el->items.size()) return differ();
        for (size_t i = 0; i < el->items.size(); ++i) {
            if (auto d = same(el->items[i], al->items[i], path + "[" + std::to_string(i) + "]")) {
                return d;
            }
        }
        return std::nullopt;
    }
    if (auto* ed = std::get_if<double>(&e.rep)) {
        auto* ad = std::get_if<double>(&a.rep);
        if (!ad || std::fabs(*ed - *ad) > 1e-9 * std::max(std::fabs(*ed), std::fabs(*ad))) {
            return differ();
        }
        return std::nullopt;
    }
    if (!(e == a)) return differ();
    return std::nullopt;
}

std::vector<std::string> split_lines(std::string_view s) {
    std::vector<std::string> out;
    size_t at = 0;
    for (;;) {
        const size_t nl = s.find('\n', at);
        out.emplace_back(s.substr(at, nl == std::string_view::npos ? nl : nl - at));
        if (nl == std::string_view::npos) return out;
        at = nl + 1;
    }
}

std::string_view trim_newlines(std::string_view s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// `pattern` over `s`, each "…" in it matching any run of bytes.
bool glob(std::string_view pattern, std::string_view s) {
    const size_t star = pattern.find(kAny);
    if (star == std::string_view::npos) return pattern == s;
    if (s.substr(0, star) != pattern.substr(0, star)) return false;
    const std::string_view rest = pattern.substr(star + kAny.size());
    for (size_t from = star; from <= s.size(); ++from) {
        if (glob(rest, s.substr(from))) return true;
    }
    return false;
}

// Lines e[i..] against a[j..]; a line "…" alone takes any run of lines.
bool lines_match(const std::vector<std::string>& e, size_t i, const std::vector<std::string>& a,
                 size_t j) {
    if (i == e.size()) return j == a.size();
    if (e[i] == kAny) {
        for (size_t k = j; k <= a.size(); ++k) {
            if (lines_match(e, i + 1, a, k)) return true;
        }
        return false;
    }
    return j < a.size() && glob(e[i], a[j]) && lines_match(e, i + 1, a, j + 1);
}

bool is_json(std::string_view s) { return parse_json(s).has_value(); }

}  // namespace

std::optional<std::string> json_differs(std::string_view expected, std::string_view actual,
                                        bool members_only) {
    std::string why;
    const std::optional<Value> e = parse_json(expected, &why);
    if (!e) return "the page's JSON does not parse: " + why;
    const std::optional<Value> a = parse_json(actual, &why);
    if (!a) return "the answer is not JSON (" + why + "): " + std::string(actual.substr(0, 200));
    if (!members_only) return same(*e, *a, "$");
    auto* eo = std::get_if<Object>(&e->rep);
    auto* ao = std::get_if<Object>(&a->rep);
    if (!eo) return "the page's error answer is not an object";
    if (!ao) return "the answer is not an object: " + brief(*a);
    for (size_t i = 0; i < eo->keys.size(); ++i) {
        if (eo->keys[i] == "error") continue;
        const Value* got = nullptr;
        for (size_t k = 0; k < ao->keys.size(); ++k) {
            if (ao->keys[k] == eo->keys[i]) got = &ao->values[k];
        }
        if (!got) return "$." + eo->keys[i] + " is absent: " + brief(*a);
        if (auto d = same(eo->values[i], *got, "$." + eo->keys[i])) return d;
    }
    return std::nullopt;
}

std::optional<std::string> text_differs(std::string_view expected, std::string_view actual) {
    const std::vector<std::string> e = split_lines(trim_newlines(expected));
    const std::vector<std::string> a = split_lines(trim_newlines(actual));
    if (lines_match(e, 0, a, 0)) return std::nullopt;
    // Name the first line that differs, for the message; past a "…" line, the first the page
    // shows that no line of the output is.
    for (size_t i = 0; i < e.size() && i < a.size(); ++i) {
        if (e[i] == kAny) {
            for (size_t k = i + 1; k < e.size(); ++k) {
                bool found = e[k] == kAny;
                for (size_t j = i; j < a.size() && !found; ++j) found = glob(e[k], a[j]);
                if (!found) return "no line of the output is `" + e[k] + "`";
            }
            break;
        }
        if (!glob(e[i], a[i])) {
            return "line " + std::to_string(i + 1) + " of the output is `" + a[i] +
                   "`, the page says `" + e[i] + "`";
        }
    }
    return "the output has " + std::to_string(a.size()) + " lines, the page " +
           std::to_string(e.size()) + ": " + std::string(actual.substr(0, 400));
}

std::optional<std::string> events_differ(std::string_view expected,
                                         const std::vector<std::string>& events) {
    std::vector<std::vector<std::string>> want(1);
    for (const std::string& l : split_lines(trim_newlines(expected))) {
        if (l.empty()) {
            if (!want.back().empty()) want.emplace_back();
        } else {
            want.back().push_back(l);
        }
    }
    if (want.back().empty()) want.pop_back();
    if (events.size() != want.size()) {
        return std::to_string(events.size()) + " events read within 5 s, the page shows " +
               std::to_string(want.size());
    }
    for (size_t n = 0; n < want.size(); ++n) {
        const std::vector<std::string> got = split_lines(events[n]);
        const std::string where = "event " + std::to_string(n + 1);
        if (got.size() != want[n].size()) {
            return where + " has " + std::to_string(got.size()) + " lines, the page " +
                   std::to_string(want[n].size()) + ": " + events[n];
        }
        for (size_t i = 0; i < got.size(); ++i) {
            const std::string& e = want[n][i];
            const std::string& a = got[i];
            const size_t ec = e.find(':'), ac = a.find(':');
            const std::string ef = e.substr(0, ec), af = a.substr(0, ac);
            auto value = [](const std::string& l, size_t c) {
                if (c == std::string::npos) return std::string();
                std::string v = l.substr(c + 1);
                return v.starts_with(' ') ? v.substr(1) : v;
            };
            const std::string ev = value(e, ec), av = value(a, ac);
            if (ef != af) return where + ": `" + a + "`, the page says `" + e + "`";
            if (ev == kAny) continue;
            if (ef == "data" && is_json(ev)) {
                if (auto d = json_differs(ev, av, false)) return where + " data: " + *d;
                continue;
            }
            if (!glob(ev, av)) return where + ": `" + a + "`, the page says `" + e + "`";
        }
    }
    return std::nullopt;
}

std::optional<std::string> json_answer_differs(int status, std::string_view expected_body,
                                               const Answer& got) {
    if (got.status != status) {
        return "status " + std::to_string(got.status) + ", the page says " +
               std::to_string(status) + ": " + got.body.substr(0, 300);
    }
    if (trim_newlines(expected_body).empty()) {
        if (got.body.empty()) return std::nullopt;
        return "a body the page does not show: " + got.body.substr(0, 300);
    }
    return json_differs(expected_body, got.body, status >= 400);
}

std::optional<std::string> response_differs(std::string_view expected_block, const Answer& got) {
    const std::vector<std::string> lines = split_lines(expected_block);
    int status = 0;
    char reason[64] = {};
    if (lines.empty() ||
        std::sscanf(lines[0].c_str(), "HTTP/1.1 %d %63[^\n]", &status, reason) < 1) {
        return "the block does not open with `HTTP/1.1 <status> <reason>`";
    }
    if (got.status != status) {
        return "status " + std::to_string(got.status) + ", the page says " +
               std::to_string(status) + ": " + got.body.substr(0, 300);
    }
    if (reason[0] && got.reason != reason) {
        return "reason `" + got.reason + "`, the page says `" + reason + "`";
    }
    size_t i = 1;
    for (; i < lines.size() && !lines[i].empty(); ++i) {
        const size_t c = lines[i].find(':');
        if (c == std::string::npos) return "header line `" + lines[i] + "` has no `:`";
        const std::string name = lines[i].substr(0, c);
        std::string value = lines[i].substr(c + 1);
        value.erase(0, value.find_first_not_of(' '));
        const std::string* have = nullptr;
        for (const auto& [k, v] : got.headers) {
            if (http::iequals(k, name)) have = &v;
        }
        if (!have) return "no " + name + " header";
        if (!glob(value, *have)) {
            return name + ": `" + *have + "`, the page says `" + value + "`";
        }
    }
    std::string body;
    for (size_t k = i + 1; k < lines.size(); ++k) body += (k > i + 1 ? "\n" : "") + lines[k];
    if (trim_newlines(body).empty()) {
        if (got.body.empty()) return std::nullopt;
        return "a body the page does not show: " + got.body.substr(0, 300);
    }
    if (is_json(body)) return json_differs(body, got.body, got.status >= 400);
    return text_differs(body, got.body);
}

}  // namespace fenec::test::docs
