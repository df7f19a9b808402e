// test/engine/vector_value_test.cc: proves DocView::vector_dim and DocView::vector_into
// (engine/value.h), which a graph's restore reads every vector through without building a Value:
// a float32 vector's components bit for bit, a binary16 one widened exactly as get() widens it,
// and anything that is not a vector (null, another type) of dimension 0.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/schema.h"
#include "engine/value.h"

namespace fenec::engine::vector_value_test {
namespace {

Schema three_fields() {
    Schema s;
    FieldDesc a;
    a.name = "a";
    a.type = make_vector(3);
    FieldDesc b;
    b.name = "b";
    b.type = make_vector(4, VectorElem::f16);
    FieldDesc c;
    c.name = "c";
    c.type.base = BaseType::Int;
    s.fields = {a, b, c};
    return s;
}

TEST(VectorValue, ReadsFloat32AndBinary16VectorsWithoutAValue) {
    const std::vector<float> a = {1.5f, -0.0f, 3.4028235e38f};
    const std::vector<uint16_t> b = {f32_to_f16(0.25f), f32_to_f16(-2.0f), f32_to_f16(65504.0f),
                                     f32_to_f16(1e-7f)};
    Doc doc{{0, Value(VectorF32{a})}, {1, Value(VectorF16{b})}, {2, Value(int64_t{7})}};
    std::vector<std::byte> body;
    ASSERT_TRUE(encode_doc("v", three_fields(), doc, body).is_ok());
    const DocView view(body);

    ASSERT_EQ(DocView::vector_dim(view.raw(0)), 3u);
    std::vector<float> got(3);
    DocView::vector_into(view.raw(0), got.data());
    EXPECT_EQ(std::memcmp(got.data(), a.data(), sizeof(float) * 3), 0) << "bit for bit";

    ASSERT_EQ(DocView::vector_dim(view.raw(1)), 4u);
    got.assign(4, 0);
    DocView::vector_into(view.raw(1), got.data());
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], f16_to_f32(b[i])) << i;

    EXPECT_EQ(DocView::vector_dim(view.raw(2)), 0u) << "an int is no vector";
    EXPECT_EQ(DocView::vector_dim(view.raw(3)), 0u) << "past the last slot: null";
    EXPECT_EQ(DocView::vector_dim({}), 0u);
}

}  // namespace
}  // namespace fenec::engine::vector_value_test
