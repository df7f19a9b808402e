// test/docs/pages_test.cc: every example of the pages in docs/ runs against real fenec-node and
// fenec-shard processes and answers as its page shows (runner.h), one test per page. The pages
// are listed here and nowhere else; a page in docs/ that holds a block the runner would run but
// is not listed fails `EveryPageWithExamplesIsListed`, so no page goes unchecked unseen. The
// README links every page and nothing outside the repository.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test/docs/page.h"
#include "test/docs/runner.h"

namespace fenec::test::pages_test {
namespace {

using docs::Page;
using docs::Report;

struct Listed {
    const char* file;  // under docs/
};

// The pages whose examples run.
const Listed kPages[] = {
    {"fenecql.md"}, {"getting-started.md"}, {"http-node.md"}, {"http-router.md"}, {"operations.md"},
    {"shell.md"},
};

// The page's name in gtest's messages, not its bytes.
void PrintTo(const Listed& l, std::ostream* os) { *os << "docs/" << l.file; }

std::string docs_dir() { return FENEC_DOCS_DIR; }

class DocPage : public ::testing::TestWithParam<Listed> {};

TEST_P(DocPage, EveryExampleAnswersAsThePageShows) {
    const Listed& listed = GetParam();
    const std::string path = docs_dir() + "/" + listed.file;
    std::string error;
    const std::optional<Page> page = docs::load_page(path, error);
    ASSERT_TRUE(page) << path << ":" << error;
    const Report r = docs::run_page(*page);
    for (const auto& f : r.failures) ADD_FAILURE_AT(path.c_str(), f.line) << f.what;
    std::cout << "docs/" << listed.file << ": " << r.examples() << " examples (" << r.fenecql
              << " fenecql, " << r.http << " http, of which " << r.events << " streams, " << r.sh
              << " sh), " << r.failures.size() << " differ\n";
}

std::string test_name(const ::testing::TestParamInfo<Listed>& info) {
    std::string name = info.param.file;
    for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(Docs, DocPage, ::testing::ValuesIn(kPages), test_name);

// A block the runner would run: a page holding one must be in kPages.
bool runs_something(const Page& page) {
    for (const auto& b : page.blocks) {
        if (b.lang == "fenecql" || b.lang == "http" || (b.lang == "sh" && !b.has_arg("no-run"))) {
            return true;
        }
    }
    return false;
}

TEST(DocPages, EveryPageWithExamplesIsListed) {
    size_t pages = 0;
    for (const auto& entry : std::filesystem::directory_iterator(docs_dir())) {
        if (entry.path().extension() != ".md") continue;
        ++pages;
        const std::string file = entry.path().filename().string();
        std::string error;
        const std::optional<Page> page = docs::load_page(entry.path().string(), error);
        ASSERT_TRUE(page) << entry.path().string() << ":" << error;
        const bool listed = std::any_of(std::begin(kPages), std::end(kPages),
                                        [&](const Listed& l) { return file == l.file; });
        EXPECT_TRUE(listed || !runs_something(*page))
            << "docs/" << file << " holds examples the runner runs but is not in kPages";
    }
    EXPECT_GT(pages, 0u) << docs_dir();
    // A listed page must exist (a rename would otherwise drop it).
    for (const Listed& l : kPages) {
        EXPECT_TRUE(std::filesystem::exists(docs_dir() + "/" + l.file)) << l.file;
    }
}

// The README is where a reader of a fresh clone starts: it links every page of docs/, and every
// link it holds resolves inside the repository (no `../`, no page a clone does not have).
TEST(DocPages, TheReadmeLinksEveryPageAndNothingOutside) {
    const std::filesystem::path root = std::filesystem::path(docs_dir()).parent_path();
    std::ifstream in(root / "README.md");
    std::stringstream text;
    text << in.rdbuf();
    const std::string readme = text.str();
    ASSERT_FALSE(readme.empty());
    std::set<std::string> linked;
    for (size_t at = readme.find("]("); at != std::string::npos; at = readme.find("](", at + 2)) {
        const size_t end = readme.find(')', at);
        ASSERT_NE(end, std::string::npos);
        std::string target = readme.substr(at + 2, end - at - 2);
        target = target.substr(0, target.find('#'));
        EXPECT_EQ(target.find("://"), std::string::npos) << "README links outside: " << target;
        EXPECT_EQ(target.find(".."), std::string::npos) << "README links outside: " << target;
        EXPECT_TRUE(std::filesystem::exists(root / target)) << "README links nothing: " << target;
        linked.insert(target);
    }
    for (const auto& entry : std::filesystem::directory_iterator(docs_dir())) {
        if (entry.path().extension() != ".md") continue;
        const std::string page = "docs/" + entry.path().filename().string();
        EXPECT_TRUE(linked.count(page)) << "README does not link " << page;
    }
}

}  // namespace
}  // namespace fenec::test::pages_test
