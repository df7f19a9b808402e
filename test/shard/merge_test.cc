// test/shard/merge_test.cc: the merges of the query across tenants (shard/merge.h) against an
// oracle that sorts and groups all rows together with ql::compare_values under each column's own
// text rule: random rows, random keys and rules (bytes, und, tr, nocase), random tenants. The k-way
// merge of per-tenant sorted answers equals a stable sort of their union taken in tenant order;
// a fold equals folding the union. Also: the request's `merge` refusals, a timestamp's text
// compared as its time, and the misfits a tenant fails for.
#include "shard/merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "json/timestamp.h"
#include "json/writer.h"
#include "ql/compare.h"

namespace fenec::shard::merge_test {
namespace {

using engine::Value;

struct Parsed {
    simdjson::dom::parser parser;
    simdjson::dom::element e;
};

std::optional<MergeRefusal> spec_of(const std::string& json, MergeSpec& spec) {
    Parsed p;
    EXPECT_FALSE(p.parser.parse(json).get(p.e)) << json;
    return parse_merge(&p.e, spec);
}

MergeSpec must_spec(const std::string& json) {
    MergeSpec spec;
    auto r = spec_of(json, spec);
    EXPECT_FALSE(r.has_value()) << json << ": " << (r ? r->message : "");
    return spec;
}

// A random row's values: `a` a number, null or timestamp; `b` a short text of letters whose
// case and Turkish folds differ; `n` an int; `x` a float of quarters (sums exact in any order).
struct GenRow {
    Value a, b, n, x;
};

std::string row_json(const GenRow& r) {
    std::string out = "{\"a\":";
    write_value(out, r.a);
    out += ",\"b\":";
    write_value(out, r.b);
    out += ",\"n\":";
    write_value(out, r.n);
    out += ",\"x\":";
    write_value(out, r.x);
    out += "}";
    return out;
}

GenRow random_row(std::mt19937_64& rng) {
    static const char* letters[] = {"i", "I", "ı", "İ", "a", "A", "ç", "Ç", "z", "Z"};
    GenRow r;
    switch (rng() % 5) {
        case 0: r.a = Value{}; break;
        case 1: r.a = Value{static_cast<int64_t>(rng() % 7) - 3}; break;
        case 2: r.a = Value{static_cast<double>(static_cast<int64_t>(rng() % 13) - 6) / 2}; break;
        default:
            // Timestamps on the same second with and without milliseconds: bytes and time
            // disagree (`…00Z` > `…00.500Z` by bytes).
            r.a = Value{engine::Timestamp{1'714'557'600'000 + static_cast<int64_t>(rng() % 4) * 500}};
    }
    std::string b;
    for (size_t i = 0, n = 1 + rng() % 3; i < n; ++i) b += letters[rng() % 10];
    r.b = Value{b};
    r.n = Value{static_cast<int64_t>(rng() % 1000) - 500};
    r.x = Value{static_cast<double>(rng() % 40) / 4};
    return r;
}

index::TextRule random_rule(std::mt19937_64& rng, std::string& json) {
    static const engine::Collation cs[] = {engine::Collation::bytes, engine::Collation::und,
                                           engine::Collation::tr};
    const engine::Collation c = cs[rng() % 3];
    const bool nocase = rng() % 2;
    json = "{\"column\":\"b\"";
    if (c != engine::Collation::bytes) json += c == engine::Collation::tr ? ",\"collate\":\"tr\"" : ",\"collate\":\"und\"";
    if (nocase) json += ",\"nocase\":true";
    return index::TextRule{c, nocase, c};
}

// A random order's keys; the rule and direction of each, for the oracle.
struct OracleKey {
    int column;  // 0 a, 1 b
    bool desc;
    index::TextRule rule;
};

const Value& cell(const GenRow& r, int column) { return column == 0 ? r.a : r.b; }

TEST(Merge, OrderEqualsStableSortOfUnion) {
    std::mt19937_64 rng(20261130);
    for (int round = 0; round < 300; ++round) {
        std::vector<OracleKey> keys;
        std::string json = "{\"kind\":\"order\",\"keys\":[";
        const bool b_first = rng() % 2;
        for (int k = 0; k < 2; ++k) {
            const int column = (k == 0) == b_first ? 1 : 0;
            if (k == 1 && rng() % 3 == 0) break;
            OracleKey key{column, static_cast<bool>(rng() % 2), {}};
            if (k) json += ",";
            if (column == 1) {
                std::string obj;
                key.rule = random_rule(rng, obj);
                json += obj + (key.desc ? ",\"desc\":true}" : "}");
            } else {
                json += key.desc ? "\"a desc\"" : "\"a\"";
            }
            keys.push_back(key);
        }
        json += "]}";
        const MergeSpec spec = must_spec(json);
        auto less = [&](const GenRow& x, const GenRow& y) {
            for (const OracleKey& k : keys) {
                int c = ql::compare_values(cell(x, k.column), cell(y, k.column), k.rule);
                if (k.desc) c = -c;
                if (c != 0) return c < 0;
            }
            return false;
        };
        const size_t tenants = 1 + rng() % 6;
        std::vector<std::vector<GenRow>> data(tenants);
        std::vector<TenantInput> inputs(tenants);
        std::vector<const TenantInput*> ptrs;
        std::vector<std::pair<uint32_t, uint32_t>> oracle_rows;  // (tenant, row)
        for (size_t t = 0; t < tenants; ++t) {
            for (size_t i = 0, n = rng() % 12; i < n; ++i) data[t].push_back(random_row(rng));
            std::stable_sort(data[t].begin(), data[t].end(), less);
            std::string body = "{\"rows\":[";
            for (size_t i = 0; i < data[t].size(); ++i) {
                body += (i ? "," : "") + row_json(data[t][i]);
                oracle_rows.emplace_back(static_cast<uint32_t>(t), static_cast<uint32_t>(i));
            }
            body += "]}";
            std::string why;
            ASSERT_TRUE(prepare_tenant(spec, body, inputs[t], why)) << json << " " << why << body;
            ptrs.push_back(&inputs[t]);
        }
        std::stable_sort(oracle_rows.begin(), oracle_rows.end(), [&](auto p, auto q) {
            return less(data[p.first][p.second], data[q.first][q.second]);
        });
        const std::vector<MergedRow> merged = merge_order(spec, ptrs);
        ASSERT_EQ(merged.size(), oracle_rows.size());
        for (size_t i = 0; i < merged.size(); ++i) {
            ASSERT_EQ(merged[i].tenant, oracle_rows[i].first) << json << " at " << i;
            ASSERT_EQ(merged[i].row, oracle_rows[i].second) << json << " at " << i;
            // The row passed on is the node's own bytes.
            EXPECT_EQ(inputs[merged[i].tenant].rows[merged[i].row],
                      row_json(data[merged[i].tenant][merged[i].row]));
        }
    }
}

// merge_order compares two values of one plain kind (ints, timestamps or texts) by that kind
// without compare_values: the same stable sort of the union, for each kind, ascending and
// descending, one key or two.
TEST(Merge, OrderOfOneKindOfKeyEqualsStableSortOfUnion) {
    std::mt19937_64 rng(31);
    for (int round = 0; round < 300; ++round) {
        const int kind = static_cast<int>(rng() % 3);  // 0 int, 1 timestamp, 2 text
        const bool desc = rng() % 2;
        const bool two = rng() % 3 == 0;  // then `n` breaks ties
        const std::string json = std::string("{\"kind\":\"order\",\"keys\":[") +
                                 (desc ? "\"a desc\"" : "\"a\"") + (two ? ",\"n\"" : "") + "]}";
        const MergeSpec spec = must_spec(json);
        auto value = [&]() -> Value {
            const auto v = static_cast<int64_t>(rng() % 9) - 4;
            if (kind == 0) return Value{v};
            if (kind == 1) return Value{engine::Timestamp{1'714'557'600'000 + v * 500}};
            return Value{std::string(1 + rng() % 2, static_cast<char>('m' + v))};
        };
        auto less = [&](const GenRow& x, const GenRow& y) {
            int c = ql::compare_values(x.a, y.a, {});
            if (desc) c = -c;
            if (c == 0 && two) c = ql::compare_values(x.n, y.n, {});
            return c < 0;
        };
        const size_t tenants = 1 + rng() % 6;
        std::vector<std::vector<GenRow>> data(tenants);
        std::vector<TenantInput> inputs(tenants);
        std::vector<const TenantInput*> ptrs;
        std::vector<std::pair<uint32_t, uint32_t>> oracle_rows;
        for (size_t t = 0; t < tenants; ++t) {
            for (size_t i = 0, n = rng() % 12; i < n; ++i) {
                GenRow r = random_row(rng);
                r.a = value();
                r.n = Value{static_cast<int64_t>(rng() % 3)};
                data[t].push_back(r);
            }
            std::stable_sort(data[t].begin(), data[t].end(), less);
            std::string body = "{\"rows\":[";
            for (size_t i = 0; i < data[t].size(); ++i) {
                body += (i ? "," : "") + row_json(data[t][i]);
                oracle_rows.emplace_back(static_cast<uint32_t>(t), static_cast<uint32_t>(i));
            }
            body += "]}";
            std::string why;
            ASSERT_TRUE(prepare_tenant(spec, body, inputs[t], why)) << json << " " << why;
            ptrs.push_back(rng() % 8 ? &inputs[t] : nullptr);  // a failed tenant now and then
        }
        std::erase_if(oracle_rows, [&](auto p) { return ptrs[p.first] == nullptr; });
        std::stable_sort(oracle_rows.begin(), oracle_rows.end(), [&](auto p, auto q) {
            return less(data[p.first][p.second], data[q.first][q.second]);
        });
        const std::vector<MergedRow> merged = merge_order(spec, ptrs);
        ASSERT_EQ(merged.size(), oracle_rows.size()) << json;
        for (size_t i = 0; i < merged.size(); ++i) {
            ASSERT_EQ(merged[i].tenant, oracle_rows[i].first) << json << " at " << i;
            ASSERT_EQ(merged[i].row, oracle_rows[i].second) << json << " at " << i;
        }
    }
}

// OrderMerge (the order merged as the answers arrive) takes the tenants in whatever order they
// answer, some not at all, and gives the stable sort of the union of those that did in tenant
// order: mixed kinds of key (null, ints, floats, timestamps in one column), texts under every
// rule, many ties, up to 40 tenants so the binary counter carries several times.
TEST(Merge, OrderMergeInAnyOrderOfArrivalEqualsStableSortOfUnion) {
    std::mt19937_64 rng(20261203);
    for (int round = 0; round < 300; ++round) {
        std::string rule_json;
        const index::TextRule rule = random_rule(rng, rule_json);
        const bool desc = rng() % 2;
        const bool text_first = rng() % 2;
        const std::string a_key = desc ? "\"a desc\"" : "\"a\"";
        const std::string keys =
            text_first ? rule_json + "}," + a_key : a_key + "," + rule_json + "}";
        const std::string json = "{\"kind\":\"order\",\"keys\":[" + keys + "]}";
        const MergeSpec spec = must_spec(json);
        auto less = [&](const GenRow& x, const GenRow& y) {
            int ca = ql::compare_values(x.a, y.a, {});
            if (desc) ca = -ca;
            const int cb = ql::compare_values(x.b, y.b, rule);
            const int c = text_first ? (cb != 0 ? cb : ca) : (ca != 0 ? ca : cb);
            return c < 0;
        };
        const size_t tenants = 1 + rng() % 40;
        std::vector<std::vector<GenRow>> data(tenants);
        std::vector<TenantInput> inputs(tenants);
        std::vector<bool> answered(tenants);
        std::vector<std::pair<uint32_t, uint32_t>> oracle_rows;
        for (size_t t = 0; t < tenants; ++t) {
            for (size_t i = 0, n = rng() % 8; i < n; ++i) data[t].push_back(random_row(rng));
            std::stable_sort(data[t].begin(), data[t].end(), less);
            std::string body = "{\"rows\":[";
            for (size_t i = 0; i < data[t].size(); ++i) {
                body += (i ? "," : "") + row_json(data[t][i]);
            }
            body += "]}";
            std::string why;
            ASSERT_TRUE(prepare_tenant(spec, body, inputs[t], why)) << json << " " << why;
            answered[t] = rng() % 8 != 0;  // a failed tenant now and then
            for (size_t i = 0; answered[t] && i < data[t].size(); ++i) {
                oracle_rows.emplace_back(static_cast<uint32_t>(t), static_cast<uint32_t>(i));
            }
        }
        std::stable_sort(oracle_rows.begin(), oracle_rows.end(), [&](auto p, auto q) {
            return less(data[p.first][p.second], data[q.first][q.second]);
        });
        std::vector<uint32_t> arrival(tenants);
        for (uint32_t t = 0; t < tenants; ++t) arrival[t] = t;
        std::shuffle(arrival.begin(), arrival.end(), rng);
        OrderMerge merge(spec);
        for (uint32_t t : arrival) {
            if (answered[t]) merge.add(t, inputs[t]);
        }
        const std::vector<MergedRow> merged = merge.finish();
        ASSERT_EQ(merged.size(), oracle_rows.size()) << json;
        for (size_t i = 0; i < merged.size(); ++i) {
            ASSERT_EQ(merged[i].tenant, oracle_rows[i].first) << json << " at " << i;
            ASSERT_EQ(merged[i].row, oracle_rows[i].second) << json << " at " << i;
        }
        EXPECT_TRUE(merge.finish().empty()) << "a finished merge starts empty";
    }
}

// The rows are split out byte for byte whatever their texts hold: escaped quotes, backslash
// runs before a closing quote, brackets and braces inside texts.
TEST(Merge, RowsSplitThroughEscapes) {
    const std::vector<std::string> rows = {
        R"({"s":"a\"b","t":1})", R"({"s":"\\","t":[1,{"u":"]"}]})", R"({"s":"\\\"}{","t":2})",
        R"({"s":"","t":"\\\\"})", R"({ "s" : "x" , "t" : null })"};
    std::string body = "{\"affected\":0,\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) body += (i ? " , " : "") + rows[i];
    body += "],\"x\":\"\\\"\"}";
    TenantInput in;
    std::string why;
    ASSERT_TRUE(prepare_tenant(MergeSpec{}, body, in, why)) << why << body;
    ASSERT_EQ(in.rows.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(in.rows[i], rows[i]);
    EXPECT_EQ(member_bytes(body, "x"), R"("\"")");
}

// A text is a timestamp exactly when format_timestamp(parse_timestamp(text)) gives it back.
TEST(Merge, TimestampTextIsTheEngineFormExactly) {
    std::mt19937_64 rng(5);
    std::vector<std::string> texts = {
        "2024-05-01T10:00:00Z", "2024-05-01T10:00:00.500Z", "2024-05-01T10:00:00.000Z",
        "2024-05-01t10:00:00Z", "2024-05-01T10:00:00z", "2024-05-01 10:00:00Z",
        "2024-02-30T10:00:00Z", "2024-02-29T23:59:59.999Z", "2023-02-29T00:00:00Z",
        "2024-05-01T24:00:00Z", "2024-05-01T10:60:00Z", "2024-05-01T10:00:60Z",
        "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2024-05-01T10:00:00.5Z",
        "2024-05-01T10:00:00.05Z", "2024-05-01T10:00:00+00Z", "+024-05-01T10:00:00Z",
        "2024-5-01T10:00:00.500Z", "2024-05-01T10:00:00.5000", "2024-05-01T10:00:00.50aZ"};
    for (int i = 0; i < 2000; ++i) {
        const int64_t ms =
            json::timestamp_ms_min +
            static_cast<int64_t>(
                rng() % static_cast<uint64_t>(json::timestamp_ms_max - json::timestamp_ms_min));
        std::string t = json::format_timestamp(i % 2 ? ms : ms - ms % 1000);
        if (i % 5 == 0) t[rng() % t.size()] = "0159:-.TZ"[rng() % 9];  // mostly broken
        texts.push_back(t);
    }
    simdjson::dom::parser parser;
    for (const std::string& t : texts) {
        const auto parsed = json::parse_timestamp(t);
        const bool engine_form = parsed && json::format_timestamp(*parsed) == t;
        simdjson::dom::element e;
        const std::string json = "\"" + t + "\"";
        ASSERT_FALSE(parser.parse(json).get(e));
        const Value v = to_value(e, false);
        const auto* ts = std::get_if<engine::Timestamp>(&v.rep);
        EXPECT_EQ(ts != nullptr, engine_form) << t;
        if (ts && parsed) {
            EXPECT_EQ(ts->ms, *parsed) << t;
        }
    }
}

TEST(Merge, FoldEqualsFoldOfUnion) {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 300; ++round) {
        std::string group_json;
        const index::TextRule rule = random_rule(rng, group_json);
        const bool use_max = rng() % 2;
        const std::string json = "{\"kind\":\"fold\",\"group\":[" + group_json + "}],\"sum\":[\"n\",\"x\"],\"" +
                                 (use_max ? "max" : "min") + "\":[\"a\"]}";
        const MergeSpec spec = must_spec(json);
        // The oracle: the union folded row by row in tenant order.
        struct Group {
            Value b;
            __int128 n = 0;
            double x = 0;
            Value a;
            bool any_a = false;
        };
        std::vector<Group> groups;
        const size_t tenants = 1 + rng() % 5;
        std::vector<TenantInput> inputs(tenants);
        std::vector<const TenantInput*> ptrs;
        for (size_t t = 0; t < tenants; ++t) {
            std::string body = "{\"rows\":[";
            for (size_t i = 0, n = rng() % 10; i < n; ++i) {
                const GenRow r = random_row(rng);
                body += (i ? "," : "") + row_json(r);
                auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
                    return ql::compare_values(x.b, r.b, rule) == 0;
                });
                if (g == groups.end()) {
                    groups.push_back({r.b, 0, 0, Value{}, false});
                    g = groups.end() - 1;
                }
                g->n += std::get<int64_t>(r.n.rep);
                g->x += std::get<double>(r.x.rep);
                if (!r.a.is_null()) {
                    const int c = g->any_a ? ql::compare_values(r.a, g->a, {}) : 0;
                    if (!g->any_a || (use_max ? c > 0 : c < 0)) g->a = r.a;
                    g->any_a = true;
                }
            }
            body += "]}";
            std::string why;
            ASSERT_TRUE(prepare_tenant(spec, body, inputs[t], why)) << why;
            ptrs.push_back(&inputs[t]);
        }
        std::sort(groups.begin(), groups.end(), [&](const Group& p, const Group& q) {
            return ql::compare_values(p.b, q.b, rule) < 0;
        });
        std::vector<std::string> want;
        for (const Group& g : groups) {
            // The group, then the folded columns in the order the tenants' rows give them.
            std::string row = "{\"b\":";
            write_value(row, g.b);
            row += ",\"a\":";
            write_value(row, g.any_a ? g.a : Value{});
            row += ",\"n\":" + std::to_string(static_cast<int64_t>(g.n)) + ",\"x\":";
            write_value(row, Value{g.x});
            row += "}";
            want.push_back(row);
        }
        std::vector<std::string> got;
        std::string overflow;
        ASSERT_TRUE(merge_fold(spec, ptrs, got, overflow));
        ASSERT_EQ(got, want) << json;
    }
}

TEST(Merge, TimestampTextComparesAsItsTime) {
    const MergeSpec spec = must_spec(R"({"kind":"order","keys":["at"]})");
    TenantInput in;
    std::string why;
    // By bytes `…00Z` sorts after `…00.500Z`; by time it comes first.
    EXPECT_TRUE(prepare_tenant(spec, R"({"rows":[{"at":"2024-05-01T10:00:00Z"},{"at":"2024-05-01T10:00:00.500Z"}]})", in, why)) << why;
    EXPECT_FALSE(prepare_tenant(spec, R"({"rows":[{"at":"2024-05-01T10:00:00.500Z"},{"at":"2024-05-01T10:00:00Z"}]})", in, why));
    EXPECT_EQ(why, "row 2 comes before row 1 by `at`");
    // Told as an object, the text is text: bytes order.
    const MergeSpec told = must_spec(R"({"kind":"order","keys":[{"column":"at"}]})");
    EXPECT_TRUE(prepare_tenant(told, R"({"rows":[{"at":"2024-05-01T10:00:00.500Z"},{"at":"2024-05-01T10:00:00Z"}]})", in, why)) << why;
}

TEST(Merge, MisfitsSayHow) {
    std::string why;
    TenantInput in;
    const MergeSpec order = must_spec(R"({"kind":"order","keys":["at desc"]})");
    EXPECT_FALSE(prepare_tenant(order, R"({"affected":1})", in, why));
    EXPECT_EQ(why, "the answer has no `rows` array of row objects");
    EXPECT_FALSE(prepare_tenant(order, R"({"rows":[{"at":1},{"x":2}]})", in, why));
    EXPECT_EQ(why, "row 2 lacks the key column `at`");
    EXPECT_FALSE(prepare_tenant(order, R"({"rows":[{"at":1},{"at":2}]})", in, why));
    EXPECT_EQ(why, "row 2 comes before row 1 by `at desc`");
    const MergeSpec fold = must_spec(R"({"kind":"fold","group":["s"],"sum":["n"]})");
    EXPECT_FALSE(prepare_tenant(fold, R"({"rows":[{"s":"a","n":1,"z":2}]})", in, why));
    EXPECT_NE(why.find("`z`, neither grouped nor folded"), std::string::npos) << why;
    EXPECT_FALSE(prepare_tenant(fold, R"({"rows":[{"s":"a"}]})", in, why));
    EXPECT_NE(why.find("lacks the column `n`"), std::string::npos) << why;
    EXPECT_FALSE(prepare_tenant(fold, R"({"rows":[{"s":"a","n":"x"}]})", in, why));
    EXPECT_NE(why.find("text in the sum column `n`"), std::string::npos) << why;
}

TEST(Merge, SumPast64BitsRefused) {
    const MergeSpec fold = must_spec(R"({"kind":"fold","sum":["n"]})");
    TenantInput a, b;
    std::string why;
    ASSERT_TRUE(prepare_tenant(fold, R"({"rows":[{"n":9223372036854775807}]})", a, why));
    ASSERT_TRUE(prepare_tenant(fold, R"({"rows":[{"n":1}]})", b, why));
    std::vector<std::string> rows;
    std::string column;
    EXPECT_FALSE(merge_fold(fold, {&a, &b}, rows, column));
    EXPECT_EQ(column, "n");
    // Back in range after a negative: exact, an int.
    TenantInput c;
    ASSERT_TRUE(prepare_tenant(fold, R"({"rows":[{"n":-5}]})", c, why));
    ASSERT_TRUE(merge_fold(fold, {&a, &b, &c}, rows, column));
    EXPECT_EQ(rows, std::vector<std::string>{"{\"n\":9223372036854775803}"});
}

TEST(Merge, RefusalsNameTheirCause) {
    MergeSpec s;
    auto r = spec_of(R"({"kind":"order","keys":[{"column":"n","collate":"de"}]})", s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->message, "unknown collation `de`: a key collates by tr or und");
    EXPECT_EQ(r->member, "collation");
    EXPECT_EQ(r->value, "de");
    r = spec_of(R"({"kind":"fold","min":[{"column":"n","desc":true}]})", s);
    ASSERT_TRUE(r);
    EXPECT_NE(r->message.find("desc"), std::string::npos);
    r = spec_of(R"({"kind":"fold","avg":["n"]})", s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->message, "an average of averages is not an average: sum its sum and its count");
    for (const char* bad : {R"({"kind":"order"})", R"({"kind":"order","keys":[]})",
                            R"({"kind":"concat","keys":["a"]})", R"({"kind":"zip"})",
                            R"({"kind":"order","keys":["a up"]})",
                            R"({"kind":"order","keys":[{"column":"a","nocase":"de"}]})",
                            R"({"kind":"fold"})", R"j({"kind":"fold","sum":["avg(n)"]})j",
                            R"({"kind":"fold","group":["a"],"sum":["a"]})",
                            R"({"kind":"order","keys":[{"column":"a","x":1}]})"}) {
        EXPECT_TRUE(spec_of(bad, s).has_value()) << bad;
    }
}

}  // namespace
}  // namespace fenec::shard::merge_test
