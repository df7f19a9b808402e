// test/ql/search_test.cc: proves, through ql::parse and the Executor on a real database, what
// `match` does beyond fenecql.md §16's examples (test/ql/golden/executor.golden has the rest):
// - a prefix term standing for more than index::limits::match_prefix_terms_max terms is a 400
//   at the query's position, naming the prefix and the bound; a longer prefix is answered.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "index/index_set.h"
#include "index/limits.h"
#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::search_test {
namespace {

// A tenant file on a FaultFs with the node's indexes, statements run as the node runs them.
struct Tenant {
    EngineEnv env;
    std::unique_ptr<index::IndexSet> indexes = std::make_unique<index::IndexSet>();
    std::unique_ptr<engine::Database> db;

    explicit Tenant(const std::string& path = "/t.fenec") {
        auto created = engine::Database::create(path, options());
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
    }
    engine::OpenOptions options() {
        engine::OpenOptions o = env.options(engine::SyncPolicy::at_close());
        o.hook = indexes.get();
        return o;
    }
    // The answer's JSON, or the refusal as Error::to_string gives it: "400 at 24: ...".
    std::string run(const std::string& text) {
        auto p = ql::parse(text);
        if (!p) return p.error().to_string();
        const ql::Item item{&p.value(), {}};
        ql::BlockOutcome o = ql::Executor(*db, *indexes).run_block({&item, 1}, {});
        if (o.error) return o.error->to_string();
        return ql::to_json(o.answers[0]);
    }
};

TEST(MatchPrefix, StandingForTooManyTermsIsA400AtTheQuery) {
    Tenant t;
    ASSERT_EQ(t.run("create collection notes (body text @text)"), R"({"ok":true})");
    std::string words;
    for (size_t i = 0; i <= index::limits::match_prefix_terms_max; ++i) {
        words += " w" + std::to_string(i);
    }
    ASSERT_EQ(t.run("insert notes {body: \"" + words + "\"}"), R"({"affected":1,"ids":[1]})");
    const std::string refused = t.run(R"(get notes select _id match body "tea w*")");
    EXPECT_EQ(refused.rfind("400 at 32: ", 0), 0u) << refused;  // the query text's position
    EXPECT_NE(refused.find("`w*`"), std::string::npos) << refused;
    EXPECT_NE(refused.find("1024"), std::string::npos) << refused;
    EXPECT_EQ(t.run(R"(get notes select _id match body "w102*")"),
              R"({"rows":[{"_id":1,"_score":1.726092434710685}]})");
}

}  // namespace
}  // namespace fenec::test::search_test
