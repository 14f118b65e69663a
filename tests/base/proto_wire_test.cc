// Tests of the protocol buffer wire reader and writer (base/proto_wire.h).
#include "rtb/base/proto_wire.h"

#include <string>
#include <vector>

#include "test_util.h"

namespace rtb::wire {
namespace {

using test::what_of;

TEST(ProtoWire, ReadsEveryWireTypeTheWriterWrites) {
  std::string message;
  put_varint_field(message, 1, 300);
  put_fixed64_field(message, 2, 0x8000000000000001u);
  put_length_field(message, 3, "abc");
  put_key(message, 4, WireType::kFixed32);
  message += std::string("\x02\x00\x00\x00", 4);
  Reader reader(message, message, "T", "test format");
  Field f;
  ASSERT_TRUE(reader.next(f));
  EXPECT_EQ(f.value, 300u);
  ASSERT_TRUE(reader.next(f));
  EXPECT_EQ(f.value, 0x8000000000000001u);
  ASSERT_TRUE(reader.next(f));
  EXPECT_EQ(f.bytes, "abc");
  ASSERT_TRUE(reader.next(f));
  EXPECT_EQ(f.value, 2u);
  EXPECT_EQ(f.offset, message.size() - 5);
  EXPECT_FALSE(reader.next(f));
  // An unpacked repeated field is read like a packed one.
  std::vector<std::uint64_t> values;
  Field unpacked;
  unpacked.type = WireType::kVarint;
  unpacked.value = 7;
  for_each_varint(unpacked, "T", "x", [&](std::uint64_t v) { values.push_back(v); });
  EXPECT_EQ(values, std::vector<std::uint64_t>{7});
}

TEST(ProtoWire, ErrorsNameTheFormatAndTheByte) {
  std::string message;
  put_length_field(message, 3, "abcdef");
  std::string truncated = message.substr(0, 5);
  Reader reader(truncated, truncated, "T", "test format");
  Field f;
  EXPECT_THAT(what_of([&] { reader.next(f); }),
              AllOf(StartsWith("test format: T: field 3 at byte 0 has length 6"),
                    HasSubstr("past the end")));
  std::string group;
  put_key(group, 5, static_cast<WireType>(3));
  Reader groups(group, group, "T", "test format");
  EXPECT_THAT(what_of([&] { groups.next(f); }), HasSubstr("wire type 3 (a group)"));
  Reader fine(message, message, "T", "test format");
  ASSERT_TRUE(fine.next(f));
  EXPECT_THAT(what_of([&] { expect_type(f, WireType::kVarint, "T", "x"); }),
              StartsWith("test format: T.x (field 3) at byte 0 has wire type length-delimited"));
}

}  // namespace
}  // namespace rtb::wire
