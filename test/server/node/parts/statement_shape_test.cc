// test/server/node/parts/statement_shape_test.cc: a statement's shape for the node's logs
// (server/node/statement_shape.h) loses every kind of literal and keeps its parameters, names and
// annotations; broken or non-UTF-8 text never leaks past the break; a long shape is cut between
// tokens within its bound.
#include "server/node/statement_shape.h"

#include <gtest/gtest.h>

#include <string>

namespace fenec::node::statement_shape_test {
namespace {

TEST(StatementShape, RemovesLiteralsKeepsParameters) {
    const std::string shape = statement_shape("put notes {title: \"secret\", n: 42, body: $1} ");
    EXPECT_EQ(shape, "put notes {title: ?, n: ?, body: $1}");
    EXPECT_EQ(shape.find("secret"), std::string::npos);
    EXPECT_EQ(shape.find("42"), std::string::npos);
}

TEST(StatementShape, EveryKindOfLiteral) {
    EXPECT_EQ(statement_shape("get notes where a = -2.5 and b = x'00ff' and c = 'it\\'s' and "
                              "d = true and e is null and f = 1e9 -- secret comment\n limit 10"),
              "get notes where a = ? and b = ? and c = ? and d = ? and e is null and f = ? "
              "limit ?");
    EXPECT_EQ(statement_shape("create collection t (v vector<3> @hnsw(m=16), t timestamp "
                              "@ttl(30d))"),
              "create collection t (v vector<?> @hnsw(m=?), t timestamp @ttl(?))");
    EXPECT_EQ(statement_shape("GET `order` /* hidden 99 */ where x > $2"),
              "GET `order` where x > $2");
}

TEST(StatementShape, BrokenTextNeverLeaks) {
    EXPECT_EQ(statement_shape("get notes where t = \"secr"), "get notes where t = ?");
    EXPECT_EQ(statement_shape("get notes where t = \"ok\" and u = \"\xff secret\""),
              "get notes where t = ? and u = ?");
    EXPECT_EQ(statement_shape(""), "");
}

TEST(StatementShape, LongShapesAreCutBetweenTokens) {
    std::string text = "put notes {";
    for (int i = 0; i < 5000; ++i) text += "field_" + std::to_string(i) + ": \"v\", ";
    text += "z: 1}";
    const std::string shape = statement_shape(text);
    EXPECT_LE(shape.size(), statement_shape_bytes_max + 4);
    EXPECT_TRUE(shape.ends_with(" \u2026")) << shape.substr(shape.size() - 20);
    EXPECT_TRUE(shape.starts_with("put notes {field_0: ?, field_1: ?"));
}

}  // namespace
}  // namespace fenec::node::statement_shape_test
