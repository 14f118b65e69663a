#include "rtb/base/proto_wire.h"

#include "rtb/base/error.h"

namespace rtb::wire {

namespace {

std::string_view type_name(unsigned type) {
  switch (type) {
    case 0:
      return "varint";
    case 1:
      return "fixed64";
    case 2:
      return "length-delimited";
    case 5:
      return "fixed32";
    default:
      return "invalid";
  }
}

// Decodes one varint at `position` of `data` (advancing it). At most 10 bytes, and the 10th may
// only hold the 64th bit; anything else (or the end of the data inside it) is an error.
bool decode_varint(std::string_view data, std::size_t& position, std::uint64_t& value) {
  value = 0;
  for (int i = 0; i < 10; ++i) {
    if (position >= data.size()) return false;
    auto byte = static_cast<std::uint8_t>(data[position++]);
    if (i == 9 && byte > 1) return false;
    value |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

Reader Reader::nested(const Field& field, std::string_view what,
                      std::string_view field_name) const {
  expect_type(field, WireType::kLength, what_, field_name);
  return Reader(base_, field.bytes, what, format_);
}

std::uint64_t Reader::varint(const char* what_is_read) {
  std::size_t start = position_;
  std::uint64_t value = 0;
  if (!decode_varint(data_, position_, value)) {
    fail("{}: {}: bad varint ({}) at byte {}: {}", format_, what_, what_is_read,
         offset() - (position_ - start),
         position_ >= data_.size() ? "the message ends inside it" : "longer than 10 bytes");
  }
  return value;
}

bool Reader::next_checked(Field& field) {
  if (position_ >= data_.size()) return false;
  field.offset = offset();
  field.format = format_;
  std::uint64_t key = varint("field key");
  auto type = static_cast<unsigned>(key & 7);
  std::uint64_t number = key >> 3;
  if (number == 0 || number > 0x1fffffff) {
    fail("{}: {}: invalid field number {} at byte {}", format_, what_, number, field.offset);
  }
  field.number = static_cast<std::uint32_t>(number);
  field.value = 0;
  field.bytes = {};
  switch (type) {
    case 0:
      field.type = WireType::kVarint;
      field.value = varint("field value");
      return true;
    case 1:
    case 5: {
      std::size_t size = type == 1 ? 8 : 4;
      if (data_.size() - position_ < size) {
        fail("{}: {}: field {} ends past the end of the message at byte {}", format_, what_, number,
             field.offset);
      }
      std::uint64_t value = 0;
      for (std::size_t i = 0; i < size; ++i) {
        value |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data_[position_ + i]))
                 << (8 * i);
      }
      position_ += size;
      field.type = type == 1 ? WireType::kFixed64 : WireType::kFixed32;
      field.value = value;
      return true;
    }
    case 2: {
      std::uint64_t length = varint("length");
      std::uint64_t left = data_.size() - position_;
      if (length > left) {
        fail(
            "{}: {}: field {} at byte {} has length {}, past the end of the message ({} bytes "
            "left)",
            format_, what_, number, field.offset, length, left);
      }
      field.type = WireType::kLength;
      field.bytes = data_.substr(position_, static_cast<std::size_t>(length));
      position_ += static_cast<std::size_t>(length);
      return true;
    }
    default:
      fail("{}: {}: field {} at byte {} has wire type {} ({}), which the format does not use",
           format_, what_, number, field.offset, type,
           type == 3 || type == 4 ? "a group" : "invalid");
  }
}

void expect_type(const Field& field, WireType type, std::string_view what, std::string_view name) {
  if (field.type == type) return;
  fail("{}: {}.{} (field {}) at byte {} has wire type {}, expected {}", field.format, what, name,
       field.number, field.offset, type_name(static_cast<unsigned>(field.type)),
       type_name(static_cast<unsigned>(type)));
}

std::string_view bytes_of(const Field& field, std::string_view what, std::string_view name) {
  expect_type(field, WireType::kLength, what, name);
  return field.bytes;
}

std::int64_t int64_of(const Field& field, std::string_view what, std::string_view name) {
  expect_type(field, WireType::kVarint, what, name);
  return static_cast<std::int64_t>(field.value);
}

PackedVarints::PackedVarints(const Field& field, std::string_view what, std::string_view name)
    : data_(field.bytes), offset_(field.offset), what_(what), name_(name), format_(field.format) {
  if (field.type != WireType::kLength) {
    fail("{}: {}.{} (field {}) at byte {} has wire type {}, expected varint or packed", format_,
         what, name, field.number, field.offset, type_name(static_cast<unsigned>(field.type)));
  }
}

bool PackedVarints::next(std::uint64_t& value) {
  if (position_ >= data_.size()) return false;
  std::size_t start = position_;
  if (!decode_varint(data_, position_, value)) {
    fail("{}: {}.{}: bad varint in a packed list at byte {} of the field at byte {}", format_,
         what_, name_, start, offset_);
  }
  return true;
}

void put_varint(std::string& out, std::uint64_t value) {
  do {
    auto byte = static_cast<char>(value & 0x7f);
    value >>= 7;
    if (value != 0) byte = static_cast<char>(byte | 0x80);
    out += byte;
  } while (value != 0);
}

void put_key(std::string& out, std::uint32_t number, WireType type) {
  put_varint(out, (static_cast<std::uint64_t>(number) << 3) | static_cast<std::uint64_t>(type));
}

void put_varint_field(std::string& out, std::uint32_t number, std::uint64_t value) {
  put_key(out, number, WireType::kVarint);
  put_varint(out, value);
}

void put_fixed64_field(std::string& out, std::uint32_t number, std::uint64_t value) {
  put_key(out, number, WireType::kFixed64);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

void put_length_field(std::string& out, std::uint32_t number, std::string_view payload) {
  put_key(out, number, WireType::kLength);
  put_varint(out, payload.size());
  out += payload;
}

}  // namespace rtb::wire
