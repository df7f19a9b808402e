// test/tools/shell_table_test.cc: proves the shell's table view (tools/shell_table.h) from the
// node's JSON bodies (tools/shell_json.h): columns in the answer's order, aligned, numbers to the
// right, the row count; a write's count and ids; numbers shown as written; a refusal as `error:`
// with a caret under its position, on the right line of a statement over several; a body of no
// known shape left to be printed as it is.
#include "tools/shell_table.h"

#include <gtest/gtest.h>

#include <string>

#include "tools/shell_json.h"

namespace fenec::test::shell_table_test {
namespace {

std::string table(const std::string& body) {
    const std::optional<tools::AnswerView> view = tools::read_answer(body);
    return view ? tools::table_text(*view) : "(not an answer)";
}

TEST(ShellTable, RowsAlignedUnderTheirColumns) {
    EXPECT_EQ(table(R"({"rows":[{"_id":1,"title":"Dune","year":1965,"tags":["sf"]},)"
                    R"({"_id":12,"title":"Ayşe's line\nbreak","year":-5.25,"tags":null}]})"),
              " _id | title              | year  | tags\n"
              "-----+--------------------+-------+--------\n"
              "   1 | Dune               |  1965 | [\"sf\"]\n"
              "  12 | Ayşe's line\\nbreak | -5.25 | null\n"
              "(2 rows)\n");
    EXPECT_EQ(table(R"j({"rows":[{"count(*)":1}]})j"),
              " count(*)\n"
              "----------\n"
              "        1\n"
              "(1 row)\n");
    EXPECT_EQ(table(R"({"rows":[]})"), "(0 rows)\n");
}

TEST(ShellTable, WritesSayWhatTheyDid) {
    EXPECT_EQ(table(R"({"affected":2,"ids":[1,2]})"), "2 rows affected, ids 1, 2\n");
    EXPECT_EQ(table(R"({"affected":1,"ids":[7]})"), "1 row affected, id 7\n");
    EXPECT_EQ(table(R"({"affected":0})"), "0 rows affected\n");
    EXPECT_EQ(table(R"({"ok":true})"), "ok\n");
    EXPECT_EQ(table(R"({"affected":1,"rows":[{"_id":3}]})"),
              " _id\n-----\n   3\n(1 row)\n1 row affected\n");
}

TEST(ShellTable, NumbersAsWritten) {
    EXPECT_EQ(table(R"({"rows":[{"x":1e300,"y":0.1,"z":-9223372036854775808}]})"),
              " x     | y   | z\n"
              "-------+-----+----------------------\n"
              " 1e300 | 0.1 | -9223372036854775808\n"
              "(1 row)\n");
}

TEST(ShellTable, ControlCharactersAreShownEscaped) {
    // An escape sequence stored in a row must not reach the terminal as one.
    EXPECT_EQ(table(R"({"rows":[{"s":"a\u001b[2Jb\u0000c\u007f"}]})"),
              " s\n"
              "--------------------------\n"
              " a\\u001b[2Jb\\u0000c\\u007f\n"
              "(1 row)\n");
}

TEST(ShellTable, OtherShapesAreNotTables) {
    EXPECT_EQ(table(R"({"results":[]})"), "(not an answer)");
    EXPECT_EQ(table("not json"), "(not an answer)");
    EXPECT_EQ(table(R"({"rows":[{"a":1},{"b":2,"c":3}]})"), "(not an answer)");
}

TEST(ShellTable, ErrorsPointAtTheirPosition) {
    const std::optional<tools::ErrorView> e =
        tools::read_error(R"({"error":"no field `yeer` in `books`","position":16})");
    ASSERT_TRUE(e);
    EXPECT_EQ(tools::error_text(*e, "get books where yeer > 1"),
              "error: no field `yeer` in `books`\n"
              "  get books where yeer > 1\n"
              "                  ^\n");
    // On the line the position falls in, counted in code points.
    EXPECT_EQ(tools::error_text(*e, "get\n\"ğ\" x\nwhere yeer"),
              "error: no field `yeer` in `books`\n"
              "  where yeer\n"
              "        ^\n");
    const std::optional<tools::ErrorView> budget =
        tools::read_error(R"({"error":"too many rows","budget":"rows","max":3})");
    ASSERT_TRUE(budget);
    EXPECT_EQ(tools::error_text(*budget, "get books"),
              "error: too many rows (budget: rows, max: 3)\n");
    EXPECT_FALSE(tools::read_error(R"({"rows":[]})"));
}

}  // namespace
}  // namespace fenec::test::shell_table_test
