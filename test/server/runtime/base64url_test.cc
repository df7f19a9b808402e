// test/server/runtime/base64url_test.cc: base64url (server/runtime/base64url.h) against RFC 4648's
// vectors (§10, in the url alphabet), its strict decoding (padding, non-canonical trailing bits,
// a length of 1 mod 4, characters outside the alphabet, the standard alphabet, spaces all
// refused), and every byte round-tripping.
#include "server/runtime/base64url.h"

#include <gtest/gtest.h>

#include <string>

namespace fenec::server::base64url_test {
namespace {

TEST(Base64url, Rfc4648VectorsAndStrictDecoding) {
    const char* plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char* coded[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ(base64url_encode(plain[i]), coded[i]);
        EXPECT_EQ(base64url_decode(coded[i]), std::optional<std::string>(plain[i]));
    }
    EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
    EXPECT_FALSE(base64url_decode("Zg=="));   // padding refused
    EXPECT_FALSE(base64url_decode("Zh"));     // non-canonical trailing bits
    EXPECT_FALSE(base64url_decode("Z"));      // 1 mod 4
    EXPECT_FALSE(base64url_decode("Zm9v!"));  // outside the alphabet
    EXPECT_FALSE(base64url_decode("Zm+v"));   // standard alphabet, not url
    EXPECT_FALSE(base64url_decode("Zm 9v"));
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    EXPECT_EQ(base64url_decode(base64url_encode(all)), all);
}

}  // namespace
}  // namespace fenec::server::base64url_test
