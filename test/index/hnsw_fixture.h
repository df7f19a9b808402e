// test/index/hnsw_fixture.h: what the HNSW suites share (hnsw_index_test.cc, and the 100,000-row
// recall of hnsw_recall_slow_test.cc): a tenant on FaultFs whose IndexSet extension is the
// VectorIndexes under test, the exact scorer that is their oracle, clustered random vectors, and
// the recall check against it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/database.h"
#include "index/hnsw_index.h"
#include "index/index_set.h"
#include "test/support/engine_fixture.h"

namespace fenec::index::hnsw_test {

using engine::CollectionId;
using engine::Doc;
using engine::Metric;
using Hit = VectorIndexes::Hit;

inline constexpr const char* kPath = "/t/vectors.fenec";

inline engine::FieldDesc plain(const std::string& name, engine::BaseType base) {
    engine::FieldDesc f;
    f.name = name;
    f.type = engine::make_type(base);
    return f;
}

inline engine::FieldDesc vec_field(const std::string& name, uint32_t dim,
                                   engine::HnswParams p = {}) {
    engine::FieldDesc f;
    f.name = name;
    f.type = engine::make_vector(dim);
    f.index.kind = engine::IndexKind::hnsw;
    f.index.hnsw = p;
    return f;
}

inline engine::HnswParams params(Metric metric, uint16_t m = 16, uint16_t ef_construction = 200,
                                 uint16_t ef_search = 64) {
    return {metric, m, ef_construction, ef_search};
}

// A tenant on FaultFs with an IndexSet whose extension is the VectorIndexes under test.
struct Tenant {
    test::EngineEnv env;
    IndexSet set;
    VectorIndexes vec;
    engine::IndexHook* hook = &set;
    std::unique_ptr<engine::Database> db;

    Tenant() {
        set.add_extension(&vec);
        engine::OpenOptions o = env.options();
        o.hook = hook;
        auto r = engine::Database::create(kPath, o);
        EXPECT_TRUE(r.is_ok()) << r.status().to_string();
        db = std::move(r).value();
    }
    void reopen() {
        ASSERT_TRUE(db->close().is_ok());
        db.reset();
        engine::OpenOptions o = env.options();
        o.hook = hook;
        auto r = engine::Database::open(kPath, o);
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        db = std::move(r).value();
    }
    CollectionId create(const std::string& name, std::vector<engine::FieldDesc> fields) {
        auto b = db->begin();
        EXPECT_TRUE(b.is_ok());
        engine::Schema s;
        s.fields = std::move(fields);
        auto c = b->create_collection(name, s);
        EXPECT_TRUE(c.is_ok()) << c.status().to_string();
        EXPECT_TRUE(b->commit().is_ok());
        return *c;
    }
    // Inserts in blocks of `batch`; returns the ids in order.
    std::vector<uint64_t> insert(CollectionId c, const std::vector<Doc>& docs,
                                 size_t batch = 2000) {
        std::vector<uint64_t> ids;
        for (size_t at = 0; at < docs.size(); at += batch) {
            auto b = db->begin();
            EXPECT_TRUE(b.is_ok());
            for (size_t i = at; i < std::min(docs.size(), at + batch); ++i) {
                auto id = b->insert(c, std::nullopt, docs[i]);
                EXPECT_TRUE(id.is_ok()) << id.status().to_string();
                ids.push_back(id->v);
            }
            EXPECT_TRUE(b->commit().is_ok());
        }
        return ids;
    }
    void set_doc(CollectionId c, uint64_t id, const Doc& doc) {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->set(c, engine::DocId{id}, doc).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    void del(CollectionId c, uint64_t id) {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->del(c, engine::DocId{id}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    std::vector<Hit> near(CollectionId c, uint16_t slot, std::vector<float> q, size_t k,
                          const std::vector<uint64_t>* filter = nullptr, size_t ef = 0) {
        auto r = vec.near(c, slot, q, k, ef, filter);
        EXPECT_TRUE(r.is_ok()) << r.status().to_string();
        return r.is_ok() ? *r : std::vector<Hit>{};
    }
};

inline engine::Value v32(std::vector<float> v) { return engine::VectorF32{std::move(v)}; }

// The oracle: every row scored in double, best first, ties by lower id.
inline std::vector<Hit> exact(Metric metric,
                              const std::vector<std::pair<uint64_t, std::vector<float>>>& rows,
                              const std::vector<float>& q, size_t k,
                              const std::function<bool(uint64_t)>& pass = nullptr) {
    std::vector<Hit> all;
    for (const auto& [id, x] : rows) {
        if (pass && !pass(id)) continue;
        double d = 0, qq = 0, xx = 0, l2 = 0;
        for (size_t i = 0; i < q.size(); ++i) {
            d += double(q[i]) * x[i];
            qq += double(q[i]) * q[i];
            xx += double(x[i]) * x[i];
            l2 += (double(q[i]) - x[i]) * (double(q[i]) - x[i]);
        }
        const double s = metric == Metric::cosine ? d / std::sqrt(qq * xx)
                         : metric == Metric::l2   ? std::sqrt(l2)
                                                  : d;
        all.emplace_back(id, s);
    }
    std::sort(all.begin(), all.end(), [&](const Hit& a, const Hit& b) {
        if (a.second != b.second) {
            return metric == Metric::l2 ? a.second < b.second : a.second > b.second;
        }
        return a.first < b.first;
    });
    if (all.size() > k) all.resize(k);
    return all;
}

inline double recall(const std::vector<Hit>& got, const std::vector<Hit>& want) {
    std::set<uint64_t> w;
    for (const Hit& h : want) w.insert(h.first);
    size_t hit = 0;
    for (const Hit& h : got) hit += w.count(h.first);
    return want.empty() ? 1.0 : double(hit) / double(want.size());
}

// Clustered points: `clusters` gaussian centres, each point its centre plus noise.
struct Clustered {
    std::vector<std::vector<float>> centres;
    std::normal_distribution<float> noise{0, 0.25f};
    Clustered(std::mt19937_64& rng, uint32_t dim, size_t clusters) {
        std::normal_distribution<float> g(0, 1);
        for (size_t i = 0; i < clusters; ++i) {
            std::vector<float> c(dim);
            for (float& x : c) x = g(rng);
            centres.push_back(std::move(c));
        }
    }
    std::vector<float> draw(std::mt19937_64& rng) {
        const auto& c = centres[rng() % centres.size()];
        std::vector<float> v(c);
        for (float& x : v) x += noise(rng);
        return v;
    }
};

using Rows = std::vector<std::pair<uint64_t, std::vector<float>>>;

// A collection `v` (slot 0 kind:int, slot 1 e:vector<dim>) holding `n` rows from `gen`.
inline Rows fill(Tenant& t, CollectionId c, size_t n,
                 const std::function<std::vector<float>()>& gen, std::mt19937_64& rng,
                 int kinds = 100) {
    std::vector<Doc> docs;
    std::vector<std::vector<float>> vs;
    for (size_t i = 0; i < n; ++i) {
        vs.push_back(gen());
        docs.push_back({{0, int64_t(rng() % kinds)}, {1, v32(vs.back())}});
    }
    const std::vector<uint64_t> ids = t.insert(c, docs);
    Rows rows;
    for (size_t i = 0; i < n; ++i) rows.emplace_back(ids[i], vs[i]);
    return rows;
}

// Builds `n` clustered 128-dimension rows once, then for each filter fraction (1.0: no filter;
// otherwise a hash of the id keeps that share of rows) checks that 10 rows come back and that
// recall@10 against exact search is at least 0.99 unfiltered, 0.98 filtered (issue 4).
inline void recall_check(size_t n, size_t queries, const std::vector<double>& fractions,
                         uint16_t ef_construction) {
    Tenant t;
    std::mt19937_64 rng(2024);
    Clustered gen(rng, 128, 100);
    const CollectionId c =
        t.create("v", {plain("kind", engine::BaseType::Int),
                       vec_field("e", 128, params(Metric::cosine, 16, ef_construction, 100))});
    const Rows rows = fill(
        t, c, n, [&] { return gen.draw(rng); }, rng);
    for (const double fraction : fractions) {
        std::vector<uint64_t> filter;
        std::set<uint64_t> in;
        const auto keep_per_10000 = uint64_t(fraction * 10000);
        for (const auto& r : rows) {
            if ((r.first * 2654435761u) % 10000 < keep_per_10000) {
                filter.push_back(r.first);
                in.insert(r.first);
            }
        }
        const std::vector<uint64_t>* f = fraction >= 1.0 ? nullptr : &filter;
        std::function<bool(uint64_t)> pass;
        if (f) pass = [&](uint64_t id) { return in.count(id) > 0; };
        double sum = 0;
        for (size_t i = 0; i < queries; ++i) {
            const std::vector<float> q = gen.draw(rng);
            const auto got = t.near(c, 1, q, 10, f);
            ASSERT_EQ(got.size(), 10u);
            sum += recall(got, exact(Metric::cosine, rows, q, 10, pass));
        }
        const double r = sum / double(queries);
        std::cout << "recall@10 n=" << n << " filter=" << fraction << ": " << r << "\n";
        EXPECT_GE(r, fraction >= 1.0 ? 0.99 : 0.98) << "filter fraction " << fraction;
    }
}

}  // namespace fenec::index::hnsw_test
