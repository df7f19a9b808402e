// test/routes/routes_documented_test.cc: proves that docs/http-node.md and docs/http-router.md
// document exactly the routes each binary serves, with the credential each takes. The served
// routes are the tables dispatch reads (server/node/routes.h, shard/routes.h); the documented
// ones are the rows of the pages' route tables: in the `## Routes` section, a table row whose
// first cell is methods in backticks (`GET`, `HEAD`, or `any`), whose second is one or more paths
// in backticks, and whose third is the credential. A `<name>` segment is a wildcard whatever its
// name (`<t>` in a page is the table's `<tenant>`). Prints the documented routes and their count.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/node/routes.h"
#include "shard/routes.h"

namespace fenec {
namespace {

constexpr http::Method all_methods[] = {
    http::Method::get,   http::Method::head, http::Method::post,   http::Method::put,
    http::Method::patch, http::Method::del,  http::Method::options};

// A route as the two sides compare it: a method ("GET", or "any") and a pattern whose wildcard
// segments are all `<>`.
using Pair = std::pair<std::string, std::string>;

std::string normalize(std::string_view pattern) {
    std::string out;
    size_t i = 0;
    while (i < pattern.size()) {
        if (pattern[i] == '<') {
            const size_t close = pattern.find('>', i);
            if (close != std::string_view::npos) {
                out += "<>";
                i = close + 1;
                continue;
            }
        }
        out += pattern[i++];
    }
    return out;
}

// The spans between backticks in a cell.
std::vector<std::string> ticked(std::string_view cell) {
    std::vector<std::string> out;
    size_t at = 0;
    while ((at = cell.find('`', at)) != std::string_view::npos) {
        const size_t end = cell.find('`', at + 1);
        if (end == std::string_view::npos) break;
        out.emplace_back(cell.substr(at + 1, end - at - 1));
        at = end + 1;
    }
    return out;
}

// A markdown table row's cells, split on '|' not escaped as "\|".
std::vector<std::string> cells(const std::string& line) {
    std::vector<std::string> out;
    std::string cur;
    for (size_t i = 1; i < line.size(); ++i) {  // line[0] is the opening '|'
        if (line[i] == '|' && line[i - 1] != '\\') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += line[i];
        }
    }
    return out;
}

std::string trim(std::string s) {
    const size_t a = s.find_first_not_of(' ');
    const size_t b = s.find_last_not_of(' ');
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool is_method(const std::string& s) {
    if (s == "any") return true;
    for (http::Method m : all_methods) {
        if (s == http::method_name(m)) return true;
    }
    return false;
}

struct Documented {
    std::map<Pair, std::string> credential;  // each pair and the credential cell it is listed with
    size_t rows = 0;
    std::set<std::string> patterns;
};

Documented read_page(const std::string& file) {
    std::ifstream in(file);
    EXPECT_TRUE(in) << "cannot read " << file;
    Documented d;
    bool in_routes = false;
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("## ")) in_routes = line == "## Routes";
        if (!in_routes || !line.starts_with("|")) continue;
        const std::vector<std::string> c = cells(line);
        if (c.size() < 3) continue;
        const std::vector<std::string> methods = ticked(c[0]);
        if (methods.empty() || !std::all_of(methods.begin(), methods.end(), is_method)) continue;
        std::vector<std::string> paths;
        for (std::string p : ticked(c[1])) {
            if (!p.starts_with("/")) continue;
            if (const size_t q = p.find('?'); q != std::string::npos) p.resize(q);
            paths.push_back(normalize(p));
        }
        EXPECT_FALSE(paths.empty()) << "a route row names no path: " << line;
        ++d.rows;
        for (const std::string& p : paths) {
            d.patterns.insert(p);
            for (const std::string& m : methods) {
                const bool fresh = d.credential.emplace(Pair{m, p}, trim(c[2])).second;
                EXPECT_TRUE(fresh) << m << " " << p << " is documented twice in " << file;
            }
        }
    }
    return d;
}

// Compares what a binary serves (each pair and the credential its page must name) with what its
// page documents; prints the documented routes.
void compare(const std::string& page, const std::map<Pair, std::string>& served) {
    const Documented d = read_page(std::string(FENEC_DOCS_DIR) + "/" + page);
    std::vector<std::string> undocumented, unserved, wrong_credential;
    for (const auto& [pair, credential] : served) {
        auto it = d.credential.find(pair);
        if (it == d.credential.end()) {
            undocumented.push_back(pair.first + " " + pair.second);
        } else if (it->second != credential) {
            wrong_credential.push_back(pair.first + " " + pair.second + ": the page says `" +
                                       it->second + "`, the binary takes `" + credential + "`");
        }
    }
    for (const auto& [pair, credential] : d.credential) {
        if (!served.contains(pair)) unserved.push_back(pair.first + " " + pair.second);
    }
    std::cout << page << ": " << d.patterns.size() << " routes documented (" << d.credential.size()
              << " method and path pairs, " << served.size() << " served)\n";
    for (const std::string& p : d.patterns) {
        std::string methods;
        for (const auto& [pair, c] : d.credential) {
            if (pair.second == p) methods += (methods.empty() ? "" : ", ") + pair.first;
        }
        std::cout << "  " << methods << " " << p << "\n";
    }
    auto list = [](const std::vector<std::string>& v) {
        std::string out;
        for (const std::string& s : v) out += "\n  " + s;
        return out;
    };
    EXPECT_TRUE(undocumented.empty())
        << page << " does not document what the binary serves:" << list(undocumented);
    EXPECT_TRUE(unserved.empty()) << page
                                  << " documents what the binary does not serve:" << list(unserved);
    EXPECT_TRUE(wrong_credential.empty())
        << page << " names another credential:" << list(wrong_credential);
}

template <typename Row, typename Credential>
std::map<Pair, std::string> served_pairs(std::span<const Row> rows, Credential credential) {
    std::map<Pair, std::string> out;
    for (const Row& r : rows) {
        const std::string p = normalize(r.pattern);
        if (r.methods.is_any()) {
            out[{"any", p}] = credential(r.plane);
            continue;
        }
        for (http::Method m : all_methods) {
            if (r.methods.has(m)) out[{std::string(http::method_name(m)), p}] = credential(r.plane);
        }
    }
    return out;
}

// The credential cell each plane's rows carry in the page.
std::string node_credential(auth::Credential plane) {
    switch (plane) {
        case auth::Credential::data:
            return "data token or JWT";
        case auth::Credential::admin:
            return "admin token";
        case auth::Credential::replication:
            return "replication token";
        default:
            return "none";
    }
}

std::string shard_credential(shard::ShardPlane plane) {
    switch (plane) {
        case shard::ShardPlane::node:
            return "the node's";
        case shard::ShardPlane::shard:
            return "`--token`";
        case shard::ShardPlane::replication:
            return "`--replication-token`";
        default:
            return "none";
    }
}

TEST(RoutesDocumented, Node) {
    compare("http-node.md", served_pairs(node::node_routes(), node_credential));
}

TEST(RoutesDocumented, Router) {
    compare("http-router.md", served_pairs(shard::shard_routes(), shard_credential));
}

}  // namespace
}  // namespace fenec
