// test/tools/describe_cli_test.cc: proves that the `fenec` command line describes a field as the
// node does (ql/describe.h): `fenec inspect`'s field lines and the shell's `.describe` print the
// FenecQL definition, index with its arguments, collation and nocase included. Runs the real
// binary (FENEC_CLI_BIN) on a file in a fresh folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace fenec::test::describe_cli_test {
namespace {

struct Output {
    int status = -1;
    std::string out;
};

// `fenec <args>` through the shell, its stdout and exit status.
Output fenec(const std::string& args) {
    Output r;
    FILE* p = ::popen((std::string(FENEC_CLI_BIN) + " " + args + " 2>/dev/null").c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

class DescribeCli : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("fenec-describe-cli-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        file_ = (dir_ / "t.fenec").string();
        const Output made =
            fenec("shell " + file_ +
                  " -c 'create collection books (title text collate tr nocase @text(k1 = 1.2), "
                  "year int @sorted, e vector<2> @hnsw(l2), tags [text])'");
        ASSERT_EQ(made.status, 0) << made.out;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::filesystem::path dir_;
    std::string file_;
};

TEST_F(DescribeCli, ShellDescribePrintsTheCreateStatement) {
    const Output r = fenec("shell " + file_ + " -c .describe");
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out,
              "create collection books (\n"
              "    title text collate tr nocase @text(k1 = 1.2, b = 0.4),\n"
              "    year int @sorted,\n"
              "    e vector<2> @hnsw(l2, m = 16, ef_construction = 200, ef_search = 100),\n"
              "    tags [text]\n"
              ")\n");
    EXPECT_NE(fenec("shell " + file_ + " -c '.describe nosuch'").status, 0);
    const Output list = fenec("shell " + file_ + " -c .collections");
    EXPECT_NE(list.out.find("books (0 rows): title text collate tr nocase @text(k1 = 1.2, b = "
                            "0.4), year int @sorted,"),
              std::string::npos)
        << list.out;
}

TEST_F(DescribeCli, InspectPrintsEachFieldsDefinition) {
    const Output r = fenec("inspect " + file_);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("  field     title text collate tr nocase @text(k1 = 1.2, b = 0.4)\n"
                         "  field     year int @sorted\n"
                         "  field     e vector<2> @hnsw(l2, m = 16, ef_construction = 200, "
                         "ef_search = 100)\n"
                         "  field     tags [text]\n"),
              std::string::npos)
        << r.out;
}

}  // namespace
}  // namespace fenec::test::describe_cli_test
