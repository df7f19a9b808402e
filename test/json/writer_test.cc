// test/json/writer_test.cc: proves the one JSON writer: commas placed by the writer at every
// nesting; RFC 8259 escapes, UTF-8 passed through and ill-formed bytes written as U+FFFD; floats
// always showing `.` or an exponent (25.0, 0.1, 1e+21, -0.0) and reading back as the same double,
// float32 components as the shortest float text; ints over all 64 bits; a non-finite float never
// written as invalid JSON. The JSON form of engine values is test/ql/value_json_test.cc's.
#include "json/writer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

namespace fenec::json::writer_test {
namespace {

template <class F>
std::string written(F&& write) {
    std::string out;
    Writer w(out);
    write(w);
    EXPECT_EQ(w.depth(), 0u);
    return out;
}

std::string str(std::string_view s) {
    return written([&](Writer& w) { w.string(s); });
}
std::string f64(double d) {
    return written([&](Writer& w) { w.float64(d); });
}
std::string f32(float f) {
    return written([&](Writer& w) { w.float32(f); });
}

TEST(JsonWriterTest, CommasAtEveryNesting) {
    const std::string out = written([](Writer& w) {
        w.begin_object();
        w.key("rows");
        w.begin_array();
        for (int i = 1; i <= 2; ++i) {
            w.begin_object();
            w.key("_id");
            w.int64(i);
            w.key("tags");
            w.begin_array();
            w.string("a");
            w.begin_array();
            w.end_array();
            w.begin_object();
            w.end_object();
            w.null();
            w.end_array();
            w.key("raw");
            w.raw(R"({"x":1})");
            w.key("ok");
            w.boolean(i == 1);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    });
    EXPECT_EQ(out, R"({"rows":[{"_id":1,"tags":["a",[],{},null],"raw":{"x":1},"ok":true},)"
                   R"({"_id":2,"tags":["a",[],{},null],"raw":{"x":1},"ok":false}]})");
}

TEST(JsonWriterTest, AppendsToWhatIsThere) {
    std::string out = "prefix:";
    Writer w(out);
    w.int64(7);
    EXPECT_EQ(out, "prefix:7");
}

TEST(JsonWriterTest, StringEscapes) {
    EXPECT_EQ(str("plain"), R"("plain")");
    EXPECT_EQ(str("\" \\ / \b \f \n \r \t"), R"("\" \\ / \b \f \n \r \t")");
    EXPECT_EQ(str(std::string("\0\x01\x1f\x7f", 4)), R"("\u0000\u0001\u001f)"
                                                     "\x7f\"");
    EXPECT_EQ(str("ılık İpek 😀 €"), "\"ılık İpek 😀 €\"");  // UTF-8 as is
    const std::string key = written([](Writer& w) {
        w.begin_object();
        w.key("a\"b\n");
        w.int64(1);
        w.end_object();
    });
    EXPECT_EQ(key, R"({"a\"b\n":1})");
}

TEST(JsonWriterTest, IllFormedUtf8BecomesReplacementCharacter) {
    const std::string fffd = "\xEF\xBF\xBD";
    EXPECT_EQ(str("a\xff"
                  "b"),
              "\"a" + fffd + "b\"");
    EXPECT_EQ(str("\xc3"), "\"" + fffd + "\"");                                   // truncated
    EXPECT_EQ(str("\xc0\xaf"), "\"" + fffd + fffd + "\"");                        // overlong
    EXPECT_EQ(str("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");             // surrogate
    EXPECT_EQ(str("\xf4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");  // > U+10FFFF
    EXPECT_EQ(str("\xe2\x82"), "\"" + fffd + fffd + "\"");
    EXPECT_EQ(str("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");  // the largest form is fine
}

TEST(JsonWriterTest, Integers) {
    EXPECT_EQ(written([](Writer& w) { w.int64(std::numeric_limits<int64_t>::min()); }),
              "-9223372036854775808");
    EXPECT_EQ(written([](Writer& w) { w.int64(std::numeric_limits<int64_t>::max()); }),
              "9223372036854775807");
    EXPECT_EQ(written([](Writer& w) { w.int64(0); }), "0");
    EXPECT_EQ(written([](Writer& w) { w.uint64(std::numeric_limits<uint64_t>::max()); }),
              "18446744073709551615");
}

TEST(JsonWriterTest, FloatsAlwaysLookLikeFloats) {
    EXPECT_EQ(f64(25.0), "25.0");
    EXPECT_EQ(f64(0.1), "0.1");
    EXPECT_EQ(f64(1e21), "1e+21");
    EXPECT_EQ(f64(-0.0), "-0.0");
    EXPECT_EQ(f64(0.0), "0.0");
    EXPECT_EQ(f64(-2.5), "-2.5");
    EXPECT_EQ(f64(1e-7), "1e-07");
    EXPECT_EQ(f64(123456789012.0), "123456789012.0");
    EXPECT_EQ(f64(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
    EXPECT_EQ(f64(5e-324), "5e-324");
}

TEST(JsonWriterTest, FloatsReadBackExactly) {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 100'000; ++i) {
        const double d = std::bit_cast<double>(rng());
        if (!std::isfinite(d)) continue;
        const std::string text = f64(d);
        ASSERT_EQ(std::strtod(text.c_str(), nullptr), d) << text;
        ASSERT_NE(text.find_first_of(".e"), std::string::npos) << text;
    }
}

TEST(JsonWriterTest, Float32Components) {
    EXPECT_EQ(f32(0.1f), "0.1");
    EXPECT_EQ(f32(1.0f), "1.0");
    EXPECT_EQ(f32(-0.0f), "-0.0");
    EXPECT_EQ(f32(3.4028235e38f), "3.4028235e+38");
    EXPECT_EQ(f32(1e-45f), "1e-45");
    std::mt19937 rng(6);
    for (int i = 0; i < 100'000; ++i) {
        const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
        if (!std::isfinite(f)) continue;
        const std::string text = f32(f);
        ASSERT_EQ(std::strtof(text.c_str(), nullptr), f) << text;
    }
}

TEST(JsonWriterTest, NonFiniteIsAProgrammerError) {
    std::string out;
    Writer w(out);
    w.begin_array();
    EXPECT_DEBUG_DEATH(w.float64(std::nan("")), "non-finite");
    EXPECT_DEBUG_DEATH(w.float32(std::numeric_limits<float>::infinity()), "non-finite");
    w.end_array();
#ifdef NDEBUG
    EXPECT_EQ(out, "[null,null]");  // never invalid JSON
#endif
}

}  // namespace
}  // namespace fenec::json::writer_test
