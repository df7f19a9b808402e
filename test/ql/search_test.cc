// test/ql/search_test.cc: proves, through ql::parse and the Executor on a real database, what
// `match` does beyond fenecql.md §16's examples (test/ql/golden/executor.golden has the rest):
// - a prefix term standing for more than index::limits::match_prefix_terms_max terms is a 400
//   at the query's position, naming the prefix and the bound; a longer prefix is answered;
// - `@text(stem en)` finds "Searching" for "search" where the unstemmed field does not; an
//   unknown language is a 400 at its name, naming it; `stem tr` reads Turkish suffixes after
//   Turkish lowercasing;
// - the language is kept in the file's schema: a tenant reopened, compacted, and installed from
//   its image on another node (another file system, fresh indexes) still stems, and answers
//   exactly as before.
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

TEST(Stem, SearchingIsFoundBySearchUnderStemEnOnly) {
    Tenant t;
    ASSERT_EQ(t.run("create collection articles (title text @text(stem EN), plain text @text)"),
              R"({"ok":true})");
    ASSERT_EQ(t.run(R"(insert articles [{title: "Searching the archive", plain: "Searching"},
                                        {title: "A researcher", plain: "research"}])"),
              R"({"affected":2,"ids":[1,2]})");
    // N 2, avgdl 2.5 (search the archiv | a research), df 1, tf 1, dl 3: BM25 as for any term.
    EXPECT_EQ(t.run(R"(get articles select _id match title "search")"),
              R"({"rows":[{"_id":1,"_score":0.667839575590211}]})");
    EXPECT_EQ(t.run(R"(get articles select _id match title "searches")"),
              R"({"rows":[{"_id":1,"_score":0.667839575590211}]})");
    EXPECT_EQ(t.run(R"(get articles select _id match plain "search")"), R"({"rows":[]})");
    EXPECT_EQ(t.run(R"(get articles select _id match plain "searching")"),
              R"({"rows":[{"_id":1,"_score":0.6931471805599453}]})");
    // Kept lower-cased, as libstemmer names it.
    const engine::ReadView view = t.db->read();
    const engine::Schema* schema = view.schema(*view.find("articles"));
    EXPECT_EQ(schema->fields[0].index.text.stem, "en");
    EXPECT_EQ(schema->fields[1].index.text.stem, "");
}

TEST(Stem, AnUnknownLanguageIsA400NamingIt) {
    Tenant t;
    const std::string refused = t.run("create collection c (t text @text(b = 0.5, stem klingon))");
    EXPECT_EQ(refused.rfind("400 at 48: ", 0), 0u) << refused;
    EXPECT_NE(refused.find("`klingon`"), std::string::npos) << refused;
    EXPECT_NE(refused.find("turkish"), std::string::npos) << refused;  // what there is instead
    EXPECT_EQ(t.run("create collection c (t text @text(stem en, stem tr))").rfind("400 at 43: ", 0),
              0u);
    EXPECT_EQ(t.run("create collection c (t text @text(stem))").rfind("400 at 38: ", 0), 0u);
    EXPECT_EQ(t.run("create collection c (t text)"), R"({"ok":true})");
    EXPECT_EQ(t.run("alter collection c add index t @text(stem xx)").rfind("400 at 42: ", 0), 0u);
    EXPECT_EQ(t.run("alter collection c add index t @text(stem turkish)"), R"({"ok":true})");
}

TEST(Stem, TurkishSuffixesAfterTurkishLowercasing) {
    Tenant t;
    ASSERT_EQ(t.run("create collection haberler (baslik text @text(stem tr))"), R"({"ok":true})");
    ASSERT_EQ(t.run(R"(insert haberler [{baslik: "Kitaplardan seçmeler"}, {baslik: "IŞIKLAR söndü"},
                                        {baslik: "Işık yılı"}, {baslik: "Evlerimizden uzakta"}])"),
              R"({"affected":4,"ids":[1,2,3,4]})");
    const std::string isik = t.run(R"(get haberler select _id match baslik "ışık")");
    EXPECT_NE(isik.find(R"({"_id":2,)"), std::string::npos) << isik;
    EXPECT_NE(isik.find(R"({"_id":3,)"), std::string::npos) << isik;
    EXPECT_EQ(t.run(R"(get haberler select _id match baslik "IŞIK")"), isik);
    const std::string kitap_ev = t.run(R"(get haberler select _id match baslik "kitap ev")");
    EXPECT_NE(kitap_ev.find(R"({"_id":1,)"), std::string::npos) << kitap_ev;
    EXPECT_NE(kitap_ev.find(R"({"_id":4,)"), std::string::npos) << kitap_ev;
}

TEST(Stem, KeptInTheFileThroughReopenCompactionAndAnImage) {
    Tenant t("/d/t.fenec");
    ASSERT_EQ(t.run("create collection articles (title text @text(stem en))"), R"({"ok":true})");
    ASSERT_EQ(t.run(R"(insert articles [{title: "Searching"}, {title: "searched twice, searched"},
                                        {title: "research"}, {title: "nothing"}])"),
              R"({"affected":4,"ids":[1,2,3,4]})");
    ASSERT_EQ(t.run("del articles where _id = 4"), R"({"affected":1})");
    const std::string q = R"(get articles select _id match title "search")";
    const std::string want = t.run(q);
    ASSERT_NE(want.find(R"({"_id":2,)"), std::string::npos) << want;
    ASSERT_NE(want.find(R"({"_id":1,)"), std::string::npos) << want;

    // Reopened with fresh indexes: built again from the rows, by the schema's stemmer.
    ASSERT_TRUE(t.db->close().is_ok());
    t.db.reset();
    t.indexes = std::make_unique<index::IndexSet>();
    auto opened = engine::Database::open("/d/t.fenec", t.options());
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    t.db = std::move(*opened);
    EXPECT_EQ(t.run(q), want);

    // Compacted: the rewrite keeps the schema record; reopened again after it.
    ASSERT_EQ(t.run("compact"), R"({"ok":true})");
    EXPECT_EQ(t.run(q), want);
    ASSERT_TRUE(t.db->close().is_ok());
    t.db.reset();
    t.indexes = std::make_unique<index::IndexSet>();
    opened = engine::Database::open("/d/t.fenec", t.options());
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    t.db = std::move(*opened);
    EXPECT_EQ(t.run(q), want);

    // Installed from its image on another node: another file system, other indexes.
    auto image = t.db->image();
    ASSERT_TRUE(image.is_ok()) << image.status().to_string();
    Tenant other("/d/placeholder.fenec");
    engine::ImageInfo info;
    auto installed = engine::Database::install_open(
        *image->bytes, kInstallIncoming, kInstallTarget, engine::InstallMode::create_only,
        other.options(), {}, info);
    ASSERT_TRUE(installed.is_ok()) << installed.status().to_string();
    other.db = std::move(*installed);
    EXPECT_EQ(other.run(q), want);
    EXPECT_EQ(other.run(R"(get articles select _id match title "researching")"),
              t.run(R"(get articles select _id match title "researching")"));
}

}  // namespace
}  // namespace fenec::test::search_test
