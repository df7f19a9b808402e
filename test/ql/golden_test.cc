// test/ql/golden_test.cc: proves the FenecQL pipeline (ql::parse, then Executor::run, then
// to_json) against the 160 golden examples of fenecql.md §16, transcribed in
// test/ql/golden/fenecql.golden (the file's header documents its format), and against the cases
// of test/ql/golden/executor.golden that pin executor fixes beyond §16 (GoldenExtra/...).
//
// One test per case (Golden/GoldenCase.Run/case_NNN): a fresh database on a FaultFs per case,
// with the IndexSet as its hook and the same IndexSet given to the Executor; the fixture's steps,
// then those of the case it runs after, then its own, each checked against its `expect:`. A 200
// is compared as exact JSON text (or, with `~TOL`, by shape with floats within TOL); an error by
// its status, the members listed and the words its message must name. Cases marked `pending:`
// are skipped and counted (GoldenFile.CoversEveryExample prints the count and the reasons).
//
// The file is found at $FENEC_SOURCE_DIR/test/ql/golden/fenecql.golden, else relative to the
// working directory (ctest runs ql_tests at the project root). FENEC_GOLDEN_VERBOSE=1 prints
// every step's answer; FENEC_GOLDEN_RUN_PENDING=1 runs the pending cases too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/database.h"
#include "index/index_set.h"
#include "json/timestamp.h"
#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"
#include "test/support/json_value.h"

namespace fenec::ql::golden_test {
namespace {

constexpr int kCasesExpected = 160;  // fenecql.md §16 numbers its examples 1 to 160
constexpr const char* kGoldenDir = "test/ql/golden/";
constexpr const char* kSpecFile = "fenecql.golden";    // §16's examples, exactly
constexpr const char* kExtraFile = "executor.golden";  // cases beyond §16 that pin executor fixes

// ---- the golden file's model

struct Expect {
    int status = 200;
    std::string json;                            // a 200's answer
    std::optional<double> tolerance;             // `~TOL`: floats compared approximately
    std::map<std::string, std::string> members;  // position, limit, max, collection, id, ...
    std::vector<std::string> names;              // words the error message must contain
};

struct Step {
    int line = 0;
    std::string query;
    std::optional<std::string> params;  // a JSON array
    bool admin = false;                 // the read-only endpoint
    std::optional<Expect> expect;       // a fixture step may leave it out: then 200
};

struct Case {
    int number = 0;
    int line = 0;
    std::string title;
    std::optional<std::string> fixture;
    std::optional<int> after;
    std::optional<std::string> now;
    std::string pending;
    std::vector<Step> steps;
};

void PrintTo(const Case& c, std::ostream* os) { *os << "#" << c.number << " " << c.title; }

struct GoldenFile {
    std::string path;
    std::map<std::string, std::vector<Step>> fixtures;
    std::deque<Case> cases;  // a deque: the reader holds on to the last case while it grows
    std::vector<std::string> errors;  // what could not be read, with line numbers

    const Case* find(int number) const {
        for (const Case& c : cases) {
            if (c.number == number) return &c;
        }
        return nullptr;
    }
};

// ---- reading it

std::string trim(std::string_view s) {
    size_t a = 0, b = s.size();
    while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
    return std::string(s.substr(a, b - a));
}

// "200 {...}", "200 ~1e-8 {...}" or "400 position=17 names=title".
std::optional<Expect> parse_expect(const std::string& text, std::string& error) {
    Expect e;
    std::istringstream in(text);
    if (!(in >> e.status)) {
        error = "expect: needs a status";
        return std::nullopt;
    }
    std::string rest;
    std::getline(in, rest, '\0');
    rest = trim(rest);
    if (e.status == 200) {
        if (rest.starts_with("~")) {
            const size_t space = rest.find(' ');
            e.tolerance = std::strtod(rest.substr(1, space - 1).c_str(), nullptr);
            rest = space == std::string::npos ? "" : trim(rest.substr(space));
        }
        if (rest.empty()) error = "expect: 200 needs the answer's JSON";
        e.json = rest;
        return e;
    }
    std::istringstream tokens(rest);
    std::string token;
    while (tokens >> token) {
        const size_t eq = token.find('=');
        if (eq == std::string::npos || eq == 0) {
            error = "expect: `" + token + "` is not key=value";
            return std::nullopt;
        }
        const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
        static const char* kKnown[] = {"position", "limit", "max",      "collection",
                                       "id",       "field", "statement"};
        if (key == "names") {
            e.names.push_back(value);
            continue;
        }
        bool known = false;
        for (const char* k : kKnown) known = known || key == k;
        if (!known) {
            error = "expect: unknown member `" + key + "`";
            return std::nullopt;
        }
        e.members[key] = value;
    }
    return e;
}

class GoldenReader {
  public:
    explicit GoldenReader(GoldenFile& out) : out_(out) {}

    void line(int number, const std::string& raw) {
        line_ = number;
        const std::string text = trim(raw);
        if (!raw.empty() && (raw[0] == ' ' || raw[0] == '\t') && !text.empty()) {
            if (!continued_) return fail("a continuation line follows nothing to continue");
            *continued_ += "\n" + raw;
            return;
        }
        continued_ = nullptr;
        if (text.empty()) return;
        if (raw.starts_with("### ")) return start_case(raw.substr(4));
        if (raw.starts_with("=== fixture ")) return start_fixture(trim(raw.substr(12)));
        if (raw[0] == '#') return;
        const size_t colon = raw.find(':');
        if (colon == std::string::npos) return fail("a line is `key: value`");
        key_value(raw.substr(0, colon), raw.substr(colon + 1));
    }

    void finish() { finish_expect(); }

  private:
    void fail(const std::string& what) {
        out_.errors.push_back(out_.path + ":" + std::to_string(line_) + ": " + what);
    }

    void start_case(const std::string& header) {
        finish_expect();
        Case c;
        c.line = line_;
        std::istringstream in(header);
        if (!(in >> c.number)) return fail("`### N`: N is the case number");
        std::getline(in, c.title, '\0');
        c.title = trim(c.title);
        out_.cases.push_back(std::move(c));
        steps_ = &out_.cases.back().steps;
        case_ = &out_.cases.back();
    }

    void start_fixture(const std::string& name) {
        finish_expect();
        if (out_.fixtures.contains(name)) return fail("fixture " + name + " is defined twice");
        steps_ = &out_.fixtures[name];
        case_ = nullptr;
    }

    void key_value(const std::string& key, const std::string& raw_value) {
        const std::string value = trim(raw_value);
        if (!steps_) return fail("`" + key + ":` before any `### N` or `=== fixture`");
        if (key == "query") {
            finish_expect();
            steps_->push_back(Step{line_, value, std::nullopt, false, std::nullopt});
            expect_text_.reset();
            continued_ = &steps_->back().query;
            return;
        }
        if (key == "params" || key == "endpoint" || key == "expect") return step_key(key, value);
        if (!case_) return fail("`" + key + ":` belongs to a case, not a fixture");
        if (!steps_->empty()) return fail("`" + key + ":` comes before the case's first step");
        if (key == "fixture") {
            case_->fixture = value;
        } else if (key == "after") {
            case_->after = std::atoi(value.c_str());
        } else if (key == "now") {
            case_->now = value;
        } else if (key == "pending") {
            case_->pending = value;
        } else if (key == "note") {
            note_ = value;
            continued_ = &note_;
        } else {
            fail("unknown key `" + key + "`");
        }
    }

    void step_key(const std::string& key, const std::string& value) {
        if (steps_->empty()) return fail("`" + key + ":` before the step's `query:`");
        Step& step = steps_->back();
        if (key == "params") {
            step.params = value;
            continued_ = &*step.params;
        } else if (key == "endpoint") {
            if (value != "admin" && value != "data") fail("endpoint: admin or data");
            step.admin = value == "admin";
        } else {
            expect_text_ = value;
            continued_ = &*expect_text_;
        }
    }

    // The expectation is parsed once its continuation lines are in.
    void finish_expect() {
        if (!expect_text_ || !steps_ || steps_->empty()) return;
        std::string error;
        steps_->back().expect = parse_expect(*expect_text_, error);
        if (!error.empty()) fail(error);
        expect_text_.reset();
        continued_ = nullptr;
    }

    GoldenFile& out_;
    int line_ = 0;
    std::vector<Step>* steps_ = nullptr;
    Case* case_ = nullptr;
    std::string* continued_ = nullptr;
    std::optional<std::string> expect_text_;
    std::string note_;
};

std::string golden_path(const char* name) {
    if (const char* dir = std::getenv("FENEC_SOURCE_DIR"); dir && *dir) {
        return std::string(dir) + "/" + kGoldenDir + name;
    }
    return std::string(kGoldenDir) + name;
}

// Reads `name`; `base`, when given, lends its fixtures (a file may define its own too).
GoldenFile read_golden(const char* name, const GoldenFile* base) {
    GoldenFile file;
    file.path = golden_path(name);
    std::ifstream in(file.path);
    if (!in) {
        file.errors.push_back("cannot open " + file.path +
                              " (run at the project root, or set FENEC_SOURCE_DIR)");
        return file;
    }
    GoldenReader reader(file);
    std::string raw;
    for (int number = 1; std::getline(in, raw); ++number) reader.line(number, raw);
    reader.finish();
    // The base's fixtures, after the file's own: a fixture the file defines again wins.
    if (base) file.fixtures.insert(base->fixtures.begin(), base->fixtures.end());
    return file;
}

// Each file is read once per process: the parameterized tests are instantiated from them.
const GoldenFile& spec_file() {
    static const GoldenFile file = read_golden(kSpecFile, nullptr);
    return file;
}

const GoldenFile& extra_file() {
    static const GoldenFile file = read_golden(kExtraFile, &spec_file());
    return file;
}

// A case with the file it belongs to (for its fixtures and `after:` cases).
struct CaseRef {
    const GoldenFile* file = nullptr;
    const Case* c = nullptr;
};

void PrintTo(const CaseRef& ref, std::ostream* os) { PrintTo(*ref.c, os); }

std::vector<CaseRef> case_refs(const GoldenFile& file) {
    std::vector<CaseRef> refs;
    for (const Case& c : file.cases) refs.push_back(CaseRef{&file, &c});
    return refs;
}

// ---- running a step

// `{{N*TEXT}}` stands for TEXT repeated N times.
std::string expand(const std::string& query) {
    std::string out;
    size_t at = 0;
    while (true) {
        const size_t open = query.find("{{", at);
        const size_t star = open == std::string::npos ? open : query.find('*', open);
        const size_t close = star == std::string::npos ? star : query.find("}}", star);
        if (close == std::string::npos) break;
        out += query.substr(at, open - at);
        const long n = std::atol(query.substr(open + 2, star - open - 2).c_str());
        const std::string text = query.substr(star + 1, close - star - 1);
        for (long i = 0; i < n; ++i) out += text;
        at = close + 2;
    }
    return out + query.substr(at);
}

struct Outcome {
    std::optional<Answer> answer;
    std::optional<Error> error;

    int status() const { return error ? error->status() : 200; }
    std::string describe() const {
        if (answer) return "200 " + to_json(*answer);
        const Error& e = *error;
        std::string out = std::to_string(e.status());
        if (e.position) out += " position=" + std::to_string(*e.position);
        if (e.limit != Limit::none) {
            out += " limit=" + std::string(limit_name(e.limit)) + " max=" + std::to_string(e.max);
        }
        if (!e.collection.empty()) out += " collection=" + e.collection;
        if (e.id) out += " id=" + std::to_string(*e.id);
        if (!e.field.empty()) out += " field=" + e.field;
        if (!e.statement.empty()) out += " statement=" + e.statement;
        return out + " \"" + e.message + "\"";
    }
};

Outcome run_step(Executor& executor, const Step& step, int64_t now_ms) {
    Outcome out;
    std::vector<engine::Value> params;
    if (step.params) {
        std::string error;
        std::optional<engine::Value> v = test::parse_json(*step.params, &error);
        const auto* list = v ? std::get_if<engine::List>(&v->rep) : nullptr;
        if (!list) {
            ADD_FAILURE() << "params: is not a JSON array: " << error;
            return out;
        }
        params = list->items;
    }
    QlResult<ParsedStatement> parsed = parse(expand(step.query));
    if (!parsed) {
        out.error = parsed.error();
        return out;
    }
    QlResult<Answer> answer =
        executor.run(parsed.value(), params, RunOptions{.read_only = step.admin, .now_ms = now_ms});
    if (answer)
        out.answer = std::move(answer.value());
    else
        out.error = answer.error();
    return out;
}

// ---- comparing

bool near_enough(double actual, double expected, double tolerance) {
    const double bound = expected == 0 ? tolerance : tolerance * std::fabs(expected);
    return std::fabs(actual - expected) <= bound;
}

// Empty when `actual` has `expected`'s shape with floats within `tolerance`; else where not.
std::string approx_diff(const engine::Value& actual, const engine::Value& expected,
                        double tolerance, const std::string& path) {
    if (const double* e = std::get_if<double>(&expected.rep)) {
        const double* a = std::get_if<double>(&actual.rep);
        if (a && near_enough(*a, *e, tolerance)) return "";
        return path + ": expected ≈" + std::to_string(*e);
    }
    if (const auto* e = std::get_if<engine::List>(&expected.rep)) {
        const auto* a = std::get_if<engine::List>(&actual.rep);
        if (!a || a->items.size() != e->items.size()) return path + ": list size differs";
        for (size_t i = 0; i < e->items.size(); ++i) {
            std::string d = approx_diff(a->items[i], e->items[i], tolerance,
                                        path + "[" + std::to_string(i) + "]");
            if (!d.empty()) return d;
        }
        return "";
    }
    if (const auto* e = std::get_if<engine::Object>(&expected.rep)) {
        const auto* a = std::get_if<engine::Object>(&actual.rep);
        if (!a || a->keys != e->keys) return path + ": keys differ";
        for (size_t i = 0; i < e->keys.size(); ++i) {
            std::string d =
                approx_diff(a->values[i], e->values[i], tolerance, path + "." + e->keys[i]);
            if (!d.empty()) return d;
        }
        return "";
    }
    return actual == expected ? "" : path + ": differs";
}

void check_answer(const Outcome& got, const Expect& expect) {
    const std::string json = to_json(*got.answer);
    if (!expect.tolerance) {
        EXPECT_EQ(json, expect.json);
        return;
    }
    std::string error;
    std::optional<engine::Value> want = test::parse_json(expect.json, &error);
    ASSERT_TRUE(want) << "the expected JSON does not read: " << error;
    std::optional<engine::Value> have = test::parse_json(json, &error);
    ASSERT_TRUE(have) << "the answer is not JSON: " << error << "\n" << json;
    const std::string diff = approx_diff(*have, *want, *expect.tolerance, "$");
    EXPECT_TRUE(diff.empty()) << diff << "\n  answer:   " << json
                              << "\n  expected: " << expect.json;
}

// The member `key` of an error as text; nullopt when it does not carry it.
std::optional<std::string> member(const Error& e, const std::string& key) {
    if (key == "position") {
        return e.position ? std::optional(std::to_string(*e.position)) : std::nullopt;
    }
    if (key == "limit") {
        return e.limit != Limit::none ? std::optional(std::string(limit_name(e.limit)))
                                      : std::nullopt;
    }
    if (key == "max")
        return e.limit != Limit::none ? std::optional(std::to_string(e.max)) : std::nullopt;
    if (key == "id") return e.id ? std::optional(std::to_string(*e.id)) : std::nullopt;
    const std::string& s = key == "collection" ? e.collection
                           : key == "field"    ? e.field
                                               : e.statement;
    return s.empty() ? std::nullopt : std::optional(s);
}

void check_error(const Outcome& got, const Expect& expect) {
    const Error& e = *got.error;
    for (const auto& [key, want] : expect.members) {
        const std::optional<std::string> have = member(e, key);
        if (want == "none") {
            EXPECT_FALSE(have) << key << " should be absent; got " << got.describe();
        } else {
            EXPECT_EQ(have.value_or("(absent)"), want) << key << "; got " << got.describe();
        }
    }
    for (const std::string& word : expect.names) {
        EXPECT_NE(e.message.find(word), std::string::npos)
            << "the message should name `" << word << "`; got " << got.describe();
    }
}

void check(const Outcome& got, const Step& step) {
    const Expect expect = step.expect.value_or(Expect{});
    if (got.status() != expect.status) {
        ADD_FAILURE() << "status " << got.status() << ", expected " << expect.status
                      << "\n  got: " << got.describe().substr(0, 2000);
        return;
    }
    if (got.answer) {
        check_answer(got, expect);
    } else {
        check_error(got, expect);
    }
}

// ---- one case

// The steps a case runs, in order: its fixture's, the case it runs after (recursively), its own.
struct Plan {
    std::vector<const Step*> steps;
    std::optional<std::string> now;
};

bool plan_case(const GoldenFile& file, const Case& c, Plan& plan, int depth = 0) {
    if (depth > kCasesExpected) return false;
    std::vector<const Step*> own;
    for (const Step& s : c.steps) own.push_back(&s);
    if (c.after) {
        const Case* before = file.find(*c.after);
        if (!before || !plan_case(file, *before, plan, depth + 1)) return false;
    } else {
        const std::string fixture = c.fixture.value_or("none");
        if (fixture != "none") {
            auto it = file.fixtures.find(fixture);
            if (it == file.fixtures.end()) return false;
            for (const Step& s : it->second) plan.steps.push_back(&s);
        }
    }
    if (c.now) plan.now = c.now;
    plan.steps.insert(plan.steps.end(), own.begin(), own.end());
    return true;
}

class GoldenCase : public testing::TestWithParam<CaseRef> {};

TEST_P(GoldenCase, Run) {
    const Case& c = *GetParam().c;
    const GoldenFile& file = *GetParam().file;
    SCOPED_TRACE(file.path + ":" + std::to_string(c.line) + ": case #" + std::to_string(c.number));
    const char* run_pending = std::getenv("FENEC_GOLDEN_RUN_PENDING");
    if (!c.pending.empty() && !(run_pending && std::string(run_pending) == "1")) {
        GTEST_SKIP() << "pending: " << c.pending;
    }
    Plan plan;
    ASSERT_TRUE(plan_case(file, c, plan)) << "unknown fixture or `after:` case";
    int64_t now_ms = 0;
    test::EngineEnv env;
    if (plan.now) {
        std::optional<int64_t> ms = json::parse_timestamp(*plan.now);
        ASSERT_TRUE(ms) << "now: is not a timestamp: " << *plan.now;
        now_ms = *ms;
        env.clock.set_wall_ms(now_ms);
    }
    index::IndexSet indexes;
    engine::OpenOptions options = env.options();
    options.hook = &indexes;
    engine::Result<std::unique_ptr<engine::Database>> db =
        engine::Database::create("/golden/acme.fenec", options);
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    Executor executor(**db, indexes);
    const char* verbose = std::getenv("FENEC_GOLDEN_VERBOSE");
    for (const Step* step : plan.steps) {
        SCOPED_TRACE(file.path + ":" + std::to_string(step->line) + ": " +
                     expand(step->query).substr(0, 200));
        const Outcome got = run_step(executor, *step, now_ms);
        if (verbose && std::string(verbose) == "1") {
            std::cout << "  " << expand(step->query).substr(0, 120) << "\n    -> "
                      << got.describe().substr(0, 400) << "\n";
        }
        check(got, *step);
    }
}

std::string case_name(const testing::TestParamInfo<CaseRef>& info) {
    std::string digits = std::to_string(info.param.c->number);
    while (digits.size() < 3) digits.insert(digits.begin(), '0');
    return "case_" + digits;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenCase, testing::ValuesIn(case_refs(spec_file())), case_name);
INSTANTIATE_TEST_SUITE_P(GoldenExtra, GoldenCase, testing::ValuesIn(case_refs(extra_file())),
                         case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenCase);

// Every case of `file` has something to run or a reason to wait, every step says what it
// expects, and fixtures and `after:` cases exist. Answers the count of each case number and of
// the pending cases by reason.
void check_shape(const GoldenFile& file, std::map<int, int>& seen,
                 std::map<std::string, int>& pending) {
    for (const std::string& e : file.errors) ADD_FAILURE() << e;
    for (const Case& c : file.cases) {
        SCOPED_TRACE(file.path + ": case #" + std::to_string(c.number));
        ++seen[c.number];
        if (!c.pending.empty()) ++pending[c.pending];
        Plan plan;
        EXPECT_TRUE(plan_case(file, c, plan)) << "unknown fixture or `after:` case";
        if (c.pending.empty()) {
            EXPECT_FALSE(c.steps.empty()) << "a case runs at least one step";
        }
        for (const Step& s : c.steps) EXPECT_TRUE(s.expect) << "line " << s.line << ": no expect:";
        if (c.after) {
            EXPECT_LT(*c.after, c.number) << "`after:` names an earlier case";
        }
    }
}

void print_summary(const GoldenFile& file, const std::map<std::string, int>& pending) {
    size_t pending_total = 0;
    std::string reasons;
    for (const auto& [reason, n] : pending) {
        pending_total += n;
        reasons += " " + std::to_string(n) + " " + reason + ";";
    }
    std::cout << "[ golden   ] " << file.path << ": " << file.cases.size() << " cases, "
              << file.cases.size() - pending_total << " run, " << pending_total << " pending"
              << (reasons.empty() ? "" : ":") << reasons << "\n";
}

// The spec's file transcribes every example of §16 exactly once.
TEST(GoldenFile, CoversEveryExample) {
    const GoldenFile& file = spec_file();
    std::map<int, int> seen;
    std::map<std::string, int> pending;
    check_shape(file, seen, pending);
    for (int n = 1; n <= kCasesExpected; ++n) EXPECT_EQ(seen[n], 1) << "case #" << n;
    EXPECT_EQ(seen.size(), size_t(kCasesExpected)) << "cases numbered outside 1 to 160";
    print_summary(file, pending);
}

// The extra file's cases are numbered apart from §16's (1001 and up), each once.
TEST(GoldenFile, ExtraCasesAreWellFormed) {
    const GoldenFile& file = extra_file();
    std::map<int, int> seen;
    std::map<std::string, int> pending;
    check_shape(file, seen, pending);
    EXPECT_FALSE(file.cases.empty());
    for (const auto& [n, count] : seen) {
        EXPECT_GT(n, 1000) << "case #" << n;
        EXPECT_EQ(count, 1) << "case #" << n;
    }
    print_summary(file, pending);
}

// The harness's own parts, so a case cannot pass by a lenient comparison: the JSON reader keeps
// ints and floats apart, `~TOL` is relative and keeps kinds, keys and order exact, and `{{N*T}}`
// expands exactly.
TEST(GoldenHarness, ReadsJsonAsParams) {
    std::optional<engine::Value> v =
        test::parse_json(R"([1, 1.0, -2e3, "a\u00e7\ud83d\ude00", [true, null], {"k": false}])");
    ASSERT_TRUE(v);
    const auto& items = std::get<engine::List>(v->rep).items;
    ASSERT_EQ(items.size(), 6u);
    EXPECT_EQ(items[0], engine::Value(int64_t{1}));
    EXPECT_EQ(items[1], engine::Value(1.0));
    EXPECT_EQ(items[2], engine::Value(-2000.0));
    EXPECT_EQ(items[3], engine::Value(std::string("a\xC3\xA7\xF0\x9F\x98\x80")));
    EXPECT_EQ(items[4], engine::Value(engine::List{{engine::Value(true), engine::Value()}}));
    EXPECT_EQ(items[5], engine::Value(engine::Object{{"k"}, {engine::Value(false)}}));
    for (const char* bad :
         {"", "[1,]", "01", "9223372036854775808", "\"\\x\"", "{\"a\" 1}", "1 2"}) {
        std::string error;
        EXPECT_FALSE(test::parse_json(bad, &error)) << bad;
        EXPECT_FALSE(error.empty()) << bad;
    }
}

TEST(GoldenHarness, ComparesScoresApproximately) {
    auto diff = [](const char* actual, const char* expected, double tolerance) {
        return approx_diff(*test::parse_json(actual), *test::parse_json(expected), tolerance, "$");
    };
    EXPECT_EQ(
        diff(R"({"_id":4,"_score":0.66201957102})", R"({"_id":4,"_score":0.662019571})", 1e-8), "");
    EXPECT_NE(diff(R"({"_id":4,"_score":0.6620196})", R"({"_id":4,"_score":0.662019571})", 1e-8),
              "");
    EXPECT_EQ(diff(R"([{"s":1e-7}])", R"([{"s":0.0}])", 1e-6), "");     // absolute at 0
    EXPECT_NE(diff(R"([{"s":1}])", R"([{"s":1.0}])", 1e-6), "");        // an int is not a float
    EXPECT_NE(diff(R"({"b":1,"a":2})", R"({"a":2,"b":1})", 1e-6), "");  // key order counts
    EXPECT_NE(diff(R"([1,2])", R"([1])", 1e-6), "");
    EXPECT_NE(diff(R"(["a"])", R"(["b"])", 1e-6), "");
}

TEST(GoldenHarness, ExpandsRepeats) {
    EXPECT_EQ(expand("get t{{3* x}} y"), "get t x x x y");
    EXPECT_EQ(expand("{{2*(}}true{{2*)}}"), "((true))");
    EXPECT_EQ(expand("no macro {{"), "no macro {{");
    EXPECT_EQ(expand("{{1048576*a}}").size(), size_t{1} << 20);
}

}  // namespace
}  // namespace fenec::ql::golden_test
