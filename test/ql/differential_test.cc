// test/ql/differential_test.cc: proves indexes change speed, never answers (fenecql.md §4.1):
// random where/order/limit queries answer the same rows on a tenant with @hash, @unique and
// @sorted indexes, on one without, and as a naive scan written here over the same rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::differential_test {
namespace {

using engine::Database;

struct ModelRow {
    uint64_t id;
    std::optional<int64_t> a;  // @hash
    std::optional<int64_t> b;  // @sorted
    int64_t u;                 // @unique
};

struct Tenant {
    EngineEnv env;
    index::IndexSet indexes;
    std::unique_ptr<Database> db;

    explicit Tenant(bool indexed) {
        engine::OpenOptions o = env.options(engine::SyncPolicy::at_close());
        o.hook = &indexes;
        auto created = Database::create("/t.fenec", o);
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
        run(indexed ? "create collection r (a int @hash, b int @sorted, u int @unique)"
                    : "create collection r (a int, b int, u int)");
    }
    std::string run(const std::string& text) {
        auto parsed = ql::parse(text);
        EXPECT_TRUE(parsed) << text << ": " << parsed.error().to_string();
        if (!parsed) return "";
        ql::Executor ex(*db, indexes);
        auto answer = ex.run(parsed.value(), {});
        if (!answer) return "error " + answer.error().to_string();
        return ql::to_json(answer.value());
    }
};

std::string lit(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "null"; }

// A predicate both as FenecQL text and as a C++ test on a model row.
struct Pred {
    std::string text;
    std::function<bool(const ModelRow&)> test;
};

Pred random_pred(std::mt19937_64& rng, int depth = 0) {
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    const int64_t k = pick(60);
    switch (depth < 2 ? pick(9) : pick(6)) {
        case 0: return {"a = " + std::to_string(k), [k](const ModelRow& r) { return r.a == k; }};
        case 1: return {"a != " + std::to_string(k), [k](const ModelRow& r) { return r.a != k; }};
        case 2: return {"b < " + std::to_string(k), [k](const ModelRow& r) { return r.b && *r.b < k; }};
        case 3: return {"b >= " + std::to_string(k), [k](const ModelRow& r) { return r.b && *r.b >= k; }};
        case 4: {
            const int64_t j = pick(60);
            return {"a in [" + std::to_string(k) + ", " + std::to_string(j) + "]",
                    [k, j](const ModelRow& r) { return r.a == k || r.a == j; }};
        }
        case 5: return {"u = " + std::to_string(k * 7), [k](const ModelRow& r) { return r.u == k * 7; }};
        case 6: {
            Pred l = random_pred(rng, depth + 1), r = random_pred(rng, depth + 1);
            return {"(" + l.text + " and " + r.text + ")",
                    [l, r](const ModelRow& m) { return l.test(m) && r.test(m); }};
        }
        case 7: {
            Pred l = random_pred(rng, depth + 1), r = random_pred(rng, depth + 1);
            return {"(" + l.text + " or " + r.text + ")",
                    [l, r](const ModelRow& m) { return l.test(m) || r.test(m); }};
        }
        default: {
            Pred p = random_pred(rng, depth + 1);
            return {"not " + p.text, [p](const ModelRow& m) { return !p.test(m); }};
        }
    }
}

std::string expected_json(std::vector<ModelRow> rows, const Pred& p, const std::string& key,
                          bool desc, uint64_t offset, uint64_t limit) {
    std::erase_if(rows, [&](const ModelRow& r) { return !p.test(r); });
    auto value = [&](const ModelRow& r) -> std::optional<int64_t> {
        return key == "a" ? r.a : key == "b" ? r.b : std::optional<int64_t>(r.u);
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const ModelRow& x, const ModelRow& y) {
        const auto vx = value(x), vy = value(y);  // null is the least value
        if (vx == vy) return x.id < y.id;
        const bool less = !vx || (vy && *vx < *vy);
        return desc ? !less : less;
    });
    std::string out = "{\"rows\":[";
    for (uint64_t i = offset; i < rows.size() && i < offset + limit; ++i) {
        if (i > offset) out += ",";
        out += "{\"_id\":" + std::to_string(rows[i].id) + ",\"a\":" + lit(rows[i].a) +
               ",\"b\":" + lit(rows[i].b) + ",\"u\":" + std::to_string(rows[i].u) + "}";
    }
    return out + "]}";
}

TEST(DifferentialTest, IndexedAndPlainAnswerAsTheNaiveScan) {
    std::mt19937_64 rng(20261130);
    Tenant indexed(true), plain(false);
    std::vector<ModelRow> model;
    std::vector<int64_t> us(400);
    for (size_t i = 0; i < us.size(); ++i) us[i] = static_cast<int64_t>(i) * 7;
    std::shuffle(us.begin(), us.end(), rng);
    std::string batch;
    for (size_t i = 0; i < us.size(); ++i) {
        ModelRow r{i + 1, std::nullopt, std::nullopt, us[i]};
        if (rng() % 8) r.a = static_cast<int64_t>(rng() % 40);
        if (rng() % 8) r.b = static_cast<int64_t>(rng() % 60);
        model.push_back(r);
        batch += std::string(batch.empty() ? "" : ", ") + "{a: " + lit(r.a) + ", b: " + lit(r.b) +
                 ", u: " + std::to_string(r.u) + "}";
    }
    const std::string ins = "insert r [" + batch + "]";
    ASSERT_EQ(indexed.run(ins), plain.run(ins));
    // Some deletes and updates, so the indexes must follow writes.
    for (const char* w : {"del r where a = 3", "set r {b: 17} where a = 5", "set r {a: 9} where b = 2"}) {
        ASSERT_EQ(indexed.run(w), plain.run(w)) << w;
    }
    std::erase_if(model, [](const ModelRow& r) { return r.a == 3; });
    for (ModelRow& r : model) {
        if (r.a == 5) r.b = 17;
    }
    for (ModelRow& r : model) {
        if (r.b == 2) r.a = 9;
    }
    const char* keys[] = {"a", "b", "u"};
    for (int q = 0; q < 300; ++q) {
        const Pred p = random_pred(rng);
        const std::string key = keys[rng() % 3];
        const bool desc = rng() % 2;
        const uint64_t offset = rng() % 5, limit = 1 + rng() % 30;
        const std::string text = "get r where " + p.text + " order " + key + (desc ? " desc" : "") +
                                 " limit " + std::to_string(limit) + " offset " + std::to_string(offset);
        const std::string want = expected_json(model, p, key, desc, offset, limit);
        EXPECT_EQ(indexed.run(text), want) << text;
        EXPECT_EQ(plain.run(text), want) << text;
    }
}

}  // namespace
}  // namespace fenec::test::differential_test
