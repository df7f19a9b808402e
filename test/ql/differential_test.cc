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
    // The statements run as one block (each sees the ones before it, before anything lands):
    // each answer's JSON, or the error.
    std::vector<std::string> run_block(const std::vector<std::string>& texts) {
        std::vector<ql::ParsedStatement> parsed;
        for (const std::string& t : texts) {
            auto p = ql::parse(t);
            EXPECT_TRUE(p) << t;
            if (!p) return {};
            parsed.push_back(std::move(p.value()));
        }
        std::vector<ql::Item> items;
        for (const auto& p : parsed) items.push_back(ql::Item{&p, {}});
        ql::BlockOutcome o = ql::Executor(*db, indexes).run_block(items, {});
        if (o.error) return {"error " + o.error->to_string()};
        std::vector<std::string> out;
        for (const auto& a : o.answers) out.push_back(ql::to_json(a));
        return out;
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

// With `ids`, `_id = n` and `_id in [...]` are among the leaves too (ids up to 420).
Pred random_pred(std::mt19937_64& rng, int depth = 0, bool ids = false) {
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    const int64_t k = pick(60);
    const int kinds = depth < 2 ? 9 : 6;
    int kind = pick(kinds + (ids ? 2 : 0));
    if (kind >= kinds) {
        const uint64_t i = 1 + rng() % 420, j = 1 + rng() % 420;
        if (kind == kinds) {
            return {"_id = " + std::to_string(i), [i](const ModelRow& r) { return r.id == i; }};
        }
        if (rng() % 4 == 0) {  // values no id holds, or of another kind: the filter decides
            const char* other[] = {"-3", "2.0", "null"};  // a text is a 400
            const std::string o = other[rng() % 3];
            return {"_id in [" + std::to_string(i) + ", " + o + "]",
                    [i, o](const ModelRow& r) { return r.id == i || (o == "2.0" && r.id == 2); }};
        }
        return {"_id in [" + std::to_string(i) + ", 0, " + std::to_string(j) + "]",
                [i, j](const ModelRow& r) { return r.id == i || r.id == j; }};
    }
    switch (kind) {
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
            Pred l = random_pred(rng, depth + 1, ids), r = random_pred(rng, depth + 1, ids);
            return {"(" + l.text + " and " + r.text + ")",
                    [l, r](const ModelRow& m) { return l.test(m) && r.test(m); }};
        }
        case 7: {
            Pred l = random_pred(rng, depth + 1, ids), r = random_pred(rng, depth + 1, ids);
            return {"(" + l.text + " or " + r.text + ")",
                    [l, r](const ModelRow& m) { return l.test(m) || r.test(m); }};
        }
        default: {
            Pred p = random_pred(rng, depth + 1, ids);
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

// One row a value of `us`, ids from 1, `a` and `b` drawn (null one time in eight), appended to
// `model`; the statement inserting them.
std::string insert_rows(std::mt19937_64& rng, const std::vector<int64_t>& us,
                        std::vector<ModelRow>& model) {
    std::string batch;
    for (size_t i = 0; i < us.size(); ++i) {
        ModelRow r{i + 1, std::nullopt, std::nullopt, us[i]};
        if (rng() % 8) r.a = static_cast<int64_t>(rng() % 40);
        if (rng() % 8) r.b = static_cast<int64_t>(rng() % 60);
        model.push_back(r);
        batch += std::string(batch.empty() ? "" : ", ") + "{a: " + lit(r.a) + ", b: " + lit(r.b) +
                 ", u: " + std::to_string(r.u) + "}";
    }
    return "insert r [" + batch + "]";
}

TEST(DifferentialTest, IndexedAndPlainAnswerAsTheNaiveScan) {
    std::mt19937_64 rng(20261130);
    Tenant indexed(true), plain(false);
    std::vector<int64_t> us(400);
    for (size_t i = 0; i < us.size(); ++i) us[i] = static_cast<int64_t>(i) * 7;
    std::shuffle(us.begin(), us.end(), rng);
    std::vector<ModelRow> model;
    const std::string ins = insert_rows(rng, us, model);
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

// Writes pick their rows as reads do: `set` and `del` narrowed by an index (or by `_id`) write
// the rows a scan would, in blocks of several statements where each sees the writes before it
// (the indexes hold them before anything lands), with `order`/`limit` and reads in between.
TEST(DifferentialTest, IndexedAndPlainWriteAsTheNaiveScan) {
    std::mt19937_64 rng(20261207);
    Tenant indexed(true), plain(false);
    std::vector<int64_t> us(400);
    for (size_t i = 0; i < us.size(); ++i) us[i] = static_cast<int64_t>(i) * 7;
    std::vector<ModelRow> model;
    const std::string ins = insert_rows(rng, us, model);
    ASSERT_EQ(indexed.run(ins), plain.run(ins));
    const Pred all{"", [](const ModelRow&) { return true; }};
    uint64_t next_id = 401;
    size_t written = 0;
    for (int round = 0; round < 120; ++round) {
        std::vector<std::string> texts, want;
        const int n = 2 + static_cast<int>(rng() % 4);
        for (int s = 0; s < n; ++s) {
            const Pred p = random_pred(rng, 0, true);
            std::vector<ModelRow*> hit;
            for (ModelRow& r : model) {
                if (p.test(r)) hit.push_back(&r);
            }
            std::string tail;
            switch (rng() % 6) {
                case 0: {  // the first rows by u (unique, never null)
                    const size_t limit = rng() % 4;
                    std::sort(hit.begin(), hit.end(),
                              [](const ModelRow* x, const ModelRow* y) { return x->u < y->u; });
                    if (hit.size() > limit) hit.resize(limit);
                    tail = " order u limit " + std::to_string(limit);
                    break;
                }
                case 1: {  // the first rows by _id (the model is in id order)
                    const size_t limit = rng() % 4;
                    if (hit.size() > limit) hit.resize(limit);
                    tail = " limit " + std::to_string(limit);
                    break;
                }
                default:
                    break;
            }
            const std::string affected = R"J({"affected":)J" + std::to_string(hit.size()) + "}";
            written += hit.size();
            const uint64_t kind = rng() % 5;
            switch (kind) {
                case 0:
                case 1: {  // a set of a (0 to 39) or of b (0 to 59), or of either to null
                    const bool a = kind == 0;
                    const std::optional<int64_t> v =
                        rng() % 6 ? std::optional<int64_t>(rng() % (a ? 40 : 60)) : std::nullopt;
                    texts.push_back(std::string("set r {") + (a ? "a" : "b") + ": " + lit(v) +
                                    "} where " + p.text + tail);
                    for (ModelRow* r : hit) (a ? r->a : r->b) = v;
                    want.push_back(affected);
                    break;
                }
                case 2: {
                    texts.push_back("del r where " + p.text + tail);
                    std::erase_if(model, [&](const ModelRow& r) {
                        return std::find(hit.begin(), hit.end(), &r) != hit.end();
                    });
                    want.push_back(affected);
                    break;
                }
                case 3: {
                    ModelRow r{next_id, static_cast<int64_t>(rng() % 40),
                               static_cast<int64_t>(rng() % 60),
                               static_cast<int64_t>(5000 + next_id)};
                    ++next_id;
                    texts.push_back("insert r {_id: " + std::to_string(r.id) + ", a: " + lit(r.a) +
                                    ", b: " + lit(r.b) + ", u: " + std::to_string(r.u) + "}");
                    model.push_back(r);
                    want.push_back(R"J({"affected":1,"ids":[)J" + std::to_string(r.id) + "]}");
                    break;
                }
                default:
                    texts.push_back("get r where " + p.text + " order u limit 1000");
                    want.push_back(expected_json(model, p, "u", false, 0, 1000));
            }
        }
        const std::vector<std::string> got = indexed.run_block(texts);
        std::string block;
        for (const std::string& t : texts) block += t + "; ";
        EXPECT_EQ(got, want) << block;
        EXPECT_EQ(plain.run_block(texts), want) << block;
        const std::string state = "get r order u limit 1000";
        ASSERT_EQ(indexed.run(state), expected_json(model, all, "u", false, 0, 1000)) << block;
        ASSERT_EQ(plain.run(state), expected_json(model, all, "u", false, 0, 1000)) << block;
    }
    EXPECT_GT(written, 200u);  // the rounds wrote rows, not only empty picks
}

}  // namespace
}  // namespace fenec::test::differential_test
