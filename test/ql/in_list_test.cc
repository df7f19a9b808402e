// test/ql/in_list_test.cc: proves that `in` answers the same whether its list is compared item
// by item or hashed (past ql::limits::in_list_linear_max, ql/eval.h): random rows and random
// lists of mixed kinds (ints, floats equal to ints, other floats, nulls, texts in several cases,
// Turkish dotted and dotless i, ß, lists) on a json field (bytes rule), and of texts and nulls
// (what a text field's comparison takes, §6.2) on nocase, `tr nocase` and `und` text fields, each
// row's answer checked against a linear oracle of equal_values.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "index/index_set.h"
#include "ql/compare.h"
#include "ql/eval.h"
#include "ql/executor.h"
#include "ql/limits.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::in_list_test {
namespace {

using engine::Collation;
using engine::Database;
using engine::Value;

struct Field {
    std::string name;
    index::TextRule rule;
};

const std::vector<Field> kFields = {
    {"j", index::TextRule{}},
    {"t", index::field_rule(Collation::bytes, true)},
    {"u", index::field_rule(Collation::tr, true)},
    {"c", index::field_rule(Collation::und, false)},
};

struct Tenant {
    EngineEnv env;
    index::IndexSet indexes;
    std::unique_ptr<Database> db;

    Tenant() {
        engine::OpenOptions o = env.options(engine::SyncPolicy::at_close());
        o.hook = &indexes;
        auto created = Database::create("/t.fenec", o);
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
        auto created_r =
            run("create collection r (j json, t text nocase, u text collate tr nocase, "
                "c text collate und)",
                {});
        EXPECT_TRUE(created_r) << created_r.error().to_string();
    }
    ql::QlResult<ql::Answer> run(const std::string& text, const std::vector<Value>& params) {
        auto parsed = ql::parse(text);
        EXPECT_TRUE(parsed) << text << ": " << parsed.error().to_string();
        if (!parsed) return parsed.take_error();
        return ql::Executor(*db, indexes).run(parsed.value(), params);
    }
};

// Texts that are equal under one rule and not another: case, the Turkish i's, ß and "ss",
// a precomposed and a decomposed á (equal to ICU, not to FenecQL's equality).
std::string random_text(std::mt19937_64& rng) {
    static const char* parts[] = {"a",
                                  "A",
                                  "i",
                                  "I",
                                  "\xC4\xB0" /* İ */,
                                  "\xC4\xB1" /* ı */,
                                  "\xC3\x9F" /* ß */,
                                  "ss",
                                  "SS",
                                  "\xC3\xA1" /* á */,
                                  "a\xCC\x81" /* a + U+0301 */};
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) s += parts[rng() % std::size(parts)];
    return s;
}

Value random_value(std::mt19937_64& rng, bool text_field) {
    const int64_t k = static_cast<int64_t>(rng() % 400);
    if (text_field) return rng() % 8 == 0 ? Value() : Value(random_text(rng));
    switch (rng() % 10) {
        case 0:
            return Value();
        case 1:
            return Value(k);
        case 2:
        case 3:
        case 4:
        case 5:
            return Value(random_text(rng));
        case 6:
            return Value(static_cast<double>(k));  // equal to the int k
        case 7:
            return Value(static_cast<double>(k) + 0.5);
        case 8:
            return Value(engine::List{{Value(k % 3), Value(static_cast<double>(k % 2))}});
        default:
            return Value(k % 2 == 0);
    }
}

bool linear_oracle(const Value& v, const std::vector<Value>& list, const index::TextRule& rule) {
    for (const Value& item : list) {
        if (ql::equal_values(v, item, rule)) return true;
    }
    return false;
}

std::set<uint64_t> ids_of(const ql::Answer& a) {
    std::set<uint64_t> ids;
    for (const ql::Row& r : a.table.rows)
        ids.insert(static_cast<uint64_t>(std::get<int64_t>(r.cells[0].rep)));
    return ids;
}

TEST(InList, HashedMatchesLinearOracle) {
    Tenant t;
    std::mt19937_64 rng(17);
    constexpr int kRows = 400;
    std::vector<std::vector<Value>> rows;  // by field, in the order of kFields; row i has _id i+1
    for (int i = 0; i < kRows; ++i) {
        std::vector<Value> row;
        for (const Field& f : kFields) {
            Value v = random_value(rng, f.name != "j");
            if (f.name != "j" && !v.is_null() && !std::holds_alternative<std::string>(v.rep)) {
                v = Value(random_text(rng));  // a text field holds texts and nulls
            }
            row.push_back(std::move(v));
        }
        auto landed = t.run("insert r {j: $1, t: $2, u: $3, c: $4}", row);
        ASSERT_TRUE(landed) << landed.error().to_string();
        rows.push_back(std::move(row));
    }
    // Both sides of the threshold, up to 10 000 items; each list judged in both polarities.
    for (size_t size : {size_t{3}, ql::limits::in_list_linear_max,
                        ql::limits::in_list_linear_max + 1, size_t{200}, size_t{10'000}}) {
        for (size_t f = 0; f < kFields.size(); ++f) {
            std::vector<Value> items;
            for (size_t i = 0; i < size; ++i) items.push_back(random_value(rng, f != 0));
            for (const bool negated : {false, true}) {
                const std::string text = "get r select _id where " + kFields[f].name +
                                         (negated ? " not in $1" : " in $1");
                auto a = t.run(text, {Value(engine::List{items})});
                ASSERT_TRUE(a) << text << ": " << a.error().to_string();
                const std::set<uint64_t> got = ids_of(a.value());
                size_t kept = 0;
                for (int i = 0; i < kRows; ++i) {
                    const bool want = linear_oracle(rows[i][f], items, kFields[f].rule) != negated;
                    kept += want;
                    EXPECT_EQ(got.contains(uint64_t(i + 1)), want)
                        << text << " with " << size << " items, row " << i + 1;
                }
                EXPECT_EQ(got.size(), kept);
            }
        }
    }
}

TEST(InList, KeyIsEqualExactlyWhenValuesAre) {
    std::mt19937_64 rng(7);
    for (const Field& f : kFields) {
        for (int i = 0; i < 20'000; ++i) {
            const Value a = random_value(rng, false);
            const Value b = random_value(rng, false);
            EXPECT_EQ(ql::in_key(a, f.rule) == ql::in_key(b, f.rule),
                      ql::equal_values(a, b, f.rule))
                << f.name << " pair " << i;
        }
    }
}

}  // namespace
}  // namespace fenec::test::in_list_test
