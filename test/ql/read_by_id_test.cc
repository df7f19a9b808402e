// test/ql/read_by_id_test.cc: Executor::read_by_id (ql/executor.h), the REST read of one
// document answered without parsing or compiling `get <c> where _id = $1`: on every case it
// answers exactly as that statement does (the row, no row, a field added, dropped or renamed, the
// 404s), and project() reading a row in one pass keeps the columns asked for in their order.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::read_by_id_test {
namespace {

using engine::Database;
using engine::Value;

struct Tenant {
    EngineEnv env;
    index::IndexSet indexes;
    std::unique_ptr<Database> db;

    Tenant() {
        engine::OpenOptions o = env.options();
        o.hook = &indexes;
        auto created = Database::create("/t.fenec", o);
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
    }
    std::string run(const std::string& text, std::vector<Value> params = {}) {
        auto p = ql::parse(text);
        EXPECT_TRUE(p) << text;
        if (!p) return "";
        ql::BlockOutcome out =
            ql::Executor(*db, indexes).run_block(std::vector<ql::Item>{{&p.value(), params}}, {});
        if (out.error) return "error " + out.error->to_string();
        return ql::to_json(out.answers.at(0));
    }
    std::string by_id(const std::string& coll, uint64_t id) {
        const engine::ReadView view = db->read();
        ql::BlockOutcome out = ql::Executor(*db, indexes).read_by_id(view, coll, id);
        if (out.error) return "error " + out.error->to_string();
        EXPECT_EQ(out.seq, view.seq());
        return ql::to_json(out.answers.at(0));
    }
    // read_by_id answers as the statement it stands for.
    void same(const std::string& coll, uint64_t id) {
        const std::string want = run("get " + coll + " where _id = $1", {Value(int64_t(id))});
        EXPECT_EQ(by_id(coll, id), want) << coll << " " << id;
    }
};

TEST(ReadById, AnswersAsTheStatement) {
    Tenant t;
    ASSERT_EQ(t.run("create collection a (n int @unique, s text, j json, f float)"),
              R"({"ok":true})");
    ASSERT_EQ(
        t.run(R"(insert a [{_id: 3, n: 1, s: "x", j: {"k": [1, 2]}, f: 1.5}, {_id: 4, n: 2}])"),
        R"({"affected":2,"ids":[3,4]})");
    EXPECT_EQ(t.by_id("a", 3), R"({"rows":[{"_id":3,"n":1,"s":"x","j":{"k":[1,2]},"f":1.5}]})");
    for (uint64_t id : {uint64_t(3), uint64_t(4), uint64_t(5), uint64_t(INT64_MAX), UINT64_MAX}) {
        t.same("a", id);
    }
    t.same("nope", 3);
    EXPECT_NE(t.by_id("nope", 3).find("404"), std::string::npos) << t.by_id("nope", 3);
    t.same("_idempotency", 1);
}

TEST(ReadById, FollowsSchemaChanges) {
    Tenant t;
    ASSERT_EQ(t.run("create collection a (n int, s text, m int)"), R"({"ok":true})");
    ASSERT_EQ(t.run(R"(insert a {_id: 1, n: 1, s: "x", m: 7})"), R"({"affected":1,"ids":[1]})");
    ASSERT_EQ(t.run("alter collection a add field z text"), R"({"ok":true})");
    t.same("a", 1);
    ASSERT_EQ(t.run("alter collection a drop field s"), R"({"ok":true})");
    EXPECT_EQ(t.by_id("a", 1), R"({"rows":[{"_id":1,"n":1,"m":7,"z":null}]})");
    t.same("a", 1);
    ASSERT_EQ(t.run("alter collection a rename field m to k"), R"({"ok":true})");
    t.same("a", 1);
    ASSERT_EQ(t.run("drop collection a"), R"({"ok":true})");
    t.same("a", 1);
}

// project() reads each row in one pass: columns in any order, repeated slots, paths, `_id`.
TEST(ReadById, ProjectOnePassKeepsTheColumnsOrder) {
    Tenant t;
    ASSERT_EQ(t.run("create collection a (n int, s text, j json)"), R"({"ok":true})");
    ASSERT_EQ(t.run(R"(insert a [{_id: 1, n: 1, s: "x", j: {"k": 2}}, {_id: 2, s: "y"}])"),
              R"({"affected":2,"ids":[1,2]})");
    EXPECT_EQ(t.run("get a select j.k, s, _id, n, s as t order _id"),
              R"({"rows":[{"j.k":2,"s":"x","_id":1,"n":1,"t":"x"},)"
              R"({"j.k":null,"s":"y","_id":2,"n":null,"t":"y"}]})");
}

}  // namespace
}  // namespace fenec::test::read_by_id_test
