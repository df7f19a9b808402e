// test/ql/describe_test.cc: proves ql/describe.h. A field FenecQL creates is described as the
// field_def that creates it, every index argument spelled out (defaults included), collation and
// nocase kept; the description parses back into the same field (the round trip the header
// promises); a name that is a reserved word is backquoted; what FenecQL cannot write is a note,
// not syntax.
#include "ql/describe.h"

#include <gtest/gtest.h>

#include <string>

#include "ql/parser.h"

namespace fenec::ql::describe_test {
namespace {

// The field `def` creates, through the parser and the executor's own FieldDef → FieldDesc.
engine::FieldDesc field_of(const std::string& def) {
    QlResult<ParsedStatement> r = parse("create collection c (" + def + ")");
    EXPECT_TRUE(r.is_ok()) << def << " -> " << (r.is_ok() ? "" : r.error().to_string());
    if (!r.is_ok()) return {};
    const Create& c = std::get<Create>(r.value().statement.node);
    EXPECT_EQ(c.fields.size(), 1u);
    return c.fields.at(0).to_field_desc();
}

struct Case {
    const char* written;    // as a user writes it
    const char* described;  // as describe_field spells it
};

TEST(DescribeField, SpellsTheDefinitionAndParsesBackToTheSameField) {
    const Case cases[] = {
        {"year int", "year int"},
        {"year int @sorted", "year int @sorted"},
        {"isbn text @unique", "isbn text @unique"},
        {"tag text @hash", "tag text @hash"},
        {"name text collate tr", "name text collate tr"},
        {"name text nocase collate und @sorted", "name text collate und nocase @sorted"},
        {"tags [text] nocase", "tags [text] nocase"},
        {"body text @text", "body text @text(k1 = 0.9, b = 0.4)"},
        {"body text @text(b = 0.75, k1 = 1.2)", "body text @text(k1 = 1.2, b = 0.75)"},
        {"body text @text(k1 = 2, b = 0.05)", "body text @text(k1 = 2, b = 0.05)"},
        {"body text @text(stem en)", "body text @text(k1 = 0.9, b = 0.4, stem en)"},
        {"body text @text(b = 0.5, stem tr)", "body text @text(k1 = 0.9, b = 0.5, stem tr)"},
        {"e vector<3> @hnsw",
         "e vector<3> @hnsw(cosine, m = 16, ef_construction = 200, ef_search = 100)"},
        {"e vector<8> @hnsw(ef_search = 7, l2, m = 4)",
         "e vector<8> @hnsw(l2, m = 4, ef_construction = 200, ef_search = 7)"},
        {"at timestamp @ttl(30d)", "at timestamp @ttl(30d)"},
        {"at timestamp @ttl(90m)", "at timestamp @ttl(90m)"},
        {"at timestamp @ttl(1500ms)", "at timestamp @ttl(1500ms)"},
        {"at timestamp @ttl(48h)", "at timestamp @ttl(2d)"},
        {"meta json", "meta json"},
        {"`order` int @sorted", "`order` int @sorted"},
    };
    for (const Case& c : cases) {
        const engine::FieldDesc f = field_of(c.written);
        const FieldDescription d = describe_field(f);
        EXPECT_EQ(d.definition, c.described) << c.written;
        EXPECT_EQ(field_of(d.definition), f) << "round trip of " << d.definition;
    }
}

TEST(DescribeField, GivesTheIndexCollationAndNocaseApart) {
    const FieldDescription d = describe_field(field_of("title text collate tr nocase @sorted"));
    EXPECT_EQ(d.name, "title");
    EXPECT_EQ(d.type, "text");
    EXPECT_EQ(d.collate, "tr");
    EXPECT_TRUE(d.nocase);
    EXPECT_EQ(d.index, "@sorted");

    const FieldDescription plain = describe_field(field_of("n float"));
    EXPECT_FALSE(plain.collate);
    EXPECT_FALSE(plain.nocase);
    EXPECT_FALSE(plain.index);
}

TEST(DescribeField, WhatFenecQLCannotWriteIsANoteAfterTheDefinition) {
    engine::FieldDesc f = field_of("meta json");
    engine::PathIndex path;
    path.keys = {"a", "b"};
    path.index.kind = engine::IndexKind::hash;
    f.paths.push_back(path);
    EXPECT_EQ(describe_field(f).definition, "meta json [path a.b @hash]");

    engine::FieldDesc v = field_of("e vector<4>");
    v.type.elem = engine::VectorElem::f16;
    EXPECT_EQ(describe_field(v).type, "vector16<4>");
    EXPECT_EQ(describe_field(v).definition, "e vector<4> [float16 components]");
}

}  // namespace
}  // namespace fenec::ql::describe_test
