// A reader of the protocol buffer wire format, shared by the binary HloProto reader (hlo/proto)
// and the XSpace profile reader (profile/xspace): it walks
// the fields of one message in a byte range it does not own (a memory-mapped file), never
// copies, never allocates, and checks every length and varint against the bytes that are there,
// so that truncated or hostile input ends in an rtb::Error, never a read out of bounds.
//
// Wire format facts (protobuf encoding documentation): a field is a varint key
// (field_number << 3 | wire_type) followed by its value; wire types 0 varint, 1 fixed 8 bytes,
// 2 length-delimited (a varint length, then that many bytes: strings, bytes, nested messages,
// packed repeated scalars), 5 fixed 4 bytes; 3 and 4 (groups) are obsolete and refused here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rtb::wire {

enum class WireType : std::uint8_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

struct Field {
  std::uint32_t number = 0;
  WireType type = WireType::kVarint;
  std::uint64_t value = 0;  // varint and fixed values
  std::string_view bytes;   // length-delimited payload
  std::size_t offset = 0;   // of the field's key, from the start of the whole input
  std::string_view format;  // of the input, for messages ("binary HloProto", "XSpace")
};

// The fields of one message, in the order they are stored.
class Reader {
 public:
  // `message` is the message's bytes, a part of `input` (the whole input: offsets in error
  // messages count from its start); `what` the message type, e.g. "HloInstructionProto";
  // `format` the input's format, which every error message starts with (a string that outlives
  // the reader, e.g. "binary HloProto").
  Reader(std::string_view input, std::string_view message, std::string_view what,
         std::string_view format)
      : base_(input.data()), data_(message), what_(what), format_(format) {}
  // The nested message in `field` (a field of this reader's message), of type `what`; the field
  // must be length-delimited (else rtb::Error naming `field_name`).
  Reader nested(const Field& field, std::string_view what, std::string_view field_name) const;

  // Reads the next field into `field`; false at the end of the message. Throws rtb::Error on a
  // bad varint, a length past the end of the message, or an unknown wire type. Inline for the
  // common fields (a one-byte key, a varint or a length that fits); the rest, errors included,
  // go through next_checked(). A capture holds tens of millions of such fields.
  bool next(Field& field) {
    if (position_ >= data_.size()) return false;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data_.data());
    std::size_t at = position_;
    unsigned key = bytes[at];
    unsigned type = key & 7;
    if (key >= 0x80 || key < 8 || (type != 0 && type != 2)) return next_checked(field);
    ++at;
    std::uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      // At most 9 bytes here (63 bits); a longer varint or the end takes the checked path.
      if (at >= data_.size() || shift > 56) return next_checked(field);
      unsigned byte = bytes[at++];
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) break;
    }
    field.offset = offset();
    field.format = format_;
    field.number = key >> 3;
    if (type == 0) {
      field.type = WireType::kVarint;
      field.value = value;
      field.bytes = {};
    } else {
      if (value > data_.size() - at) return next_checked(field);
      field.type = WireType::kLength;
      field.value = 0;
      field.bytes = data_.substr(at, static_cast<std::size_t>(value));
      at += static_cast<std::size_t>(value);
    }
    position_ = at;
    return true;
  }

  std::string_view what() const { return what_; }
  std::string_view data() const { return data_; }

 private:
  Reader(const char* base, std::string_view message, std::string_view what, std::string_view format)
      : base_(base), data_(message), what_(what), format_(format) {}
  bool next_checked(Field& field);
  std::uint64_t varint(const char* what_is_read);
  std::size_t offset() const { return static_cast<std::size_t>(data_.data() - base_) + position_; }

  const char* base_;
  std::string_view data_;
  std::size_t position_ = 0;
  std::string_view what_;
  std::string_view format_;
};

// Throws rtb::Error unless `field` has wire type `type`: "<what>.<name> (field N) has wire type
// X, expected Y". Every field the reader interprets goes through this.
void expect_type(const Field& field, WireType type, std::string_view what, std::string_view name);

// The payload of a length-delimited field (a string, bytes, a message) and the value of a varint
// field as int64, each after expect_type.
std::string_view bytes_of(const Field& field, std::string_view what, std::string_view name);
std::int64_t int64_of(const Field& field, std::string_view what, std::string_view name);

// A repeated integer field, packed (one length-delimited field of varints) or not (one varint
// per field): calls `on_value` for each value in `field`.
template <typename Callback>
void for_each_varint(const Field& field, std::string_view what, std::string_view name,
                     Callback&& on_value);

// The varints of a packed payload, one at a time (used by for_each_varint).
class PackedVarints {
 public:
  PackedVarints(const Field& field, std::string_view what, std::string_view name);
  bool next(std::uint64_t& value);

 private:
  std::string_view data_;
  std::size_t position_ = 0;
  std::size_t offset_ = 0;
  std::string_view what_;
  std::string_view name_;
  std::string_view format_;
};

template <typename Callback>
void for_each_varint(const Field& field, std::string_view what, std::string_view name,
                     Callback&& on_value) {
  if (field.type == WireType::kVarint) {
    on_value(field.value);
    return;
  }
  PackedVarints values(field, what, name);
  std::uint64_t value = 0;
  while (values.next(value)) on_value(value);
}

// ---- writing --------------------------------------------------------------------------------
// The encoder's side, for tests and test captures: each appends one encoded item to `out`.
void put_varint(std::string& out, std::uint64_t value);
void put_key(std::string& out, std::uint32_t number, WireType type);
void put_varint_field(std::string& out, std::uint32_t number, std::uint64_t value);
void put_fixed64_field(std::string& out, std::uint32_t number, std::uint64_t value);
void put_length_field(std::string& out, std::uint32_t number, std::string_view payload);

}  // namespace rtb::wire
