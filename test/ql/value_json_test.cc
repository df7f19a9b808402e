// test/ql/value_json_test.cc: proves §12.2's JSON form of engine values (ql/value_json.h): a value
// of every kind, ISO text for timestamps, base64 for bytes, float32 for vectors, object members in
// key byte order however they came; base64 round trips and its strict refusals.
#include "ql/value_json.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace fenec::ql::value_json_test {
namespace {

std::string value(const engine::Value& v) {
    std::string out;
    json::Writer w(out);
    write_value(w, v);
    EXPECT_EQ(w.depth(), 0u);
    return out;
}

engine::Object object(std::vector<std::string> keys, std::vector<engine::Value> values) {
    return engine::Object{std::move(keys), std::move(values)};
}

TEST(ValueJson, ValuesOfEveryKind) {
    EXPECT_EQ(value(engine::Null{}), "null");
    EXPECT_EQ(value(true), "true");
    EXPECT_EQ(value(int64_t{-3}), "-3");
    EXPECT_EQ(value(3.0), "3.0");
    EXPECT_EQ(value("hé\n"), "\"hé\\n\"");
    EXPECT_EQ(value(engine::Timestamp{1767225599999}), R"("2025-12-31T23:59:59.999Z")");
    EXPECT_EQ(value(engine::Timestamp{0}), R"("1970-01-01T00:00:00Z")");
    EXPECT_EQ(value(engine::Bytes{std::string("\x00\xff\x10", 3)}), R"("AP8Q")");
    EXPECT_EQ(value(engine::VectorF32{{0.1f, 1.0f, -2.5f}}), "[0.1,1.0,-2.5]");
    EXPECT_EQ(value(engine::VectorF16{{engine::f32_to_f16(0.5f), engine::f32_to_f16(-2.0f)}}),
              "[0.5,-2.0]");
    EXPECT_EQ(value(engine::List{}), "[]");
    EXPECT_EQ(value(engine::Object{}), "{}");
}

TEST(ValueJson, NestedValueWithUnsortedKeys) {
    const engine::Value inner = object({"z", "a"}, {engine::List{{1, 2.5}}, engine::Null{}});
    const engine::Value v =
        object({"lang", "b", "nested", "A"},
               {"tr", engine::List{{true, "x", engine::List{}}}, inner, engine::Bytes{"hi"}});
    EXPECT_EQ(value(v), R"({"A":"aGk=","b":[true,"x",[]],"lang":"tr",)"
                        R"("nested":{"a":null,"z":[1,2.5]}})");
}

TEST(ValueJson, Base64RoundTrips) {
    EXPECT_EQ(base64_encode(""), "");
    EXPECT_EQ(base64_encode("f"), "Zg==");
    EXPECT_EQ(base64_encode("fo"), "Zm8=");
    EXPECT_EQ(base64_encode("foo"), "Zm9v");
    EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
    EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
    std::mt19937 rng(8);
    for (int i = 0; i < 2000; ++i) {
        std::string bytes(static_cast<size_t>(i % 67), '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        const std::string text = base64_encode(bytes);
        ASSERT_EQ(text.size() % 4, 0u);
        ASSERT_EQ(base64_decode(text), bytes) << text;
    }
}

TEST(ValueJson, Base64RefusesAllButTheCanonicalText) {
    for (const char* bad : {"Z", "Zg", "Zg=", "Zm9", "Zg==Zg==", "Z===", "====", "Zh==", "Zm9=",
                            "Zm8", "Zm9v\n", " Zm9v", "Zm-v", "Zm_v", "Zm9v=", "Zg=A", "=Zg="}) {
        EXPECT_EQ(base64_decode(bad), std::nullopt) << bad;
    }
    EXPECT_EQ(base64_decode(""), std::string());
    EXPECT_EQ(base64_decode("Zg=="), "f");
    EXPECT_EQ(base64_decode("Zm8="), "fo");
}

}  // namespace
}  // namespace fenec::ql::value_json_test
