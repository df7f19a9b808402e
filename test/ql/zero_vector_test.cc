// test/ql/zero_vector_test.cc: a zero vector written to a field indexed `@hnsw(cosine)` is a 400
// naming the field (it has no direction, so no cosine similarity to anything); under `l2` and
// `dot`, and in a comparison, it is a value like any other. Insert, put, set and upsert alike.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::zero_vector_test {
namespace {

struct Tenant {
    EngineEnv env;
    index::IndexSet indexes;
    std::unique_ptr<engine::Database> db;

    Tenant() {
        engine::OpenOptions o = env.options(engine::SyncPolicy::at_close());
        o.hook = &indexes;
        auto created = engine::Database::create("/t.fenec", o);
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
        EXPECT_FALSE(run("create collection v (c vector<2> @hnsw, e vector<2> @hnsw(l2), "
                         "d vector<2> @hnsw(dot), p vector<2>)"));
        EXPECT_FALSE(run("insert v {c: [1, 0]}"));
    }
    // The refusal's message, or nullopt when the statement ran.
    std::optional<std::string> run(const std::string& text) {
        auto p = ql::parse(text);
        EXPECT_TRUE(p) << text;
        if (!p) return "unparsed";
        const ql::Item item{&p.value(), {}};
        ql::BlockOutcome o = ql::Executor(*db, indexes).run_block({&item, 1}, {});
        if (o.error) return o.error->message;
        return std::nullopt;
    }
};

TEST(ZeroVector, IsRefusedWhereTheFieldIsHnswCosine) {
    Tenant t;
    for (const char* w : {"insert v {c: [0, 0]}", "insert v {c: [0.0, -0.0]}",
                          "put v {_id: 1, c: [0, 0]}", "set v {c: [0, 0]} where _id = 1"}) {
        SCOPED_TRACE(w);
        const std::optional<std::string> err = t.run(w);
        ASSERT_TRUE(err);
        EXPECT_NE(err->find("zero vector"), std::string::npos) << *err;
    }
    EXPECT_FALSE(t.run("get v where _id = 1 and c = [1, 0]"));
}

TEST(ZeroVector, IsAValueLikeAnyOtherElsewhere) {
    Tenant t;
    for (const char* w : {"insert v {e: [0, 0]}", "insert v {d: [0, 0]}", "insert v {p: [0, 0]}",
                          "insert v {c: [0, 1e-30]}", "get v where c = [0, 0]"}) {
        EXPECT_FALSE(t.run(w)) << w << ": " << t.run(w).value_or("");
    }
}

}  // namespace
}  // namespace fenec::test::zero_vector_test
