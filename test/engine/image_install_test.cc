// test/engine/image_install_test.cc: proves engine::ImageInstall (engine/database.h), an image's
// install begun while its bytes arrive: fed the bytes in slices of any size (one byte, a prime,
// a page, the rest), it replays only what has arrived -- the bytes not there yet are garbage here
// and are never read -- and Database::install_open finishes it to the same open database and the
// same file as an install of the whole image; a damaged image gets the very verdict (code,
// message, offset) the whole install gives, including the verdicts that depend on whether zeros
// follow the damage, which are deferred until those bytes are there.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/aligned_bytes.h"
#include "engine/database.h"
#include "engine/format.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::image_install_test {
namespace {

using namespace engine;

// Installs `bytes` as a PUT receives them: into a buffer whose unreceived part is garbage, fed
// after every slice of `slice` bytes (0: all at once, as install_open without a begun install).
Result<std::unique_ptr<Database>> install_fed(EngineEnv& env, const std::vector<std::byte>& bytes,
                                              size_t slice, ImageInfo& info) {
    std::shared_ptr<std::byte[]> buf = aligned_bytes(bytes.size());
    std::memset(buf.get(), 0xAB, bytes.size());
    std::span<const std::byte> image(buf.get(), bytes.size());
    if (slice == 0) {
        std::memcpy(buf.get(), bytes.data(), bytes.size());
        return Database::install_open(image, kInstallIncoming, kInstallTarget,
                                      InstallMode::create_only, env.options(), {}, info);
    }
    auto begun = std::make_unique<ImageInstall>(image, kInstallTarget, env.options(),
                                                std::shared_ptr<const std::byte[]>(buf, buf.get()));
    for (size_t at = 0; at < bytes.size();) {
        const size_t n = std::min(slice, bytes.size() - at);
        std::memcpy(buf.get() + at, bytes.data() + at, n);
        at += n;
        (void)begun->feed(at);  // a failure is kept and install_open returns it
    }
    return Database::install_open(image, kInstallIncoming, kInstallTarget, InstallMode::create_only,
                                  env.options(), {}, info, nullptr, std::move(begun));
}

// `rows` rows in `items` and a second collection `more` after it, so the image holds records
// after the first collection's documents (a verdict on those depends on what follows them).
std::vector<std::byte> source_image(EngineEnv& env, int rows) {
    auto src = database_with_rows(env, kInstallSource, rows, 40);
    EXPECT_NE(src, nullptr);
    if (!src) return {};
    auto b = src->begin();
    EXPECT_TRUE(b.is_ok());
    if (!b.is_ok()) return {};
    auto c = b->create_collection("more", schema_of("n:int"));
    EXPECT_TRUE(c.is_ok());
    for (int i = 0; c.is_ok() && i < 50; ++i) {
        EXPECT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{i})}}).is_ok());
    }
    EXPECT_TRUE(b->commit().is_ok());
    auto img = src->image();
    EXPECT_TRUE(img.is_ok()) << why(img.status());
    return img.is_ok() ? *img->bytes : std::vector<std::byte>{};
}

TEST(ImageInstall, AnImageFedAsItArrivesInstallsAsTheWholeOneDoes) {
    EngineEnv env;
    const std::vector<std::byte> bytes = source_image(env, 400);
    ASSERT_FALSE(bytes.empty());
    std::string whole;
    {
        EngineEnv env2;
        ImageInfo info;
        auto db = install_fed(env2, bytes, 0, info);
        ASSERT_TRUE(db.is_ok()) << why(db.status());
        whole = dump(**db);
    }
    for (size_t slice : {size_t{1}, size_t{7}, size_t{4096}, bytes.size() / 3 + 1}) {
        SCOPED_TRACE("slices of " + std::to_string(slice));
        EngineEnv env2;
        ImageInfo info;
        auto db = install_fed(env2, bytes, slice, info);
        ASSERT_TRUE(db.is_ok()) << why(db.status());
        EXPECT_EQ(dump(**db), whole);
        EXPECT_EQ(info.bytes, bytes.size());
        EXPECT_TRUE(env2.fs.contents(kInstallTarget) == bytes);
        EXPECT_FALSE(env2.fs.has(kInstallIncoming));
    }
}

TEST(ImageInstall, ADamagedImageGetsTheVerdictTheWholeInstallGives) {
    EngineEnv env;
    const std::vector<std::byte> bytes = source_image(env, 300);
    ASSERT_FALSE(bytes.empty());
    std::vector<std::pair<std::string, std::vector<std::byte>>> damaged;
    for (size_t at : {bytes.size() / 5, bytes.size() / 2, bytes.size() - 20, bytes.size() - 300}) {
        std::vector<std::byte> flipped = bytes;
        flipped[at] ^= std::byte{0x20};
        damaged.emplace_back("a byte flipped at " + std::to_string(at), flipped);
        // Zeros after the damage: whether they follow is part of the verdict.
        std::vector<std::byte> zeroed = flipped;
        std::fill(zeroed.begin() + static_cast<ptrdiff_t>(at) + 1, zeroed.end(), std::byte{0});
        damaged.emplace_back("flipped at " + std::to_string(at) + ", zeros after", zeroed);
    }
    damaged.emplace_back("cut", std::vector<std::byte>(bytes.begin(), bytes.end() - 100));
    std::vector<std::byte> longer = bytes;
    longer.resize(bytes.size() + 8);
    damaged.emplace_back("8 bytes over", longer);
    for (const auto& [what, image] : damaged) {
        SCOPED_TRACE(what);
        EngineEnv env_whole;
        ImageInfo info;
        auto whole = install_fed(env_whole, image, 0, info);
        ASSERT_FALSE(whole.is_ok());
        EXPECT_EQ(whole.status().code(), Code::corruption) << why(whole.status());
        for (size_t slice : {size_t{1}, size_t{4096}}) {
            EngineEnv env2;
            auto fed = install_fed(env2, image, slice, info);
            ASSERT_FALSE(fed.is_ok()) << "slices of " << slice;
            EXPECT_EQ(fed.status().code(), whole.status().code()) << "slices of " << slice;
            EXPECT_EQ(fed.status().message(), whole.status().message()) << "slices of " << slice;
            EXPECT_EQ(fed.status().detail().offset, whole.status().detail().offset);
            EXPECT_FALSE(env2.fs.has(kInstallIncoming));
            EXPECT_FALSE(env2.fs.has(kInstallTarget));
        }
    }
}

// The offset of the record of `bytes` (a built image: header, then records) that holds byte `at`.
uint64_t record_holding(const std::vector<std::byte>& bytes, uint64_t at) {
    uint64_t p = format::kHeaderBytes;
    while (p < bytes.size()) {
        const uint64_t next = p + format::framed_size(format::load_u32(bytes.data() + p));
        if (at < next) return p;
        p = next;
    }
    return bytes.size();
}

// A byte flipped inside an image the file holds whole is that record's checksum mismatch at its
// offset, never "image cut short at N of N bytes": not when the damaged record is the image's
// last and ends at the end of the file (as a backup's image does), nor when zeros follow the
// damage. `fenec verify`, `fenec restore` and a node's install all say what this replay says.
TEST(ImageInstall, AFlippedByteInAWholeImageIsAChecksumMismatchAtItsRecord) {
    EngineEnv env;
    const std::vector<std::byte> bytes = source_image(env, 300);
    ASSERT_FALSE(bytes.empty());
    for (size_t at : {bytes.size() / 2, bytes.size() - 20}) {
        const uint64_t record = record_holding(bytes, at);
        ASSERT_LT(record + format::kRecordHeadBytes, at) << "the flip must land in a body";
        const std::string mismatch = "record checksum mismatch at offset " + std::to_string(record);
        std::vector<std::byte> flipped = bytes;
        flipped[at] ^= std::byte{0x20};
        std::vector<std::byte> zeroed = flipped;
        std::fill(zeroed.begin() + static_cast<ptrdiff_t>(at) + 1, zeroed.end(), std::byte{0});
        for (const auto& [what, image] : {std::pair{"flipped", flipped}, {"zeros after", zeroed}}) {
            SCOPED_TRACE(std::string(what) + " at " + std::to_string(at));
            for (size_t slice : {size_t{0}, size_t{4096}}) {
                EngineEnv env2;
                ImageInfo info;
                auto db = install_fed(env2, image, slice, info);
                ASSERT_FALSE(db.is_ok()) << "slices of " << slice;
                EXPECT_EQ(db.status().code(), Code::corruption) << why(db.status());
                EXPECT_EQ(db.status().message(), mismatch) << why(db.status());
                EXPECT_EQ(db.status().detail().offset, record) << why(db.status());
            }
            EngineEnv env3;
            env3.fs.set_contents(kInstallIncoming, image);
            auto verified = Database::verify_image(env3.fs, kInstallIncoming);
            ASSERT_FALSE(verified.is_ok());
            EXPECT_EQ(verified.status().message(), mismatch) << why(verified.status());
            EXPECT_EQ(verified.status().detail().offset, record);
        }
    }
    // An image that really ends early is still cut short, with both lengths.
    EngineEnv env4;
    const std::vector<std::byte> cut(bytes.begin(), bytes.end() - 100);
    env4.fs.set_contents(kInstallIncoming, cut);
    auto verified = Database::verify_image(env4.fs, kInstallIncoming);
    ASSERT_FALSE(verified.is_ok());
    EXPECT_EQ(verified.status().message(), "image cut short at " + std::to_string(cut.size()) +
                                               " of " + std::to_string(bytes.size()) +
                                               " bytes at offset " +
                                               std::to_string(format::kHeaderBytes))
        << why(verified.status());
}

}  // namespace
}  // namespace fenec::test::image_install_test
