// test/engine/file_format_golden_test.cc: docs/file-format.md's examples pin the tenant file
// (engine/format.h). The file is built byte for byte from the doc's hex dumps, read here from the
// doc itself, so a change to the format or to the doc that the other does not follow fails:
//   - the bytes are framed as the doc says (header fields, XXH3-64 checks, record heads, 8-byte
//     alignment, zero padding), checked with xxhash directly, not with engine/format.cc;
//   - the engine opens them and reads what the doc says they hold (lineage, created_ms, seq,
//     history, the collection and its row);
//   - the engine, given the same lineage, clock and writes, writes those same bytes: the header
//     and record heads are fixed by the format; the bodies by the FlatBuffers builder, and the doc
//     shows them as the engine writes them;
//   - the fresh file is fuzz/corpus/open_file/fresh.fenec, as the doc says.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/database.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::file_format_golden_test {
namespace {

using namespace engine;

constexpr const char* kPath = "/d/golden.fenec";
// What the doc's examples hold.
constexpr uint64_t kLineage = 0x068765767c3cf2f8;
constexpr int64_t kCreatedMs = 1'700'000'000'000;
constexpr int64_t kBlockAtMs = 1'700'000'001'000;

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// The bytes of the hex dump in the fenced block that follows the heading `### Example: <title>`
// of docs/file-format.md. Each line is `<offset>: <groups of 4 hex digits> <annotation>`, the
// offset counting from `first_offset`; the dump ends at the closing fence. Fails the test (and
// returns what it read so far) on a line out of that shape or an offset out of sequence.
std::vector<std::byte> doc_example(const std::string& title, uint64_t first_offset) {
    const std::string doc = read_text(FENEC_FILE_FORMAT_DOC);
    std::vector<std::byte> out;
    const size_t heading = doc.find("\n### Example: " + title);
    if (heading == std::string::npos) {
        ADD_FAILURE() << "no `### Example: " << title << "` in " << FENEC_FILE_FORMAT_DOC;
        return out;
    }
    const size_t open = doc.find("\n```\n", heading);
    const size_t close = doc.find("\n```\n", open + 1);
    if (open == std::string::npos || close == std::string::npos) {
        ADD_FAILURE() << "no hex dump under `### Example: " << title << "`";
        return out;
    }
    std::istringstream lines(doc.substr(open + 5, close - open - 4));
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty()) continue;
        const size_t colon = line.find(": ");
        if (colon != 8) {
            ADD_FAILURE() << "not a hex dump line: " << line;
            return out;
        }
        const uint64_t offset = std::stoull(line.substr(0, 8), nullptr, 16);
        if (offset != first_offset + out.size()) {
            ADD_FAILURE() << "offset " << line.substr(0, 8) << " where the bytes before end at "
                          << first_offset + out.size() << ": " << line;
            return out;
        }
        // Groups of 4 hex digits, one space apart; two spaces end them (the annotation follows).
        size_t at = colon + 2;
        while (at + 4 <= line.size() && std::isxdigit(static_cast<unsigned char>(line[at]))) {
            for (int i = 0; i < 4; i += 2) {
                out.push_back(std::byte(std::stoul(line.substr(at + i, 2), nullptr, 16)));
            }
            at += 4;
            if (at >= line.size() || line[at] != ' ' ||
                (at + 1 < line.size() && line[at + 1] == ' ')) {
                break;
            }
            ++at;
        }
    }
    return out;
}

// The whole example file: the fresh file, then its first block.
std::vector<std::byte> doc_file() {
    std::vector<std::byte> file = doc_example("a fresh file", 0);
    const std::vector<std::byte> block = doc_example("the first block", file.size());
    file.insert(file.end(), block.begin(), block.end());
    return file;
}

uint64_t le(const std::vector<std::byte>& b, size_t at, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(b[at + i]);
    return v;
}

uint64_t xxh3(const std::vector<std::byte>& b, size_t from, size_t bytes) {
    return XXH3_64bits(b.data() + from, bytes);
}

std::string hex_dump(const std::vector<std::byte>& b) {
    std::string out;
    char cell[32];
    for (size_t i = 0; i < b.size(); ++i) {
        if (i % 16 == 0) {
            std::snprintf(cell, sizeof cell, "%s%08zx:", i ? "\n" : "", i);
            out += cell;
        }
        std::snprintf(cell, sizeof cell, "%s%02x", i % 2 ? "" : " ", std::to_integer<int>(b[i]));
        out += cell;
    }
    return out;
}

TEST(FileFormatGolden, TheDocsBytesAreFramedAsTheDocSays) {
    const std::vector<std::byte> f = doc_file();
    ASSERT_EQ(f.size(), 136u + 368u) << hex_dump(f);
    // §1, the header.
    const uint8_t magic[8] = {0x89, 'F', 'E', 'N', 'E', 'C', '\r', '\n'};
    for (int i = 0; i < 8; ++i) EXPECT_EQ(std::to_integer<uint8_t>(f[i]), magic[i]) << i;
    EXPECT_EQ(le(f, 8, 4), 1u);    // format_version
    EXPECT_EQ(le(f, 12, 4), 64u);  // header_bytes
    EXPECT_EQ(le(f, 16, 8), kLineage);
    EXPECT_EQ(le(f, 24, 8), 0u);
    EXPECT_EQ(static_cast<int64_t>(le(f, 32, 8)), kCreatedMs);
    EXPECT_EQ(le(f, 40, 8), 0u);  // flags
    EXPECT_EQ(le(f, 48, 8), 0u);
    EXPECT_EQ(le(f, 56, 8), xxh3(f, 0, 56));  // header_check
    // §2, the records: a history, then a block, each 8-aligned, checked, zero-padded.
    const std::vector<uint8_t> kinds = {7, 4};
    size_t at = 64;
    for (const uint8_t kind : kinds) {
        SCOPED_TRACE("record at " + std::to_string(at));
        ASSERT_EQ(at % 8, 0u);
        ASSERT_LE(at + 16, f.size());
        const uint64_t length = le(f, at, 4);
        EXPECT_EQ(std::to_integer<uint8_t>(f[at + 12]), kind);
        std::vector<std::byte> head(f.begin() + at, f.begin() + at + 4);
        head.push_back(f[at + 12]);
        EXPECT_EQ(le(f, at + 13, 3), xxh3(head, 0, 5) & 0xffffff);  // head_check
        ASSERT_LE(at + 16 + length, f.size());
        std::vector<std::byte> kind_body(f.begin() + at + 16, f.begin() + at + 16 + length);
        kind_body.insert(kind_body.begin(), f[at + 12]);
        EXPECT_EQ(le(f, at + 4, 8), xxh3(kind_body, 0, kind_body.size()));  // checksum
        const size_t end = at + 16 + ((length + 7) & ~uint64_t{7});
        ASSERT_LE(end, f.size());
        for (size_t i = at + 16 + length; i < end; ++i) EXPECT_EQ(f[i], std::byte{0}) << i;
        at = end;
    }
    EXPECT_EQ(at, f.size());
}

TEST(FileFormatGolden, TheEngineReadsWhatTheDocSaysTheBytesHold) {
    const std::vector<std::byte> f = doc_file();
    EngineEnv env;
    env.fs.set_contents(kPath, f);
    auto db = Database::open(kPath, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ((*db)->lineage().v, kLineage);
    EXPECT_EQ((*db)->created_ms(), kCreatedMs);
    EXPECT_EQ((*db)->seq().v, 2u);  // the create and the put
    const History h = (*db)->history();
    ASSERT_EQ(h.forks.size(), 1u);
    EXPECT_EQ(h.forks[0].history.v, kLineage);
    EXPECT_EQ(h.forks[0].seq.v, 0u);
    EXPECT_FALSE(h.replica);
    ReadView view = (*db)->read();
    const std::vector<CollectionInfo> collections = view.collections();
    ASSERT_EQ(collections.size(), 1u);
    EXPECT_EQ(collections[0].name, "notes");
    EXPECT_EQ(collections[0].rows, 1u);
    EXPECT_EQ(collections[0].next_id, 2u);
    const Schema* schema = view.schema(collections[0].id);
    ASSERT_NE(schema, nullptr);
    ASSERT_EQ(schema->fields.size(), 1u);
    EXPECT_EQ(schema->fields[0].name, "title");
    EXPECT_EQ(schema->fields[0].type, make_type(BaseType::Text));
    auto row = view.get(collections[0].id, DocId{1});
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->decode(), (Doc{{0, Value("hello")}}));
    // Nothing was cut: the doc's file is whole.
    EXPECT_EQ(env.fs.contents(kPath).size(), f.size());
}

TEST(FileFormatGolden, TheEngineWritesTheDocsBytes) {
    const std::vector<std::byte> want = doc_file();
    EngineEnv env;
    env.clock.set_wall_ms(kCreatedMs);
    OpenOptions o = env.options();
    o.lineage = LineageId{kLineage};
    {
        auto db = Database::create(kPath, o);
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        env.clock.set_wall_ms(kBlockAtMs);
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok()) << b.status().to_string();
        auto c = b->create_collection("notes", schema_of("title:text"));
        ASSERT_TRUE(c.is_ok()) << c.status().to_string();
        auto id = b->insert(*c, std::nullopt, Doc{{0, Value("hello")}});
        ASSERT_TRUE(id.is_ok()) << id.status().to_string();
        ASSERT_TRUE(b->commit().is_ok());
        ASSERT_TRUE((*db)->close().is_ok());
    }
    const std::vector<std::byte> got = env.fs.contents(kPath);
    ASSERT_EQ(got.size(), want.size()) << "the engine writes:\n" << hex_dump(got);
    // The header: every byte fixed by the format, given the lineage and the clock.
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + 64, want.begin())) << "the engine writes:\n"
                                                                         << hex_dump(got);
    // The records: heads fixed by the format, bodies by the FlatBuffers builder (a FlatBuffers
    // that lays tables out otherwise changes the bodies, and the doc's dumps follow).
    for (size_t at = 64; at < got.size();) {
        const size_t end = at + 16 + ((le(got, at, 4) + 7) & ~uint64_t{7});
        ASSERT_LE(end, got.size());
        EXPECT_TRUE(std::equal(got.begin() + at, got.begin() + end, want.begin() + at))
            << "the record at " << at << " (kind " << std::to_integer<int>(got[at + 12])
            << ") differs; the engine writes:\n"
            << hex_dump(got);
        at = end;
    }
}

TEST(FileFormatGolden, TheFreshFileIsTheFuzzersSeed) {
    const std::filesystem::path seed = std::filesystem::path(FENEC_FILE_FORMAT_DOC).parent_path() /
                                       ".." / "fuzz" / "corpus" / "open_file" / "fresh.fenec";
    const std::string bytes = read_text(seed);
    const std::vector<std::byte> fresh = doc_example("a fresh file", 0);
    ASSERT_EQ(bytes.size(), fresh.size()) << seed;
    EXPECT_EQ(std::memcmp(bytes.data(), fresh.data(), fresh.size()), 0);
}

}  // namespace
}  // namespace fenec::test::file_format_golden_test
