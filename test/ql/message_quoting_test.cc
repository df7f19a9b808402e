// test/ql/message_quoting_test.cc: proves that error messages quote names one way. A name a
// request chose (a tenant, collection, field, member or key, column, node) is written in
// backquotes in every message the node, the router and FenecQL build: "`year` expects int,
// found text", "tenant `acme` is frozen". The check reads the sources (ql/, server/node/, shard/):
// in each message a refusal builds (error_at, refusal, refuse, bad_request, conflict, BodyError,
// Router::error), an operand named like a name and concatenated with text must sit between
// backquotes or pass through quote_name. So a message added later cannot drift; the first test
// shows the check finds the kinds of drift it is meant to find.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fenec::test::message_quoting_test {
namespace {

// Whether s[i] opens a string or character literal (a digit separator, 1'000, opens none).
bool opens_literal(const std::string& s, size_t i) {
    if (s[i] == '"') return true;
    return s[i] == '\'' && !(i > 0 && std::isalnum(static_cast<unsigned char>(s[i - 1])));
}

// `src` without comments; string and character literals kept whole.
std::string strip_comments(const std::string& src) {
    std::string out;
    char quote = 0;
    for (size_t i = 0; i < src.size(); ++i) {
        const char c = src[i];
        if (quote) {
            out += c;
            if (c == '\\' && i + 1 < src.size()) {
                out += src[++i];
            } else if (c == quote) {
                quote = 0;
            }
            continue;
        }
        if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
            while (i < src.size() && src[i] != '\n') ++i;
            out += '\n';
            continue;
        }
        if (c == '/' && i + 1 < src.size() && src[i + 1] == '*') {
            const size_t end = src.find("*/", i + 2);
            for (size_t j = i; j < std::min(end, src.size()); ++j)
                out += src[j] == '\n' ? '\n' : ' ';
            i = end == std::string::npos ? src.size() : end + 1;
            continue;
        }
        if (opens_literal(src, i)) quote = c;
        out += c;
    }
    return out;
}

// The text between the bracket at `open` and its match.
std::string bracketed(const std::string& s, size_t open) {
    int depth = 0;
    char quote = 0;
    for (size_t i = open; i < s.size(); ++i) {
        const char c = s[i];
        if (quote) {
            if (c == '\\')
                ++i;
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (opens_literal(s, i))
            quote = c;
        else if (c == '(' || c == '{' || c == '[')
            ++depth;
        else if (c == ')' || c == '}' || c == ']') {
            if (--depth == 0) return s.substr(open + 1, i - open - 1);
        }
    }
    return s.substr(open + 1);
}

// `text` split at `sep` where no bracket or literal encloses it.
std::vector<std::string> split_top(const std::string& text, char sep) {
    std::vector<std::string> parts(1);
    int depth = 0;
    char quote = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quote) {
            parts.back() += c;
            if (c == '\\' && i + 1 < text.size())
                parts.back() += text[++i];
            else if (c == quote)
                quote = 0;
            continue;
        }
        if (opens_literal(text, i)) quote = c;
        if (c == '(' || c == '{' || c == '[') ++depth;
        if (c == ')' || c == '}' || c == ']') --depth;
        const bool doubled = i + 1 < text.size() && text[i + 1] == sep;
        if (c == sep && depth == 0 && !doubled && !(i > 0 && text[i - 1] == sep)) {
            parts.emplace_back();
            continue;
        }
        parts.back() += c;
    }
    return parts;
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\n");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\n");
    std::string out;
    for (char c : s.substr(a, b - a + 1)) {
        if (c == '\n' || c == '\t') c = ' ';
        if (c == ' ' && !out.empty() && out.back() == ' ') continue;
        out += c;
    }
    return out;
}

// The contents of a string literal operand ("a" "b" concatenated), or nullopt if it is none.
std::optional<std::string> literal(const std::string& written) {
    std::string operand = written;
    for (const char* wrap : {"std::string(", "std::string_view("}) {
        if (operand.starts_with(wrap) && operand.ends_with(")")) {
            operand = operand.substr(std::string_view(wrap).size(),
                                     operand.size() - std::string_view(wrap).size() - 1);
        }
    }
    if (operand.empty() || operand.front() != '"') return std::nullopt;
    std::string out;
    bool in = false;
    for (size_t i = 0; i < operand.size(); ++i) {
        const char c = operand[i];
        if (!in) {
            if (c == '"')
                in = true;
            else if (c != ' ')
                return std::nullopt;
            continue;
        }
        if (c == '\\' && i + 1 < operand.size()) {
            out += operand[++i];
        } else if (c == '"') {
            in = false;
        } else {
            out += c;
        }
    }
    return out;
}

// An operand that reads as a name a request chose: `field`, `call.tenant`, `t.name()`,
// `col->text()`, `std::string(name)`...
bool names_a_name(const std::string& operand) {
    static const std::regex kName(
        R"(^(std::string(_view)?\()?([A-Za-z_]\w*(\.|->))*)"
        R"((field|name|coll|collection|tenant|image_tenant|key|column|member|target|alias|node_name|)"
        R"(collection_|tenant_)(\(\))?(\.text(\(\))?|\.name(\(\))?|\.field)?\)?$)");
    return std::regex_match(operand, kName);
}

struct Drift {
    std::string where;    // file:line
    std::string operand;  // the name left bare
};

// The bare names in the messages of `src` (a file's text), each with its line.
std::vector<Drift> bare_names(const std::string& file, const std::string& original) {
    static const std::regex kCall(
        R"((^|[^\w])(error_at|refusal|refuse|bad_request|conflict|BodyError)\s*([({])|)"
        R"((^|[^\w.>])(error)\s*(\())");
    const std::string src = strip_comments(original);
    std::vector<Drift> out;
    for (auto it = std::sregex_iterator(src.begin(), src.end(), kCall);
         it != std::sregex_iterator(); ++it) {
        const size_t open =
            static_cast<size_t>((*it)[3].matched ? it->position(3) : it->position(6));
        const size_t line =
            static_cast<size_t>(std::count(src.begin(), src.begin() + open, '\n')) + 1;
        for (const std::string& arg : split_top(bracketed(src, open), ',')) {
            const std::vector<std::string> operands = split_top(arg, '+');
            bool has_text = false;
            for (const std::string& o : operands) has_text = has_text || literal(trim(o));
            if (!has_text || operands.size() < 2) continue;
            size_t backquotes = 0;  // seen so far in this message's text: odd inside a quote
            for (const std::string& raw : operands) {
                const std::string o = trim(raw);
                if (std::optional<std::string> text = literal(o)) {
                    backquotes += static_cast<size_t>(std::count(text->begin(), text->end(), '`'));
                    continue;
                }
                if (backquotes % 2 == 0 && names_a_name(o)) {
                    out.push_back({file + ":" + std::to_string(line), o});
                }
            }
        }
    }
    return out;
}

// Text naming a tenant, collection, field or node and then a bare name, anywhere a message is
// put together (a Status, an AcquireError, a string built first): `"tenant " + name`.
std::vector<Drift> bare_after_a_noun(const std::string& file, const std::string& original) {
    static const std::regex kNoun(
        R"re("((?:[^"\n]* )?)(tenant|collection|field|node|copy of|file of) "\s*\+\s*([^"\s;]+))re");
    const std::string src = strip_comments(original);
    std::vector<Drift> out;
    for (auto it = std::sregex_iterator(src.begin(), src.end(), kNoun);
         it != std::sregex_iterator(); ++it) {
        const std::string before = (*it)[1].str();
        const std::string operand = (*it)[3].str();
        if (operand.starts_with("quote_name(")) continue;
        if (std::count(before.begin(), before.end(), '`') % 2 == 1) continue;  // inside a quote
        const size_t at = static_cast<size_t>(it->position(0));
        const size_t line =
            static_cast<size_t>(std::count(src.begin(), src.begin() + at, '\n')) + 1;
        out.push_back({file + ":" + std::to_string(line), operand});
    }
    return out;
}

TEST(MessageQuoting, TheCheckFindsABareNameAndPassesAQuotedOne) {
    EXPECT_EQ(
        bare_names("x", R"(return refusal(404, "tenant " + call.tenant + " not found");)").size(),
        1u);
    EXPECT_EQ(bare_names("x", R"(return error_at(pos, field + " expects " + expected);)").size(),
              1u);
    EXPECT_EQ(bare_names("x", "return node.refusal(404, \"no collection \" +\n coll);").size(), 1u);
    EXPECT_EQ(
        bare_names("x", R"(return bad_request("the filter on " + quote_name(field));)").size(), 0u);
    EXPECT_EQ(
        bare_names("x", R"(return refusal(404, "tenant `" + call.tenant + "` not found");)").size(),
        0u);
    EXPECT_EQ(
        bare_names("x", R"(return error_at(pos, "`near " + field + "` takes a list");)").size(),
        0u);
    EXPECT_EQ(bare_names("x", R"(return conflict("two documents give `_id` 3", name);)").size(),
              0u);
    EXPECT_EQ(bare_names("x", "// refusal(404, \"tenant \" + name)\n").size(), 0u);
    EXPECT_EQ(
        bare_after_a_noun("x", R"(Status::error(Code::io, "tenant " + std::string(name));)").size(),
        1u);
    EXPECT_EQ(
        bare_after_a_noun("x", R"(why = "the JWT reaches tenant " + v.tenant + " only";)").size(),
        1u);
    EXPECT_EQ(bare_after_a_noun("x", R"(why = "tenant `" + name + "` only";)").size(), 0u);
    EXPECT_EQ(bare_after_a_noun("x", R"(why = "unknown field " + quote_name(key);)").size(), 0u);
}

TEST(MessageQuoting, EveryMessageBackquotesTheNamesItGives) {
    std::vector<Drift> drifts;
    size_t files = 0;
    for (const char* folder : {"ql", "server/node", "shard"}) {
        ASSERT_TRUE(std::filesystem::is_directory(folder)) << folder << " (run from the root)";
        for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
            const std::string path = entry.path().string();
            if (!path.ends_with(".cc") && !path.ends_with(".h")) continue;
            std::ifstream in(path);
            std::stringstream text;
            text << in.rdbuf();
            for (Drift& d : bare_names(path, text.str())) drifts.push_back(std::move(d));
            for (Drift& d : bare_after_a_noun(path, text.str())) drifts.push_back(std::move(d));
            ++files;
        }
    }
    EXPECT_GT(files, 50u);
    for (const Drift& d : drifts) {
        ADD_FAILURE() << d.where << ": `" << d.operand
                      << "` is a name in a message: write it between backquotes";
    }
}

}  // namespace
}  // namespace fenec::test::message_quoting_test
