// test/server/node/feed_decode_test.cc: proves the follower's readers of the replication feed
// (server/node/replication.h, node-http.md §10.2) without a socket: a `B` payload decodes to the
// block entry a primary encoded (records byte for byte, seqs first..first+count-1); a `B` of
// count 0, one shorter than its head, or one whose seqs pass the last are refused naming why; an
// `F` payload decodes to its forks or is refused; `C` pieces join to the `B` that ends them, and
// a join past its bound or ended by another kind is refused; a hello, an image end and a
// keep-alive are read for their members, and one missing a required member, of another type, or
// naming a history or digest that is not 16 hex digits is refused naming why.
#include <gtest/gtest.h>

#include "server/node/replication.h"

namespace fenec::node::feed_decode_test {
namespace {

std::string block_payload(uint64_t first, uint32_t count, int64_t landed_ms, std::string records) {
    std::string p;
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<char>(first >> (8 * i)));
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<char>(count >> (8 * i)));
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<char>(uint64_t(landed_ms) >> (8 * i)));
    return p + records;
}

TEST(FeedDecode, BlockPayloadIsTheEntryItCarries) {
    auto e = decode_block(block_payload(7, 3, 1717000000000, "recs"));
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    EXPECT_EQ(e->type, engine::FeedEntry::Type::block);
    EXPECT_EQ(e->first.v, 7u);
    EXPECT_EQ(e->last.v, 9u);
    EXPECT_EQ(e->landed_ms, 1717000000000);
    ASSERT_TRUE(e->records);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(e->records->data()), e->records->size()),
              "recs");
}

TEST(FeedDecode, BlockOfCountZeroOrShortOrPastTheLastSeqIsRefused) {
    // count 0 made `last` first - 1 before: the engine refused it only as "its seqs differ".
    auto zero = decode_block(block_payload(1, 0, 0, "recs"));
    ASSERT_FALSE(zero.is_ok());
    EXPECT_EQ(zero.status().code(), engine::Code::invalid_argument);
    EXPECT_NE(zero.status().message().find("count 0"), std::string_view::npos)
        << zero.status().to_string();
    auto short_head = decode_block(std::string(19, '\0'));
    ASSERT_FALSE(short_head.is_ok());
    EXPECT_NE(short_head.status().message().find("shorter than its 20-byte head"),
              std::string_view::npos);
    auto past = decode_block(block_payload(UINT64_MAX, 2, 0, "recs"));
    ASSERT_FALSE(past.is_ok());
    EXPECT_NE(past.status().message().find("out of range"), std::string_view::npos);
    EXPECT_FALSE(decode_block(block_payload(0, 1, 0, "recs")).is_ok());
    EXPECT_TRUE(decode_block(block_payload(UINT64_MAX, 1, 0, "")).is_ok());
}

TEST(FeedDecode, ForksPayload) {
    auto e = decode_forks(
        R"({"forks":[{"history":"00f33d5eed000001","at":0},{"history":"0123456789abcdef","at":5}]})");
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    EXPECT_EQ(e->type, engine::FeedEntry::Type::forks);
    ASSERT_EQ(e->forks.size(), 2u);
    EXPECT_EQ(e->forks[1].first.v, 0x0123456789abcdefu);
    EXPECT_EQ(e->forks[1].second.v, 5u);
    for (const char* bad : {"", "[]", R"({"forks":{}})", R"({"forks":[{"history":"XY","at":0}]})",
                            R"({"forks":[{"history":"0123456789abcdef"}]})"}) {
        auto r = decode_forks(bad);
        ASSERT_FALSE(r.is_ok()) << bad;
        EXPECT_EQ(r.status().code(), engine::Code::invalid_argument);
        EXPECT_FALSE(r.status().message().empty());
    }
}

TEST(FeedDecode, ContinuationPiecesJoinToTheirBlock) {
    const std::string payload = block_payload(1, 1, 0, std::string(1000, 'r'));
    std::vector<std::string> frames = encode_block_frames(payload, 300);
    ASSERT_EQ(frames.size(), 4u);
    FrameJoiner joiner;
    std::string joined, error;
    std::string_view buf;
    std::string all;
    for (const std::string& f : frames) all += f;
    buf = all;
    int held = 0;
    while (!buf.empty()) {
        Frame f;
        size_t used = 0;
        ASSERT_EQ(decode_frame(buf, f, used, error, 300), FrameRead::frame) << error;
        buf.remove_prefix(used);
        const FrameJoiner::Step step = joiner.take(f, error);
        if (step == FrameJoiner::Step::held) {
            ++held;
            continue;
        }
        ASSERT_EQ(step, FrameJoiner::Step::whole) << error;
        EXPECT_EQ(f.kind, 'B');
        joined = f.payload;
    }
    EXPECT_EQ(held, 3);
    EXPECT_EQ(joined, payload);
    EXPECT_EQ(joiner.held_bytes(), 0u);

    // Pieces ended by a frame other than `B`, and a join past its bound, are refused.
    FrameJoiner other;
    Frame c{'C', "piece"}, k{'K', "{}"};
    EXPECT_EQ(other.take(c, error), FrameJoiner::Step::held);
    EXPECT_EQ(other.take(k, error), FrameJoiner::Step::bad);
    EXPECT_EQ(error, "a continued block ended by `K`");
    FrameJoiner small(8);
    Frame big{'C', "123456789"};
    EXPECT_EQ(small.take(big, error), FrameJoiner::Step::bad);
    EXPECT_EQ(error, "a block over 8 bytes");
}

TEST(FeedDecode, HelloImageEndAndKeepAliveAreReadForTheirMembers) {
    std::string error;
    auto h = replication::parse_hello(
        R"({"node":"n1","history":"00f33d5eed000001","seq":5,"durable":5,"image":true})", error);
    ASSERT_TRUE(h) << error;
    EXPECT_EQ(h->seq, 5u);
    EXPECT_TRUE(h->image);
    EXPECT_EQ(h->history.value_or(""), "00f33d5eed000001");
    // The router's directory feed names its history too; one naming none is read all the same.
    auto bare = replication::parse_hello(R"({"seq":0,"image":false})", error);
    ASSERT_TRUE(bare) << error;
    EXPECT_FALSE(bare->history);

    auto end = replication::parse_image_end(
        R"({"seq":9,"history":"00f33d5eed000001","bytes":4096,"digest":"0123456789abcdef"})",
        error);
    ASSERT_TRUE(end) << error;
    EXPECT_EQ(end->seq, 9u);
    EXPECT_EQ(end->bytes.value_or(0), 4096u);
    EXPECT_EQ(end->digest.value_or(""), "0123456789abcdef");

    EXPECT_EQ(replication::parse_keepalive(R"({"seq":12,"durable":12})").value_or(0), 12u);
    EXPECT_FALSE(replication::parse_keepalive(R"({"durable":12})"));
    EXPECT_FALSE(replication::parse_keepalive("not json"));
}

TEST(FeedDecode, AHelloOrAnImageEndNotOfItsShapeIsRefusedNamingWhy) {
    const std::pair<std::string, std::string> hellos[] = {
        {"not json", "not a JSON object"},
        {"[1,2]", "not a JSON object"},
        {R"({"image":false})", "without seq or image"},
        {R"({"seq":1})", "without seq or image"},
        {R"({"seq":"1","image":false})", "without seq or image"},
        {R"({"seq":1,"image":false,"history":"xyz"})", "history is not 16 hex"},
        {R"({"seq":1,"image":false,"history":7})", "history is not 16 hex"},
    };
    for (const auto& [payload, why] : hellos) {
        std::string error;
        EXPECT_FALSE(replication::parse_hello(payload, error)) << payload;
        EXPECT_NE(error.find(why), std::string::npos) << payload << ": " << error;
    }
    const std::pair<std::string, std::string> ends[] = {
        {"{", "not a JSON object"},
        {R"({"bytes":1,"digest":"0123456789abcdef"})", "without its seq"},
        {R"({"seq":1,"bytes":-1})", "bytes is not a count"},
        {R"({"seq":1,"digest":"0123456789abcdeg"})", "digest is not 16 hex"},
    };
    for (const auto& [payload, why] : ends) {
        std::string error;
        EXPECT_FALSE(replication::parse_image_end(payload, error)) << payload;
        EXPECT_NE(error.find(why), std::string::npos) << payload << ": " << error;
    }
}

}  // namespace
}  // namespace fenec::node::feed_decode_test
