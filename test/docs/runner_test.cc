// test/docs/runner_test.cc: the doc-example runner can fail. runner_check.md holds each kind of
// example (fenecql, fenecql admin, http with a JSON answer, a whole response, a subscription
// stream, sh with JSON and text output) once right and once wrong, each wrong one marked with
// part of what must be reported; the runner must pass every right one, report every wrong one
// at its line with that text, and report nothing else. The rules a page itself can break (no
// example, an answer with no example, a set-up it cannot read) are checked on pages written here.
#include "test/docs/runner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "test/docs/page.h"

namespace fenec::test::runner_test {
namespace {

using docs::Block;
using docs::Page;
using docs::Report;

// The marks of runner_check.md: the line of the block after each `<!-- wrong: … -->`, and the
// text its failure must hold.
std::map<int, std::string> wrong_marks(const std::string& path) {
    std::ifstream in(path);
    std::map<int, std::string> marks;
    std::string line, pending;
    bool have = false;
    for (int n = 1; std::getline(in, line); ++n) {
        const std::string open = "<!-- wrong: ";
        if (line.starts_with(open) && line.ends_with(" -->")) {
            pending = line.substr(open.size(), line.size() - open.size() - 4);
            have = true;
        } else if (have && line.starts_with("```")) {
            marks[n] = pending;
            have = false;
        }
    }
    return marks;
}

// The kind of the example opening at blocks[k], with the answer block that follows it.
std::string kind(const Page& page, size_t k) {
    const Block& b = page.blocks[k];
    const Block* next = k + 1 < page.blocks.size() ? &page.blocks[k + 1] : nullptr;
    std::string k_name = b.lang + (b.has_arg("admin") ? " admin" : "");
    if (next && (next->lang == "json" || next->lang == "text" || next->lang == "http-response")) {
        k_name += " → " + next->lang + (next->has_arg("events") ? " events" : "");
    }
    return k_name;
}

TEST(DocRunner, PassesTheRightExamplesAndReportsEachWrongOne) {
    std::string error;
    const std::optional<Page> page = docs::load_page(FENEC_DOCS_FIXTURE, error);
    ASSERT_TRUE(page) << error;
    const std::map<int, std::string> marks = wrong_marks(FENEC_DOCS_FIXTURE);

    // The check itself is whole: each kind of example is there right and wrong.
    std::map<std::string, std::set<bool>> seen;
    for (size_t k = 0; k < page->blocks.size(); ++k) {
        const std::string& lang = page->blocks[k].lang;
        if (lang == "fenecql" || lang == "http" || lang == "sh") {
            seen[kind(*page, k)].insert(marks.count(page->blocks[k].line) > 0);
        }
    }
    for (const char* k : {"fenecql → json", "fenecql admin → json", "http → json",
                          "http → http-response", "http → text events", "sh → json", "sh → text"}) {
        EXPECT_EQ(seen[k].size(), 2u) << k << ": the check needs one right and one wrong";
    }

    const Report r = docs::run_page(*page);
    std::set<int> reported;
    for (const auto& f : r.failures) {
        reported.insert(f.line);
        auto mark = marks.find(f.line);
        if (mark == marks.end()) {
            ADD_FAILURE() << "line " << f.line << " is right but was reported: " << f.what;
        } else {
            EXPECT_NE(f.what.find(mark->second), std::string::npos)
                << "line " << f.line << " reported as `" << f.what << "`, expected it to say `"
                << mark->second << "`";
        }
    }
    for (const auto& [line, text] : marks) {
        EXPECT_TRUE(reported.count(line))
            << "line " << line << " is wrong (" << text << ") but was not reported";
    }
    EXPECT_EQ(r.failures.size(), reported.size()) << "one failure per wrong example";
    EXPECT_EQ(r.fenecql, 10);
    EXPECT_EQ(r.http, 10);
    EXPECT_EQ(r.events, 2);
    EXPECT_EQ(r.sh, 6);
}

Report run_text(const std::string& text) {
    std::string error;
    const std::optional<Page> page = docs::parse_page("inline.md", text, error);
    EXPECT_TRUE(page) << error;
    return page ? docs::run_page(*page) : Report{};
}

TEST(DocRunner, APageWithNoExampleThatRunsFails) {
    const Report r = run_text("# A page\n\n```text\nnot run\n```\n\n```sh no-run\nmake\n```\n");
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.failures[0].line, 1);
    EXPECT_NE(r.failures[0].what.find("no example"), std::string::npos) << r.failures[0].what;
}

TEST(DocRunner, AnAnswerWithNoExampleBeforeItFails) {
    const Report r = run_text("```sh\ntrue\n```\n\ntext\n\n```json status=404\n{}\n```\n");
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.failures[0].line, 7);
}

TEST(DocRunner, AnExampleWithoutItsAnswerFails) {
    const Report r = run_text(
        "<!--\nrunner: node n1 8081\nrunner: tenant t on n1\n-->\n```fenecql\ncompact\n```\n");
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.failures[0].line, 5);
}

TEST(DocRunner, ASetUpItCannotReadIsRefusedAtItsLine) {
    std::string error;
    EXPECT_FALSE(docs::parse_page("x.md", "<!--\nrunner: nodes n1 8081\n-->\n", error));
    EXPECT_EQ(error.substr(0, 2), "2:") << error;
    EXPECT_FALSE(docs::parse_page("x.md", "<!--\nrunner: tenant t on n9\n-->\n", error));
    EXPECT_FALSE(docs::parse_page("x.md", "<!--\nrunner: node n1 port\n-->\n", error));
    EXPECT_FALSE(docs::parse_page("x.md", "```sh\ntrue\n", error));  // not closed
}

TEST(DocRunner, ReadsBlocksWithTheirLinesAndInfo) {
    std::string error;
    const std::optional<Page> page = docs::parse_page(
        "x.md",
        "<!--\nrunner: node n1 8081 --token a\n-->\ntext\n````md\n```sh\n```\n````\n\n"
        "- item\n  ```json status=409\n  {\"a\": 1}\n  ```\n",
        error);
    ASSERT_TRUE(page) << error;
    ASSERT_EQ(page->blocks.size(), 2u);
    EXPECT_EQ(page->blocks[0].line, 5);
    EXPECT_EQ(page->blocks[0].lang, "md");
    EXPECT_EQ(page->blocks[0].text, "```sh\n```");
    EXPECT_EQ(page->blocks[1].line, 11);
    EXPECT_EQ(page->blocks[1].arg_value("status"), "409");
    EXPECT_EQ(page->blocks[1].text, "{\"a\": 1}");
    EXPECT_EQ(page->setup.process("n1")->flag_value("--token"), "a");
}

}  // namespace
}  // namespace fenec::test::runner_test
