#include "rtb/base/compress.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb {
namespace {

TEST(Base64, Rfc4648Vectors) {
  auto unwrapped = [](const std::string& text) { return base64_encode(text, 0); };
  test::expect_cases<const char*, std::string>(unwrapped,
                                               {{"", ""},
                                                {"f", "Zg=="},
                                                {"fo", "Zm8="},
                                                {"foo", "Zm9v"},
                                                {"foob", "Zm9vYg=="},
                                                {"fooba", "Zm9vYmE="},
                                                {"foobar", "Zm9vYmFy"},
                                                {std::string("\xff\xfe\x00", 3), "//4A"}});
}

TEST(Base64, WrapsLinesAndEndsWithANewline) {
  EXPECT_EQ(base64_encode("foobar", 4), "Zm9v\nYmFy\n");
  EXPECT_EQ(base64_encode("foob", 4), "Zm9v\nYg==\n");
  EXPECT_EQ(base64_encode("", 4), "");
  std::string text(1000, 'x');
  for (char& c : text) c = static_cast<char>(&c - text.data());
  std::string wrapped = base64_encode(text);
  std::size_t start = 0;
  while (start < wrapped.size()) {
    std::size_t end = wrapped.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    EXPECT_LE(end - start, 76u);
    start = end + 1;
  }
}

TEST(Base64, DecodesWhatItEncodesAtAnyLineWidth) {
  std::string bytes(1000, 'x');
  for (char& c : bytes) c = static_cast<char>(&c - bytes.data());
  for (std::size_t size : {0, 1, 2, 3, 56, 57, 58, 1000}) {
    std::string data = bytes.substr(0, size);
    for (std::size_t width : {0, 4, 76}) {
      EXPECT_EQ(base64_decode(base64_encode(data, width)), data) << size << " " << width;
    }
  }
  EXPECT_EQ(base64_decode("Zm9v\nYmFy\n"), "foobar");
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
}

TEST(Base64, RefusesWhatIsNotBase64) {
  for (std::string_view bad : {"Zm9", "Zm9v!", "Zg==Zg==", "Z===", "Zg=A", "Zm 9v", "Zg==A"}) {
    EXPECT_THROW(base64_decode(bad), Error) << bad;
  }
}

TEST(Gzip, RoundTripsAndShrinksText) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "def step_" + std::to_string(i) + "(): return None\n";
  std::string packed = gzip_compress(text);
  EXPECT_LT(packed.size(), text.size() / 4);
  ASSERT_GE(packed.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);  // the gzip magic, for `gzip -dc`
  EXPECT_EQ(static_cast<unsigned char>(packed[1]), 0x8b);
  EXPECT_EQ(gzip_decompress(packed), text);
  EXPECT_EQ(gzip_decompress(gzip_compress("")), "");
  std::string binary(300, '\0');
  EXPECT_EQ(gzip_decompress(gzip_compress(binary)), binary);
}

TEST(Gzip, RejectsCorruptAndTruncatedStreams) {
  std::string packed =
      gzip_compress("the bench driver, many times over: " + std::string(5000, 'a'));
  EXPECT_THROW(gzip_decompress(packed.substr(0, packed.size() / 2)), Error);
  EXPECT_THROW(gzip_decompress("not gzip at all"), Error);
  std::string flipped = packed;
  flipped[flipped.size() - 6] ^= 0x55;  // the CRC no longer matches
  EXPECT_THROW(gzip_decompress(flipped), Error);
}

TEST(Gunzip, StreamsConcatenatedMembersAndRejectsTruncation) {
  std::string a(100000, 'a');
  std::string both = gzip_compress(a) + gzip_compress("tail");
  EXPECT_TRUE(is_gzip(both));
  EXPECT_FALSE(is_gzip("\x1f"));
  // Read in small blocks from a source that hands out a few bytes at a time.
  auto read_all = [](std::string_view bytes) {
    auto source = gunzip_source(std::make_unique<MemorySource>(bytes, "in.gz", 7));
    std::string out;
    char block[333];
    while (std::size_t n = source->read(block, sizeof block)) out.append(block, n);
    return out;
  };
  EXPECT_EQ(read_all(both), a + "tail");
  EXPECT_EQ(test::what_of([&] { read_all(both.substr(0, both.size() - 3)); }),
            "in.gz: gzip: a truncated stream");
  std::string corrupt = gzip_compress(a);
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x55);
  EXPECT_THAT(test::what_of([&] { read_all(corrupt); }), StartsWith("in.gz: gzip: a corrupt"));
}

}  // namespace
}  // namespace rtb
