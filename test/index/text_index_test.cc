// test/index/text_index_test.cc: proves text search (fenecql.md §8):
// - the tokenizer: words of letters and digits, combining marks joining their run, every other
//   character separating, CJK stretches as overlapping pairs, NFKC_Casefold with the Turkish I
//   forms folded to one term, empty terms dropped;
// - fixture M (§16.5, #94-#104): the exact scores, ties by lower id, a filter that leaves the
//   statistics the collection's, a query of unknown terms, and a delete leaving them at once;
// - TextIndexes follows the engine: rollback (on_undo), update of the text and of another field,
//   reopen (rebuilt in on_schema), alter adding @text, drop;
// - prefix terms (`te*`): a query marks them; each stands for every term of the field starting
//   with it, scored as those terms written out would be (in byte order at the prefix's place);
//   a query whose prefixes stand for more than limits::match_prefix_terms_max terms is refused;
// - on a generated corpus (Zipf vocabulary with case, Turkish and CJK forms, fixed seed) after
//   inserts, deletes, updates and a rolled-back block, every query's answer, prefix terms
//   included, equals an exhaustive reference scorer written here: the same ids in the same
//   order, scores within 1e-12 relative.
#include "index/text_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "index/index_set.h"
#include "index/limits.h"
#include "index/stemmer.h"
#include "index/tokenizer.h"
#include "test/support/engine_fixture.h"

namespace fenec::index::text_index_test {
namespace {

using engine::Block;
using engine::CollectionId;
using engine::Database;
using engine::Doc;
using engine::DocId;
using engine::Value;
using Terms = std::vector<std::string>;
using Answer = std::vector<std::pair<uint64_t, double>>;

constexpr char kPath[] = "/d/t.fenec";

// ---------------------------------------------------------------------------------- tokenizer

TEST(TokenizerTest, WordsOfLettersAndDigitsSeparatedByEverythingElse) {
    EXPECT_EQ(tokenize("Green tea, mint!"), (Terms{"green", "tea", "mint"}));
    EXPECT_EQ(tokenize("abc123 x-y_z  e-mail@host.com"),
              (Terms{"abc123", "x", "y", "z", "e", "mail", "host", "com"}));
    EXPECT_EQ(tokenize("3.14 ½ ٣٤"), (Terms{"3", "14", "1⁄2", "٣٤"}));  // N*: Nd and No
    EXPECT_EQ(tokenize(""), Terms{});
    EXPECT_EQ(tokenize(" ,.;—…\t\n"), Terms{});
    EXPECT_EQ(tokenize("a\xff" "b"), (Terms{"a", "b"}));  // ill-formed UTF-8 separates
}

TEST(TokenizerTest, TurkishIFormsAreOneTerm) {
    const Terms one{"istanbul"};
    for (const char* form : {"ISTANBUL", "İstanbul", "ıstanbul", "istanbul", "İSTANBUL",
                             "i\u0307stanbul"}) {
        EXPECT_EQ(tokenize(form), one) << form;
    }
    EXPECT_EQ(tokenize("IZMIR ızmir İzmir"), (Terms{"izmir", "izmir", "izmir"}));
    EXPECT_EQ(tokenize("Straße STRASSE"), (Terms{"strasse", "strasse"}));  // NFKC_Casefold
    EXPECT_EQ(tokenize("ＡＢＣ ﬁne"), (Terms{"abc", "fine"}));  // compatibility forms
    EXPECT_EQ(tokenize("çay, kırmızı"), (Terms{"çay", "kirmizi"}));
}

TEST(TokenizerTest, CombiningMarksJoinTheRunTheyFollow) {
    EXPECT_EQ(tokenize("cafe\u0301 cafe"), (Terms{"café", "cafe"}));  // composed by NFKC
    EXPECT_EQ(tokenize("x \u0301y"), (Terms{"x", "y"}));  // a mark after a separator separates
    EXPECT_EQ(tokenize("नमस्ते"), (Terms{"नमस्ते"}));          // Devanagari vowel signs are marks
}

TEST(TokenizerTest, CjkStretchesBecomeOverlappingPairs) {
    EXPECT_EQ(tokenize("東京都"), (Terms{"東京", "京都"}));
    EXPECT_EQ(tokenize("東"), (Terms{"東"}));  // a stretch of one is one term
    EXPECT_EQ(tokenize("ひらがなカタカナ"),
              (Terms{"ひら", "らが", "がな", "なカ", "カタ", "タカ", "カナ"}));
    EXPECT_EQ(tokenize("한국어"), (Terms{"한국", "국어"}));
    // What stands on either side of a stretch is a word of its own.
    EXPECT_EQ(tokenize("ABC東京xyz9日"), (Terms{"abc", "東京", "xyz9", "日"}));
    EXPECT_EQ(tokenize("東京、大阪"), (Terms{"東京", "大阪"}));
    EXPECT_EQ(tokenize("コーヒー"), (Terms{"コー", "ーヒ", "ヒー"}));  // ー is kana by extension
    EXPECT_EQ(tokenize("ｶﾀｶﾅ"), (Terms{"カタ", "タカ", "カナ"}));  // half-width, by NFKC
    EXPECT_EQ(tokenize("か\u3099き"), (Terms{"がき"}));  // the mark rides on its character
}

std::vector<std::pair<std::string, bool>> query_terms(std::string_view q) {
    std::vector<std::pair<std::string, bool>> out;
    for (QueryTerm& t : tokenize_query(q)) out.emplace_back(std::move(t.text), t.prefix);
    return out;
}

TEST(TokenizerTest, AStarRightAfterAWordMakesItsLastTermAPrefix) {
    using QT = std::vector<std::pair<std::string, bool>>;
    EXPECT_EQ(query_terms("Search* tea"), (QT{{"search", true}, {"tea", false}}));
    EXPECT_EQ(query_terms("İZ* * a *b c**"),
              (QT{{"iz", true}, {"a", false}, {"b", false}, {"c", true}}));
    EXPECT_EQ(query_terms("x-y*"), (QT{{"x", false}, {"y", true}}));
    EXPECT_EQ(query_terms("東京都*"), (QT{{"東京", false}, {"京都", true}}));
    EXPECT_EQ(query_terms("café*"), (QT{{"café", true}}));  // the mark is the word's
    EXPECT_EQ(query_terms("ㅤ*"), QT{});  // a word folded to nothing marks nothing
    // Everything else is tokenize()'s: the same terms, in the same order.
    for (const char* q : {"Green tea, mint!", "İstanbul ISTANBUL", "東京都", "a*b*c"}) {
        Terms plain;
        for (const auto& [text, prefix] : query_terms(q)) plain.push_back(text);
        EXPECT_EQ(plain, tokenize(q)) << q;
    }
}

TEST(TokenizerTest, AStemmerStemsEveryTermButAPrefix) {
    auto en = Stemmer::make("en");
    ASSERT_NE(en, nullptr);
    EXPECT_EQ(tokenize("Searching SEARCHES searched, search", en.get()),
              (Terms{"search", "search", "search", "search"}));
    EXPECT_EQ(tokenize("Searching", nullptr), (Terms{"searching"}));  // no stemmer: as before
    using QT = std::vector<std::pair<std::string, bool>>;
    QT got;
    for (QueryTerm& t : tokenize_query("connected searchi* RUNNING*", en.get())) {
        got.emplace_back(std::move(t.text), t.prefix);
    }
    EXPECT_EQ(got, (QT{{"connect", false}, {"searchi", true}, {"running", true}}));
    EXPECT_EQ(Stemmer::make("klingon"), nullptr);
    EXPECT_TRUE(stem_language_known("english"));
    EXPECT_TRUE(stem_language_known("tur"));
    EXPECT_FALSE(stem_language_known("EN"));  // libstemmer's names are lower case
    EXPECT_NE(stem_languages().find("turkish"), std::string::npos);
}

TEST(TokenizerTest, TurkishStemsAfterTurkishLowercasing) {
    auto tr = Stemmer::make("tr");
    ASSERT_NE(tr, nullptr);
    // I is the capital of ı here: IŞIKLAR is ışıklar, whose stem is ışık (folded to işik as every
    // term is). Lowercased as Unicode does, it would be işiklar, which the stemmer leaves whole.
    EXPECT_EQ(tokenize("IŞIKLAR ışıklar Işık", tr.get()), (Terms{"işik", "işik", "işik"}));
    EXPECT_EQ(tokenize("Kitaplardan EVLERİMİZDEN arabalarımızdan", tr.get()),
              (Terms{"kitap", "ev", "araba"}));
    EXPECT_EQ(tokenize("I\u0307STANBUL", tr.get()), tokenize("istanbul", tr.get()));  // İ spelt I + U+0307
    // Without a Turkish stemmer the I forms fold as §8 says, one term.
    EXPECT_EQ(tokenize("IŞIK ışık", nullptr), (Terms{"işik", "işik"}));
}

TEST(TokenizerTest, EmptyTermsAreDropped) {
    EXPECT_EQ(tokenize("\u3164 a"), (Terms{"a"}));  // HANGUL FILLER: Lo, folded to nothing
}

// --------------------------------------------------------------------------------- fixture M

engine::Schema notes_schema() {
    engine::Schema s;
    engine::FieldDesc body;
    body.name = "body";
    body.type = engine::make_type(engine::BaseType::Text);
    body.index.kind = engine::IndexKind::text;
    body.index.text.k1_hundredths = 90;  // the FenecQL defaults (fenecql.md §4.1)
    body.index.text.b_hundredths = 40;
    engine::FieldDesc lang;
    lang.name = "lang";
    lang.type = engine::make_type(engine::BaseType::Text);
    s.fields = {body, lang};
    return s;
}

Doc note(const std::string& body, const std::string& lang) {
    return Doc{{0, Value(body)}, {1, Value(lang)}};
}

// A tenant whose IndexSet carries a TextIndexes as an extension, as the node wires it.
struct Tenant {
    test::EngineEnv env;
    IndexSet indexes;
    TextIndexes text;
    std::unique_ptr<Database> db;
    CollectionId c;

    Tenant() { indexes.add_extension(&text); }
    engine::OpenOptions options() {
        engine::OpenOptions o = env.options();
        o.hook = &indexes;
        return o;
    }
    void create(const engine::Schema& schema) {
        auto created = Database::create(kPath, options());
        ASSERT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
        auto b = db->begin();
        ASSERT_OK(b);
        auto id = b->create_collection("notes", schema);
        ASSERT_OK(id);
        c = *id;
        ASSERT_OK(b->commit());
    }
    template <class F>
    void land(F&& f) {
        auto b = db->begin();
        ASSERT_OK(b);
        f(*b);
        ASSERT_OK(b->commit());
    }
    Answer match(std::string_view q, size_t k = 100,
                 const std::function<bool(uint64_t)>& keep = [](uint64_t) { return true; }) {
        auto answer = text.match(c, 0, q, keep, k);
        EXPECT_TRUE(answer.is_ok()) << answer.status().to_string();
        return answer.is_ok() ? answer.value() : Answer{};
    }
};

struct TextFixtureM : ::testing::Test {
    Tenant t;
    void SetUp() override {
        t.create(notes_schema());
        t.land([](Block& b) {
            for (const Doc& d : {note("black tea", "en"), note("green tea, mint", "en"),
                                 note("black coffee", "en"), note("İzmir tea house, tea", "tr"),
                                 note("IZMIR ızmir", "tr")}) {
                ASSERT_OK(b.insert(CollectionId{1}, std::nullopt, d));
            }
        });
        ASSERT_EQ(t.c.v, 1u);
    }
};

void expect_answer(const Answer& got, const Answer& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].first, want[i].first) << "row " << i;
        EXPECT_NEAR(got[i].second, want[i].second, 1e-8 * want[i].second) << "row " << i;
    }
}

TEST_F(TextFixtureM, StatisticsOfTheFixture) {
    ASSERT_TRUE(t.text.has(t.c, 0));
    EXPECT_FALSE(t.text.has(t.c, 1));
    auto stats = t.text.stats(t.c, 0);
    ASSERT_TRUE(stats);
    EXPECT_EQ(stats->rows, 5u);
    EXPECT_EQ(stats->total_length, 13u);
    EXPECT_EQ(stats->terms, 7u);  // black tea green mint coffee izmir house
}

TEST_F(TextFixtureM, Examples94To103) {
    expect_answer(t.match("tea"), {{4, 0.662019571}, {1, 0.563641557}, {2, 0.523729881}});  // 94
    expect_answer(t.match("black"), {{1, 0.915498637}, {3, 0.915498637}});                 // 95
    expect_answer(t.match("black tea"),
                  {{1, 1.479140194}, {3, 0.915498637}, {4, 0.662019571}, {2, 0.523729881}});
    expect_answer(t.match("İZMİR"), {{5, 1.180998242}, {4, 0.794418729}});  // 97
    expect_answer(t.match("tea tea"),
                  {{4, 1.324039142}, {1, 1.127283113}, {2, 1.047459761}});  // 98
    expect_answer(t.match("house mint"), {{2, 1.347028746}, {4, 1.257952635}});  // 99
    auto en = [](uint64_t id) { return id <= 3; };  // lang = "en"
    expect_answer(t.match("tea", 100, en), {{1, 0.563641557}, {2, 0.523729881}});  // 100
    expect_answer(t.match("coffee"), {{3, 1.4496812328391744}});                   // 101
    Answer top2 = t.match("tea", 2);                                               // 102
    ASSERT_EQ(top2.size(), 2u);
    expect_answer({top2[1]}, {{1, 0.563641557}});
    EXPECT_TRUE(t.match("çay, kırmızı").empty());  // 103
    EXPECT_TRUE(t.match(" ,.").empty());           // no terms, no rows
    EXPECT_TRUE(t.match("tea", 0).empty());
    EXPECT_TRUE(t.text
                    .match(
                        t.c, 1, "en", [](uint64_t) { return true; }, 10)
                    .value()
                    .empty());
}

TEST_F(TextFixtureM, APrefixScoresAsTheTermsItStandsFor) {
    // One term each: the prefix answers what the term answers, score for score.
    EXPECT_EQ(t.match("te*"), t.match("tea"));
    EXPECT_EQ(t.match("TEA*"), t.match("tea"));   // a whole term is a prefix of itself
    EXPECT_EQ(t.match("İz*"), t.match("izmir"));  // folded as a term is
    EXPECT_EQ(t.match("bl* tea"), t.match("black tea"));
    EXPECT_EQ(t.match("t* tea"), t.match("tea tea"));  // counted once more: qtf 2
    EXPECT_EQ(t.match("ho* mi*"), t.match("house mint"));
    // Several terms: each once, in byte order where the prefix stands (black before coffee).
    EXPECT_EQ(t.match("c* b*"), t.match("coffee black"));
    EXPECT_EQ(t.match("* b*"), t.match("black"));
    expect_answer(t.match("bla*"), {{1, 0.915498637}, {3, 0.915498637}});
    EXPECT_TRUE(t.match("teas*").empty());  // no term starts with it
    EXPECT_TRUE(t.match("*").empty());      // a star alone is no term
}

TEST_F(TextFixtureM, APrefixStandingForTooManyTermsIsRefused) {
    std::string many;
    for (size_t i = 0; i <= limits::match_prefix_terms_max; ++i)
        many += "w" + std::to_string(i) + " ";
    t.land([&](Block& b) { ASSERT_OK(b.insert(t.c, std::nullopt, note(many, "en"))); });
    auto all = [](uint64_t) { return true; };
    auto refused = t.text.match(t.c, 0, "tea w*", all, 10);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), engine::Code::invalid_argument);
    EXPECT_NE(refused.status().message().find("`w*`"), std::string::npos);
    // Every prefix of the query counts toward the bound, together: w0 alone, then 136 terms
    // for w1* (w1, w1x, w1xx, w1000..w1024) and 111 for each of w2* to w9*, 1025 in all.
    auto halves = t.text.match(t.c, 0, "w0* w1* w2* w3* w4* w5* w6* w7* w8* w9*", all, 10);
    ASSERT_FALSE(halves.is_ok());
    // Under the bound: w10, w100..w109 and w1000..w1024 (1 + 10 + 25 terms), one row.
    auto fine = t.text.match(t.c, 0, "w10*", all, 10);
    ASSERT_TRUE(fine.is_ok());
    ASSERT_EQ(fine.value().size(), 1u);
    EXPECT_EQ(fine.value()[0].first, 6u);
}

TEST_F(TextFixtureM, Example104DeleteLeavesTheStatisticsAtOnce) {
    t.land([](Block& b) { ASSERT_OK(b.del(CollectionId{1}, DocId{3})); });
    expect_answer(t.match("black"), {{1, 1.269577781}});
    EXPECT_EQ(t.text.stats(t.c, 0)->rows, 4u);
    EXPECT_EQ(t.text.stats(t.c, 0)->total_length, 11u);
}

TEST_F(TextFixtureM, RollbackUpdateReopenAlterAndDrop) {
    const Answer tea = t.match("black tea");
    {  // a block rolled back leaves nothing behind (on_undo)
        auto b = t.db->begin();
        ASSERT_OK(b);
        ASSERT_OK(b->insert(t.c, std::nullopt, note("black black tea", "en")));
        ASSERT_OK(b->put(t.c, DocId{1}, note("mint", "en")));
        ASSERT_OK(b->del(t.c, DocId{4}));
        EXPECT_EQ(t.text.stats(t.c, 0)->rows, 5u);
        b->rollback();
    }
    EXPECT_EQ(t.match("black tea"), tea);
    // Updating another field changes nothing; updating the text moves the row.
    t.land([&](Block& b) { ASSERT_OK(b.put(t.c, DocId{4}, note("İzmir tea house, tea", "xx"))); });
    EXPECT_EQ(t.match("black tea"), tea);
    t.land([&](Block& b) { ASSERT_OK(b.put(t.c, DocId{1}, note("mint", "en"))); });
    Answer black = t.match("black");
    ASSERT_EQ(black.size(), 1u);
    EXPECT_EQ(black[0].first, 3u);
    t.land([&](Block& b) { ASSERT_OK(b.put(t.c, DocId{1}, note("black tea", "en"))); });
    EXPECT_EQ(t.match("black tea"), tea);
    // A row with no terms and a null text are not counted.
    t.land([&](Block& b) {
        ASSERT_OK(b.insert(t.c, std::nullopt, note("...", "en")));
        ASSERT_OK(b.insert(t.c, std::nullopt, Doc{{1, Value("en")}}));
    });
    EXPECT_EQ(t.text.stats(t.c, 0)->rows, 5u);
    EXPECT_EQ(t.match("black tea"), tea);
    // Reopen: built again from the rows in on_schema.
    ASSERT_TRUE(t.db->close().is_ok());
    t.db.reset();
    t.text.on_schema(t.c, nullptr, nullptr);
    EXPECT_FALSE(t.text.has(t.c, 0));
    auto opened = Database::open(kPath, t.options());
    ASSERT_OK(opened);
    t.db = std::move(*opened);
    EXPECT_EQ(t.match("black tea"), tea);
    // Alter: @text on `lang` is built from the rows as they stand.
    t.land([&](Block& b) {
        engine::AlterSpec spec;
        spec.kind = engine::AlterKind::set_index;
        spec.field = "lang";
        spec.index.kind = engine::IndexKind::text;
        spec.index.text.k1_hundredths = 90;
        spec.index.text.b_hundredths = 40;
        ASSERT_TRUE(b.alter_collection(t.c, spec).is_ok());
    });
    ASSERT_TRUE(t.text.has(t.c, 1));
    Answer tr = t.text
                    .match(
                        t.c, 1, "TR", [](uint64_t) { return true; }, 10)
                    .value();
    ASSERT_EQ(tr.size(), 1u);
    EXPECT_EQ(tr[0].first, 5u);
    EXPECT_EQ(t.match("black tea"), tea);
    t.land([&](Block& b) { ASSERT_TRUE(b.drop_collection(t.c).is_ok()); });
    EXPECT_FALSE(t.text.has(t.c, 0));
    EXPECT_FALSE(t.text.has(t.c, 1));
    EXPECT_TRUE(t.match("tea").empty());
    EXPECT_EQ(t.text.encode_graph(t.c, 0, engine::Seq{1}, engine::format::kNoDurableStamp)
                  .status()
                  .code(),
              engine::Code::not_found);
}

// ------------------------------------------------------------------ the reference scorer

// Exhaustive BM25 over the live rows as the test keeps them, straight from fenecql.md §8: every
// row tokenized, every statistic counted afresh.
class Reference {
public:
    Reference(const std::map<uint64_t, std::string>& rows, double k1, double b) : k1_(k1), b_(b) {
        for (const auto& [id, text] : rows) {
            Terms terms = tokenize(text);
            if (terms.empty()) continue;
            for (const std::string& term : terms) {
                if (tf_[id][term]++ == 0) ++df_[term];
                vocabulary_.insert(term);
            }
            dl_[id] = static_cast<double>(terms.size());
            n_ += 1;
            total_ += static_cast<double>(terms.size());
        }
    }

    Answer match(std::string_view query, const std::function<bool(uint64_t)>& keep,
                 size_t k) const {
        std::vector<std::string> order;
        std::map<std::string, double> qtf;
        for (const QueryTerm& q : tokenize_query(query)) {
            if (!q.prefix) {
                if (qtf[q.text]++ == 0) order.push_back(q.text);
                continue;
            }
            for (const std::string& term : vocabulary_) {  // in byte order
                if (term.compare(0, q.text.size(), q.text) != 0) continue;
                if (qtf[term]++ == 0) order.push_back(term);
            }
        }
        std::map<std::string, double> df;
        for (const std::string& term : order) {
            auto it = df_.find(term);
            df[term] = it == df_.end() ? 0 : it->second;
        }
        Answer all;
        if (n_ == 0) return all;
        const double avgdl = total_ / n_;
        for (const auto& [id, counts] : tf_) {
            if (!keep(id)) continue;
            double score = 0;
            bool holds = false;
            for (const std::string& term : order) {
                auto it = counts.find(term);
                if (it == counts.end()) continue;
                holds = true;
                const double idf = std::log(1 + (n_ - df[term] + 0.5) / (df[term] + 0.5));
                const double f = it->second;
                score += qtf[term] * idf * (f * (k1_ + 1)) /
                         (f + k1_ * (1 - b_ + b_ * dl_.at(id) / avgdl));
            }
            if (holds) all.emplace_back(id, score);
        }
        std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
            return x.second > y.second || (x.second == y.second && x.first < y.first);
        });
        if (all.size() > k) all.resize(k);
        return all;
    }

private:
    double k1_;
    double b_;
    std::map<uint64_t, std::map<std::string, uint32_t>> tf_;
    std::map<uint64_t, double> dl_;
    std::set<std::string> vocabulary_;  // every term of the live rows
    std::map<std::string, double> df_;  // rows holding each term
    double n_ = 0;
    double total_ = 0;
};

// Words by Zipf rank, written in one of several forms that fold together (case, Turkish I,
// full-width) and some as Han pairs, so the index sees the tokenizer's whole mapping.
class Corpus {
public:
    explicit Corpus(uint64_t seed) : rng_(seed) {
        double sum = 0;
        for (size_t r = 1; r <= kVocab; ++r) cdf_.push_back(sum += 1.0 / std::pow(double(r), 1.07));
        for (double& x : cdf_) x /= sum;
    }
    std::string word() {
        const size_t rank = rank_();
        std::string base;
        for (size_t r = rank + 1; r > 0; r /= 11) base += char('a' + r % 11);
        const int form = int(rng_() % 4);
        if (rank % 29 == 0) return kHan[rank % 5] + std::string(kHan[(rank / 5) % 5]);
        if (rank % 13 == 0) return kIForms[form] + base;
        if (form == 1) std::transform(base.begin(), base.end(), base.begin(), ::toupper);
        return base;
    }
    std::string text() {
        const size_t words = rng_() % 24;  // some rows hold no term at all
        std::string out;
        for (size_t i = 0; i < words; ++i) {
            if (i) out += kSeparators[rng_() % 4];
            out += word();
        }
        return out;
    }
    std::mt19937_64& rng() { return rng_; }

private:
    static constexpr size_t kVocab = 3000;
    static constexpr const char* kHan[5] = {"東", "京", "都", "大", "阪"};
    static constexpr const char* kSeparators[4] = {" ", ", ", " — ", "-"};
    static constexpr const char* kIForms[4] = {"ı", "İ", "I", "i"};
    size_t rank_() {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
        return size_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    }
    std::mt19937_64 rng_;
    std::vector<double> cdf_;
};

void expect_same(const Answer& got, const Answer& want, const std::string& query) {
    ASSERT_EQ(got.size(), want.size()) << query;
    for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].first, want[i].first) << query << " at " << i;
        ASSERT_NEAR(got[i].second, want[i].second, 1e-12 * std::abs(want[i].second))
            << query << " at " << i;
    }
}

TEST(TextIndexReferenceTest, GeneratedCorpusEqualsExhaustiveScorer) {
    Tenant t;
    engine::Schema schema = notes_schema();
    schema.fields[0].index.text.k1_hundredths = 120;
    schema.fields[0].index.text.b_hundredths = 75;
    t.create(schema);
    Corpus corpus(20240917);
    std::map<uint64_t, std::string> rows;  // the live rows, as the reference sees them
    auto& rng = corpus.rng();

    int answered = 0;
    auto check = [&](int queries) {
        const Reference ref(rows, 1.2, 0.75);
        for (int q = 0; q < queries; ++q) {
            std::string query;
            const int words = 1 + int(rng() % 4);
            for (int w = 0; w < words; ++w) {
                std::string word = corpus.word();
                // Every third word a prefix: cut after 1 to 3 bytes where that is a character
                // boundary (the corpus's words are ASCII but for the I-forms and Han).
                const size_t cut = 1 + rng() % 3;
                if (q % 3 == 1 && cut < word.size() && (word[cut] & 0xC0) != 0x80) {
                    word = word.substr(0, cut) + "*";
                }
                query += (w ? " " : "") + word;
            }
            if (q % 10 == 0) query += " zzzunknown";
            const uint64_t modulus = 1 + rng() % 4;  // 1: no filter
            auto keep = [modulus](uint64_t id) { return id % modulus != 0 || modulus == 1; };
            const size_t k = std::array<size_t, 4>{1, 10, 100, 100000}[rng() % 4];
            const Answer want = ref.match(query, keep, k);
            expect_same(t.match(query, k, keep), want, query);
            answered += want.empty() ? 0 : 1;
        }
    };

    for (int block = 0; block < 20; ++block) {
        t.land([&](Block& b) {
            for (int i = 0; i < 100; ++i) {
                const std::string text = corpus.text();
                auto id = b.insert(t.c, std::nullopt, note(text, "en"));
                ASSERT_OK(id);
                rows[id->v] = text;
            }
        });
    }
    check(40);
    // Deletes and updates (of the text and of the other field), then a block taken back.
    t.land([&](Block& b) {
        for (int i = 0; i < 300; ++i) {
            const uint64_t id = 1 + rng() % 2000;
            if (!rows.count(id)) continue;
            ASSERT_OK(b.del(t.c, DocId{id}));
            rows.erase(id);
        }
    });
    t.land([&](Block& b) {
        for (int i = 0; i < 300; ++i) {
            const uint64_t id = 1 + rng() % 2000;
            if (!rows.count(id)) continue;
            const bool text_too = i % 3 != 0;
            if (text_too) rows[id] = corpus.text();
            ASSERT_OK(b.put(t.c, DocId{id}, note(rows[id], text_too ? "en" : "tr")));
        }
    });
    {
        auto b = t.db->begin();
        ASSERT_OK(b);
        for (int i = 0; i < 200; ++i) {
            const uint64_t id = 1 + rng() % 2100;
            if (i % 2) {
                ASSERT_OK(b->put(t.c, DocId{id}, note(corpus.text(), "en")));
            } else {
                ASSERT_OK(b->del(t.c, DocId{id}));
            }
        }
        b->rollback();
    }
    check(60);
    EXPECT_GT(answered, 80);  // the queries found rows: the comparison was not of empty answers
}

}  // namespace
}  // namespace fenec::index::text_index_test
