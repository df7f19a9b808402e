// test/ql/project_test.cc: ql::project (ql/exec_read.h), the step that turns a read's rows into
// the answer's table: its columns named as asked, and two columns of one name refused, whether
// the names are compared pairwise (a few columns) or through a set (many).
#include <gtest/gtest.h>

#include "ql/exec_read.h"

namespace fenec::ql::project_test {
namespace {

engine::Schema schema_of(size_t fields) {
    engine::Schema s;
    for (size_t i = 0; i < fields; ++i) {
        engine::FieldDesc f;
        f.name = "f" + std::to_string(i);
        s.fields.push_back(std::move(f));
    }
    return s;
}

SelectList select_of(const std::vector<std::string>& names) {
    SelectList list;
    for (const std::string& n : names)
        list.items.push_back(SelectItem{0, Column{n, {}}, std::nullopt});
    return list;
}

TEST(Project, StarNamesIdThenEveryField) {
    QlResult<Table> t = project(Rows{}, std::nullopt, schema_of(3), "c");
    ASSERT_TRUE(t);
    EXPECT_EQ(*t.value().columns, (std::vector<std::string>{"_id", "f0", "f1", "f2"}));
}

TEST(Project, TwoColumnsOfOneNameRefusedFew) {
    QlResult<Table> t = project(Rows{}, select_of({"f0", "f1", "f0"}), schema_of(3), "c");
    ASSERT_FALSE(t);
    EXPECT_NE(t.error().message.find("two columns of the answer are named `f0`"), std::string::npos)
        << t.error().message;
}

TEST(Project, TwoColumnsOfOneNameRefusedMany) {
    std::vector<std::string> names;
    for (size_t i = 0; i < 40; ++i) names.push_back("f" + std::to_string(i));
    EXPECT_TRUE(project(Rows{}, select_of(names), schema_of(40), "c"));
    names.push_back("f39");
    QlResult<Table> t = project(Rows{}, select_of(names), schema_of(40), "c");
    ASSERT_FALSE(t);
    EXPECT_NE(t.error().message.find("named `f39`"), std::string::npos) << t.error().message;
}

}  // namespace
}  // namespace fenec::ql::project_test
