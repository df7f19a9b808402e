// server/replication/frames.cc: the feed's frames (frames.h): the encoders both ends' streams
// use and the decoders their followers read outside bytes with.
#include "server/replication/frames.h"

#include <simdjson.h>

#include <cstring>
#include <limits>
#include <optional>

#include "engine/format.h"
#include "engine/hash.h"
#include "json/writer.h"

namespace fenec::replication {

namespace {

uint64_t frame_check(char kind, std::string_view payload) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &kind, 1);
    XXH3_64bits_update(&st, payload.data(), payload.size());
    return XXH3_64bits_digest(&st);
}

void put_le(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
    return v;
}

}  // namespace

std::string forks_json(const std::vector<std::pair<engine::HistoryId, engine::Seq>>& forks) {
    std::string out;
    json::Writer w(out);
    w.begin_array();
    for (const auto& [h, s] : forks) {
        w.begin_object();
        w.key("history");
        w.string(engine::format::hex16(h.v));
        w.key("at");
        w.uint64(s.v);
        w.end_object();
    }
    w.end_array();
    return out;
}

uint64_t image_digest(std::string_view image) { return XXH3_64bits(image.data(), image.size()); }

std::string encode_forks(const std::vector<std::pair<engine::HistoryId, engine::Seq>>& forks) {
    return "{\"forks\":" + forks_json(forks) + "}";
}

std::string encode_block(const engine::FeedEntry& e) {
    std::string payload;
    payload.reserve(feed_block_head_bytes + e.records->size());
    put_le(payload, e.first.v, 8);
    put_le(payload, e.last.v - e.first.v + 1, 4);
    put_le(payload, static_cast<uint64_t>(e.landed_ms), 8);
    payload.append(reinterpret_cast<const char*>(e.records->data()), e.records->size());
    return payload;
}

std::string encode_frame(char kind, std::string_view payload) {
    std::string out;
    out.reserve(feed_frame_head_bytes + payload.size() + feed_frame_tail_bytes);
    out.push_back(kind);
    put_le(out, payload.size(), 4);
    out.append(payload);
    put_le(out, frame_check(kind, payload), 8);
    return out;
}

std::vector<std::string> encode_block_frames(std::string_view payload, uint32_t bound) {
    std::vector<std::string> out;
    while (payload.size() > bound) {
        out.push_back(encode_frame('C', payload.substr(0, bound)));
        payload.remove_prefix(bound);
    }
    out.push_back(encode_frame('B', payload));
    return out;
}

FrameRead decode_frame(std::string_view buf, Frame& out, size_t& consumed, std::string& error,
                       uint32_t bound) {
    if (buf.size() < feed_frame_head_bytes) return FrameRead::more;
    const uint32_t length = static_cast<uint32_t>(get_le(buf.data() + 1, 4));
    if (length > bound) {
        error = "a frame of " + std::to_string(length) + " bytes is over the bound";
        return FrameRead::bad;
    }
    const size_t total = feed_frame_head_bytes + length + feed_frame_tail_bytes;
    if (buf.size() < total) return FrameRead::more;
    const std::string_view payload = buf.substr(feed_frame_head_bytes, length);
    if (get_le(buf.data() + feed_frame_head_bytes + length, 8) != frame_check(buf[0], payload)) {
        error = std::string("frame `") + buf[0] + "` fails its check";
        return FrameRead::bad;
    }
    out.kind = buf[0];
    out.payload.assign(payload);
    consumed = total;
    return FrameRead::frame;
}

engine::Result<engine::FeedEntry> decode_block(std::string_view payload) {
    auto refused = [](std::string why) {
        return engine::Status::error(engine::Code::invalid_argument, "a `B` frame " + why);
    };
    if (payload.size() < feed_block_head_bytes) {
        return refused("of " + std::to_string(payload.size()) + " bytes, shorter than its " +
                       std::to_string(feed_block_head_bytes) + "-byte head");
    }
    const uint64_t first = get_le(payload.data(), 8);
    const uint64_t count = get_le(payload.data() + 8, 4);
    if (count == 0) return refused("of count 0: a block holds at least one seq");
    if (first == 0 || first - 1 > std::numeric_limits<uint64_t>::max() - count) {
        return refused("whose seqs " + std::to_string(first) + " + " + std::to_string(count) +
                       " are out of range");
    }
    engine::FeedEntry e;
    e.type = engine::FeedEntry::Type::block;
    e.first = engine::Seq{first};
    e.last = engine::Seq{first + count - 1};
    e.landed_ms = static_cast<int64_t>(get_le(payload.data() + 12, 8));
    const std::string_view records = payload.substr(feed_block_head_bytes);
    auto bytes = std::make_shared<std::vector<std::byte>>(records.size());
    if (!records.empty()) std::memcpy(bytes->data(), records.data(), records.size());
    e.records = std::move(bytes);
    return e;
}

engine::Result<engine::FeedEntry> decode_forks(std::string_view payload) {
    auto refused = [](const char* why) {
        return engine::Status::error(engine::Code::invalid_argument, why);
    };
    simdjson::dom::parser parser;
    simdjson::padded_string padded(payload);
    simdjson::dom::element doc;
    simdjson::dom::array arr;
    if (parser.parse(padded).get(doc) || doc["forks"].get(arr)) {
        return refused("an `F` frame that is not {\"forks\":[…]}");
    }
    engine::FeedEntry e;
    e.type = engine::FeedEntry::Type::forks;
    for (simdjson::dom::element fk : arr) {
        std::string_view h;
        uint64_t at = 0;
        std::optional<uint64_t> history;
        if (fk["history"].get(h) || fk["at"].get(at) ||
            !(history = engine::format::parse_hex16(h))) {
            return refused("a fork that does not parse");
        }
        e.forks.emplace_back(engine::HistoryId{*history}, engine::Seq{at});
    }
    return e;
}

namespace {

// A hex member `key` of `doc`: absent is nullopt and fine; present, it must be 16 hex digits.
bool hex16_member(simdjson::dom::element doc, std::string_view key,
                  std::optional<std::string>& out) {
    simdjson::dom::element v;
    if (doc[key].get(v)) return true;  // absent
    std::string_view s;
    if (v.get(s) || s.size() != 16 || !engine::format::parse_hex16(s)) return false;
    out = std::string(s);
    return true;
}

}  // namespace

std::optional<Hello> parse_hello(std::string_view payload, std::string& error) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(payload);
    simdjson::dom::element doc;
    Hello h;
    if (parser.parse(padded).get(doc) || !doc.is_object()) {
        error = "a hello that is not a JSON object";
        return std::nullopt;
    }
    if (doc["seq"].get(h.seq) || doc["image"].get(h.image)) {
        error = "a hello without seq or image";
        return std::nullopt;
    }
    if (!hex16_member(doc, "history", h.history)) {
        error = "a hello whose history is not 16 hex digits";
        return std::nullopt;
    }
    return h;
}

std::optional<ImageEnd> parse_image_end(std::string_view payload, std::string& error) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(payload);
    simdjson::dom::element doc;
    ImageEnd e;
    if (parser.parse(padded).get(doc) || !doc.is_object()) {
        error = "an image end that is not a JSON object";
        return std::nullopt;
    }
    if (doc["seq"].get(e.seq)) {
        error = "an image end without its seq";
        return std::nullopt;
    }
    simdjson::dom::element bytes;
    if (!doc["bytes"].get(bytes)) {
        uint64_t n = 0;
        if (bytes.get(n)) {
            error = "an image end whose bytes is not a count";
            return std::nullopt;
        }
        e.bytes = n;
    }
    if (!hex16_member(doc, "digest", e.digest)) {
        error = "an image end whose digest is not 16 hex digits";
        return std::nullopt;
    }
    return e;
}

std::optional<uint64_t> parse_keepalive(std::string_view payload) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(payload);
    simdjson::dom::element doc;
    uint64_t seq = 0;
    if (parser.parse(padded).get(doc) || doc["seq"].get(seq)) return std::nullopt;
    return seq;
}

FrameJoiner::Step FrameJoiner::take(Frame& f, std::string& error) {
    if (f.kind == 'C') {
        if (continued_.size() + f.payload.size() > block_bytes_max_) {
            error = block_bytes_max_ % (1ull << 30) == 0
                        ? "a block over " + std::to_string(block_bytes_max_ >> 30) + " GiB"
                        : "a block over " + std::to_string(block_bytes_max_) + " bytes";
            return Step::bad;
        }
        continued_.append(f.payload);
        return Step::held;
    }
    if (continued_.empty()) return Step::whole;
    if (f.kind != 'B') {
        error = std::string("a continued block ended by `") + f.kind + "`";
        return Step::bad;
    }
    continued_.append(f.payload);
    f.payload = std::move(continued_);
    continued_.clear();
    return Step::whole;
}

}  // namespace fenec::replication
