#include "rtb/payload/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "rtb/base/error.h"

namespace rtb::payload {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader and writer assume a little-endian host");

namespace {

constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint32_t kMax32 = 0xffffffffu;
constexpr std::uint16_t kMax16 = 0xffffu;
// 1980-01-01 00:00:00, the earliest DOS date: fixed so the output depends only on the arrays.
constexpr std::uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;
constexpr std::uint16_t kDosTime = 0;
// Limits that keep a hostile file from making the reader allocate much.
constexpr std::uint64_t kMaxNpyHeader = 1 << 20;
constexpr std::uint64_t kMaxCentralDirectory = 64 << 20;

const std::string_view kNpyMagic("\x93NUMPY", 6);

// --- little-endian fields
// -------------------------------------------------------------------------

std::uint64_t get_le(const std::byte* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint8_t>(p[i]);
  return value;
}

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// A cursor over a small buffer of header bytes; every read is bounds-checked.
class FieldReader {
 public:
  FieldReader(std::span<const std::byte> bytes, const std::string& source, std::string what)
      : bytes_(bytes), source_(source), what_(std::move(what)) {}
  std::uint64_t u(int width) {
    need(width);
    std::uint64_t value = get_le(bytes_.data() + pos_, width);
    pos_ += width;
    return value;
  }
  std::span<const std::byte> take(std::size_t n) {
    need(n);
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  std::size_t position() const { return pos_; }

 private:
  void need(std::size_t n) const {
    if (bytes_.size() - pos_ < n) fail_at(source_, 0, "{} is truncated", what_);
  }
  std::span<const std::byte> bytes_;
  const std::string& source_;
  std::string what_;
  std::size_t pos_ = 0;
};

std::vector<std::byte> read_bytes(const ByteSource& source, std::uint64_t offset,
                                  std::uint64_t size, std::string_view what) {
  if (offset > source.size() || size > source.size() - offset) {
    fail_at(source.name(), 0, "{} is truncated: needs bytes {}..{}, the file has {}", what, offset,
            offset + size, source.size());
  }
  std::vector<std::byte> bytes(size);
  source.read_at(offset, bytes);
  return bytes;
}

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// --- zip ----------------------------------------------------------------------------------------

struct ZipMember {
  std::string name;
  std::uint64_t data_offset;
  std::uint64_t size;
};

struct EndOfDirectory {
  std::uint64_t entries;
  std::uint64_t directory_size;
  std::uint64_t directory_offset;
};

EndOfDirectory find_end_of_directory(const ByteSource& source) {
  const std::string& name = source.name();
  std::uint64_t tail_size = std::min<std::uint64_t>(source.size(), 22 + 0xffff);
  std::uint64_t tail_offset = source.size() - tail_size;
  std::vector<std::byte> tail = read_bytes(source, tail_offset, tail_size, "zip end record");
  std::optional<std::size_t> found;
  for (std::size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;) {
    if (get_le(tail.data() + i, 4) != kEndSignature) continue;
    std::uint64_t comment = get_le(tail.data() + i + 20, 2);
    if (i + 22 + comment <= tail.size()) {
      found = i;
      break;
    }
  }
  if (!found) {
    fail_at(name, 0, "not a complete zip archive (no end-of-central-directory record; truncated?)");
  }
  FieldReader end{std::span<const std::byte>(tail).subspan(*found), name, "zip end record"};
  end.u(4);
  std::uint64_t disk = end.u(2);
  std::uint64_t directory_disk = end.u(2);
  std::uint64_t entries_here = end.u(2);
  EndOfDirectory result{end.u(2), end.u(4), end.u(4)};
  if (disk != 0 || directory_disk != 0 || entries_here != result.entries) {
    fail_at(name, 0, "multi-disk zip archives are not supported");
  }
  std::uint64_t end_offset = tail_offset + *found;
  bool has_locator = false;
  if (end_offset >= 20) {
    std::vector<std::byte> locator = read_bytes(source, end_offset - 20, 20, "zip64 locator");
    has_locator = get_le(locator.data(), 4) == kZip64LocatorSignature;
    if (has_locator) {
      std::uint64_t record_offset = get_le(locator.data() + 8, 8);
      std::vector<std::byte> record = read_bytes(source, record_offset, 56, "zip64 end record");
      FieldReader z(record, name, "zip64 end record");
      if (z.u(4) != kZip64EndSignature) fail_at(name, 0, "bad zip64 end-of-directory record");
      z.u(8);  // record size
      z.u(2);  // version made by
      z.u(2);  // version needed
      if (z.u(4) != 0 || z.u(4) != 0) fail_at(name, 0, "multi-disk zip archives are not supported");
      std::uint64_t entries_on_disk = z.u(8);
      result.entries = z.u(8);
      result.directory_size = z.u(8);
      result.directory_offset = z.u(8);
      if (entries_on_disk != result.entries) {
        fail_at(name, 0, "multi-disk zip archives are not supported");
      }
    }
  }
  if (!has_locator && (result.entries == kMax16 || result.directory_size == kMax32 ||
                       result.directory_offset == kMax32)) {
    fail_at(name, 0, "zip archive needs zip64 records but has none (truncated?)");
  }
  if (result.directory_offset > source.size() ||
      result.directory_size > source.size() - result.directory_offset) {
    fail_at(name, 0, "zip central directory lies outside the file (truncated?)");
  }
  if (result.directory_size > kMaxCentralDirectory) {
    fail_at(name, 0, "zip central directory is implausibly large ({} bytes)",
            result.directory_size);
  }
  return result;
}

std::vector<ZipMember> list_zip_members(const ByteSource& source) {
  const std::string& name = source.name();
  EndOfDirectory end = find_end_of_directory(source);
  std::vector<std::byte> directory =
      read_bytes(source, end.directory_offset, end.directory_size, "zip central directory");
  FieldReader cd(directory, name, "zip central directory");
  std::vector<ZipMember> members;
  for (std::uint64_t index = 0; index < end.entries; ++index) {
    if (cd.u(4) != kCentralHeaderSignature) {
      fail_at(name, 0, "zip central directory entry {} is damaged", index);
    }
    cd.u(2);  // version made by
    cd.u(2);  // version needed
    std::uint64_t flags = cd.u(2);
    std::uint64_t method = cd.u(2);
    cd.u(4);  // time, date
    cd.u(4);  // crc
    std::uint64_t compressed = cd.u(4);
    std::uint64_t uncompressed = cd.u(4);
    std::uint64_t name_length = cd.u(2);
    std::uint64_t extra_length = cd.u(2);
    std::uint64_t comment_length = cd.u(2);
    std::uint64_t disk = cd.u(2);
    cd.u(2);  // internal attributes
    cd.u(4);  // external attributes
    std::uint64_t local_offset = cd.u(4);
    std::string member_name(as_text(cd.take(name_length)));
    std::span<const std::byte> extra = cd.take(extra_length);
    cd.take(comment_length);

    // zip64: the fields that do not fit hold 0xffffffff and come, in this order, from the extra.
    FieldReader ex(extra, name, "zip extra field of '" + member_name + "'");
    while (ex.position() + 4 <= extra.size()) {
      std::uint64_t id = ex.u(2);
      std::uint64_t length = ex.u(2);
      std::span<const std::byte> body = ex.take(length);
      if (id != kZip64ExtraId) continue;
      FieldReader z(body, name, "zip64 extra field of '" + member_name + "'");
      if (uncompressed == kMax32) uncompressed = z.u(8);
      if (compressed == kMax32) compressed = z.u(8);
      if (local_offset == kMax32) local_offset = z.u(8);
      if (disk == kMax16) disk = z.u(4);
    }
    if (disk != 0) fail_at(name, 0, "multi-disk zip archives are not supported");
    if (flags & 1) fail_at(name, 0, "member '{}' is encrypted", member_name);
    if (method != 0) {
      fail_at(name, 0,
              "member '{}' is compressed (zip method {}{}); only uncompressed .npz files "
              "(numpy.savez, not savez_compressed) can be read",
              member_name, method, method == 8 ? ", deflate" : "");
    }
    if (compressed != uncompressed) {
      fail_at(name, 0, "member '{}' is stored but its sizes differ ({} vs {})", member_name,
              compressed, uncompressed);
    }
    std::vector<std::byte> local = read_bytes(source, local_offset, 30, "zip local header");
    if (get_le(local.data(), 4) != kLocalHeaderSignature) {
      fail_at(name, 0, "zip local header of member '{}' is damaged", member_name);
    }
    std::uint64_t data_offset =
        local_offset + 30 + get_le(local.data() + 26, 2) + get_le(local.data() + 28, 2);
    if (data_offset > source.size() || compressed > source.size() - data_offset) {
      fail_at(name, 0, "member '{}' is truncated: needs {} bytes at offset {}, the file has {}",
              member_name, compressed, data_offset, source.size());
    }
    for (const ZipMember& other : members) {
      if (other.name == member_name) fail_at(name, 0, "member '{}' appears twice", member_name);
    }
    members.push_back({std::move(member_name), data_offset, compressed});
  }
  return members;
}

// --- .npy header dict
// -----------------------------------------------------------------------------

// Parses the Python literal dict of an .npy header: {'descr': '<i2', 'fortran_order': False,
// 'shape': (2, 3), }.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source, const std::string& what)
      : text_(text), source_(source), what_(what) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<std::int64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') bad("has a structured dtype, which is not supported");
        descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        shape = tuple();
        have_shape = true;
      } else {
        bad(fmt::format("has an unexpected key '{}'", key));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      bad("header dict is malformed (expected ',' or '}')");
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) bad("header has text after its dict");
    if (!have_descr || !have_shape || !have_order) {
      bad("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
  }

 private:
  [[noreturn]] void bad(std::string_view message) const {
    fail_at(source_, 0, "{}: .npy {}", what_, message);
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    if (peek() != c) bad(fmt::format("header dict is malformed (expected '{}')", c));
    ++pos_;
  }
  std::string string_literal() {
    char quote = peek();
    if (quote != '\'' && quote != '"') bad("header dict is malformed (expected a string)");
    std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) bad("header dict has an unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }
  bool boolean() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("header has a 'fortran_order' that is neither True nor False");
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> values;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::int64_t value = 0;
      const char* begin = text_.data() + pos_;
      auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
      if (ec != std::errc() || value < 0) bad("header has a malformed 'shape'");
      pos_ += end - begin;
      if (peek() == 'L') ++pos_;  // Python 2 long
      values.push_back(value);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') bad("header has a malformed 'shape'");
    }
    ++pos_;
    if (values.size() > 32) bad("header has more than 32 dimensions");
    return values;
  }

  std::string_view text_;
  const std::string& source_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

// NumPy's facts of each dtype, in the order of the enum.
struct DTypeFacts {
  DType dtype;
  std::size_t size;
  std::string_view name;
  std::string_view descr;
};
constexpr std::array<DTypeFacts, 7> kDTypes = {{
    {DType::kInt16, 2, "int16", "<i2"},
    {DType::kInt32, 4, "int32", "<i4"},
    {DType::kInt64, 8, "int64", "<i8"},
    {DType::kFloat32, 4, "float32", "<f4"},
    {DType::kFloat64, 8, "float64", "<f8"},
    {DType::kBool, 1, "bool", "|b1"},
    {DType::kUInt8, 1, "uint8", "|u1"},
}};
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kDTypes.size(); ++i) {
    if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kDTypes is indexed by DType");

const DTypeFacts& facts_of(DType dtype) {
  static constexpr DTypeFacts kUnknown = {DType::kUInt8, 1, "?", "?"};  // not an enumerator
  const auto index = static_cast<std::size_t>(dtype);
  return index < kDTypes.size() ? kDTypes[index] : kUnknown;
}

std::optional<DType> dtype_from_descr(std::string_view descr) {
  for (const DTypeFacts& facts : kDTypes) {
    std::string_view known = facts.descr;
    if (descr == known) return facts.dtype;
    // One-byte types have no byte order; NumPy writes '|' but '<' and '=' mean the same.
    if (known[0] == '|' && descr.size() == known.size() && (descr[0] == '<' || descr[0] == '=') &&
        descr.substr(1) == known.substr(1)) {
      return facts.dtype;
    }
  }
  return std::nullopt;
}

std::string npz_array_name(std::string_view member) {
  return std::string(member.substr(0, member.size() - 4));
}

}  // namespace

// --- dtypes
// ---------------------------------------------------------------------------------------

std::size_t dtype_size(DType dtype) { return facts_of(dtype).size; }

std::string_view dtype_name(DType dtype) { return facts_of(dtype).name; }

std::string_view dtype_descr(DType dtype) { return facts_of(dtype).descr; }

std::string format_shape(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// --- reading
// ----------------------------------------------------------------------------------------

ArrayInfo read_npy_info(const ByteSource& source, std::uint64_t offset, std::uint64_t size,
                        const std::string& what) {
  const std::string& name = source.name();
  if (size < 10) fail_at(name, 0, "{}: too short for an .npy header ({} bytes)", what, size);
  std::vector<std::byte> prefix =
      read_bytes(source, offset, std::min<std::uint64_t>(size, 12), "the .npy header of " + what);
  if (as_text(std::span(prefix).first(6)) != kNpyMagic) {
    fail_at(name, 0, "{}: not an .npy array (bad magic)", what);
  }
  int major = std::to_integer<int>(prefix[6]);
  int minor = std::to_integer<int>(prefix[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail_at(name, 0, "{}: unsupported .npy format version {}.{}", what, major, minor);
  }
  std::uint64_t length_bytes = major == 1 ? 2 : 4;
  if (size < 8 + length_bytes) fail_at(name, 0, "{}: .npy header is truncated", what);
  std::uint64_t header_length = get_le(prefix.data() + 8, static_cast<int>(length_bytes));
  std::uint64_t header_start = 8 + length_bytes;
  if (header_length > size - header_start) {
    fail_at(name, 0, "{}: .npy header is truncated ({} header bytes announced, {} present)", what,
            header_length, size - header_start);
  }
  if (header_length > kMaxNpyHeader) {
    fail_at(name, 0, "{}: .npy header is implausibly long ({} bytes)", what, header_length);
  }
  std::vector<std::byte> header_bytes =
      read_bytes(source, offset + header_start, header_length, "the .npy header of " + what);
  std::string descr;
  bool fortran_order = false;
  ArrayInfo info;
  HeaderParser(as_text(header_bytes), name, what).parse(descr, fortran_order, info.shape);
  if (fortran_order) {
    fail_at(name, 0, "{}: Fortran-order arrays are not supported (write it in C order)", what);
  }
  std::optional<DType> dtype = dtype_from_descr(descr);
  if (!dtype) {
    if (!descr.empty() && descr[0] == '>') {
      fail_at(name, 0, "{}: big-endian dtype '{}' is not supported", what, descr);
    }
    fail_at(name, 0,
            "{}: unsupported dtype '{}' (supported: int16, int32, int64, float32, float64, bool, "
            "uint8, little-endian)",
            what, descr);
  }
  info.dtype = *dtype;
  info.format_version = major;
  std::uint64_t item = dtype_size(info.dtype);
  std::uint64_t count = 1;
  for (std::int64_t dim : info.shape) {
    if (dim != 0 && count > (std::numeric_limits<std::uint64_t>::max() / 2 / item) /
                                static_cast<std::uint64_t>(dim)) {
      fail_at(name, 0, "{}: shape {} is too large", what, format_shape(info.shape));
    }
    count *= static_cast<std::uint64_t>(dim);
  }
  info.count = static_cast<std::int64_t>(count);
  info.data_bytes = count * item;
  info.data_offset = offset + header_start + header_length;
  std::uint64_t present = size - header_start - header_length;
  if (present < info.data_bytes) {
    fail_at(name, 0, "{}: truncated: shape {} of {} needs {} bytes of data, {} present", what,
            format_shape(info.shape), dtype_name(info.dtype), info.data_bytes, present);
  }
  if (present > info.data_bytes) {
    fail_at(name, 0, "{}: {} bytes after the data of shape {} of {}", what,
            present - info.data_bytes, format_shape(info.shape), dtype_name(info.dtype));
  }
  return info;
}

std::vector<ArrayInfo> list_arrays(const ByteSource& source) {
  const std::string& name = source.name();
  if (source.size() == 0) fail_at(name, 0, "empty file (expected a NumPy .npy or .npz file)");
  std::vector<std::byte> magic =
      read_bytes(source, 0, std::min<std::uint64_t>(source.size(), 6), "file start");
  std::string_view start = as_text(magic);
  if (start.size() == 6 && start == kNpyMagic) {
    return {read_npy_info(source, 0, source.size(), "array")};
  }
  if (start.substr(0, 2) == "PK") {
    std::vector<ArrayInfo> arrays;
    for (const ZipMember& member : list_zip_members(source)) {
      if (member.name.size() < 5 || !member.name.ends_with(".npy")) continue;
      ArrayInfo info =
          read_npy_info(source, member.data_offset, member.size, "member '" + member.name + "'");
      info.name = npz_array_name(member.name);
      arrays.push_back(std::move(info));
    }
    return arrays;
  }
  std::string shown;
  for (std::byte b : magic) shown += fmt::format(" {:02x}", std::to_integer<int>(b));
  fail_at(name, 0, "not a NumPy .npy or .npz file (it starts with bytes{})", shown);
}

const ArrayInfo* find_array(const std::vector<ArrayInfo>& arrays, std::string_view name) {
  for (const ArrayInfo& info : arrays) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

void read_elements_raw(const ByteSource& source, const ArrayInfo& info, std::int64_t first,
                       std::int64_t count, DType expected, std::span<std::byte> out) {
  std::string what = info.name.empty() ? "array" : "'" + info.name + "'";
  if (info.dtype != expected) {
    fail_at(source.name(), 0, "{} is {}, expected {}", what, dtype_name(info.dtype),
            dtype_name(expected));
  }
  if (first < 0 || count < 0 || first > info.count || count > info.count - first) {
    fail_at(source.name(), 0, "elements {}..{} are outside {} of {} elements", first, first + count,
            what, info.count);
  }
  std::uint64_t item = dtype_size(info.dtype);
  if (out.size() != static_cast<std::uint64_t>(count) * item) {
    fail_at(source.name(), 0, "internal: buffer of {} bytes for {} elements of {}", out.size(),
            count, dtype_name(info.dtype));
  }
  source.read_at(info.data_offset + static_cast<std::uint64_t>(first) * item, out);
}

void read_integers(const ByteSource& source, const ArrayInfo& info, std::int64_t first,
                   std::span<std::int64_t> out) {
  auto widen = [&]<typename T>() {
    constexpr std::size_t kChunk = 1 << 14;
    T buffer[kChunk];
    for (std::size_t done = 0; done < out.size();) {
      std::size_t n = std::min(kChunk, out.size() - done);
      read_elements(source, info, first + static_cast<std::int64_t>(done), std::span(buffer, n));
      for (std::size_t i = 0; i < n; ++i) out[done + i] = buffer[i];
      done += n;
    }
  };
  switch (info.dtype) {
    case DType::kInt16:
      widen.operator()<std::int16_t>();
      return;
    case DType::kInt32:
      widen.operator()<std::int32_t>();
      return;
    case DType::kInt64:
      read_elements(source, info, first, out);
      return;
    default:
      fail_at(source.name(), 0, "'{}' is {}, expected an integer array (int16, int32 or int64)",
              info.name, dtype_name(info.dtype));
  }
}

// --- writing
// ----------------------------------------------------------------------------------------

std::string make_npy_header(DType dtype, const std::vector<std::int64_t>& shape) {
  std::string dims;
  for (std::int64_t dim : shape) dims += fmt::format("{}, ", dim);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (2, 3), but (5,) for one dimension
  if (shape.size() == 1) dims.pop_back();
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                 dtype_descr(dtype), dims);
  int major = 1;
  std::size_t prefix = 10;
  // Pad with spaces and end with '\n' so the data starts on a 64-byte boundary, as NumPy does.
  std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 0xffff) {
    major = 2;
    prefix = 12;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  std::string header(kNpyMagic);
  header.push_back(static_cast<char>(major));
  header.push_back(0);
  put_le(header, total - prefix, major == 1 ? 2 : 4);
  header += dict;
  header.append(total - header.size() - 1, ' ');
  header.push_back('\n');
  return header;
}

namespace {

// Slicing-by-8 tables for the reflected CRC-32 polynomial 0xedb88320.
struct Crc32Tables {
  std::uint32_t t[8][256];
  constexpr Crc32Tables() : t{} {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};
constexpr Crc32Tables kCrcTables;

// The fields a member's local header and its central directory entry share, from "version
// needed" to "extra field length": a stored member without flags, at the fixed date and time.
// `size_field` is its size, or kMax32 when the zip64 extra field holds the size.
void put_member_fields(std::string& out, int version_needed, std::uint32_t crc,
                       std::uint64_t size_field, std::size_t name_size, std::size_t extra_size) {
  put_le(out, version_needed, 2);
  put_le(out, 0, 2);  // flags
  put_le(out, 0, 2);  // method: stored
  put_le(out, kDosTime, 2);
  put_le(out, kDosDate, 2);
  put_le(out, crc, 4);
  put_le(out, size_field, 4);  // compressed
  put_le(out, size_field, 4);  // uncompressed
  put_le(out, name_size, 2);
  put_le(out, extra_size, 2);
}

// A zip64 extended-information extra field holding `values` (sizes, then the offset), or
// nothing when there are none.
std::string zip64_extra(const std::vector<std::uint64_t>& values) {
  std::string extra;
  if (values.empty()) return extra;
  put_le(extra, kZip64ExtraId, 2);
  put_le(extra, 8 * values.size(), 2);
  for (std::uint64_t value : values) put_le(extra, value, 8);
  return extra;
}

}  // namespace

std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc) {
  const auto& t = kCrcTables.t;
  std::uint32_t c = ~crc;
  const std::byte* p = bytes.data();
  std::size_t n = bytes.size();
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    std::uint32_t low = static_cast<std::uint32_t>(word) ^ c;
    std::uint32_t high = static_cast<std::uint32_t>(word >> 32);
    c = t[7][low & 0xff] ^ t[6][(low >> 8) & 0xff] ^ t[5][(low >> 16) & 0xff] ^ t[4][low >> 24] ^
        t[3][high & 0xff] ^ t[2][(high >> 8) & 0xff] ^ t[1][(high >> 16) & 0xff] ^ t[0][high >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = t[0][(c ^ std::to_integer<std::uint32_t>(*p++)) & 0xff] ^ (c >> 8);
  return ~c;
}

void write_npy(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape,
               std::span<const std::byte> data) {
  OutputStream out(path);
  out.write(make_npy_header(dtype, shape));
  out.write(data);
  out.commit();
}

NpzWriter::NpzWriter(const std::string& path, bool force_zip64)
    : out_(path), force_zip64_(force_zip64) {}

NpzWriter::~NpzWriter() = default;

std::uint64_t NpzWriter::data_bytes(DType dtype, const std::vector<std::int64_t>& shape) const {
  if (finished_) fail("internal: NpzWriter::add after finish");
  std::uint64_t count = 1;
  for (std::int64_t dim : shape) count *= static_cast<std::uint64_t>(dim);
  return count * dtype_size(dtype);
}

void NpzWriter::begin_member(std::string_view name, const std::string& npy_header,
                             std::uint64_t bytes, std::uint32_t crc) {
  Entry entry{std::string(name) + ".npy", crc, npy_header.size() + bytes, out_.position()};
  bool zip64 = force_zip64_ || entry.size >= kMax32;
  std::string extra = zip64 ? zip64_extra({entry.size, entry.size}) : "";
  std::string local;
  put_le(local, kLocalHeaderSignature, 4);
  put_member_fields(local, zip64 ? 45 : 20, entry.crc, zip64 ? kMax32 : entry.size,
                    entry.name.size(), extra.size());
  local += entry.name;
  local += extra;
  out_.write(local);
  out_.write(npy_header);
  entries_.push_back(std::move(entry));
}

void NpzWriter::add(std::string_view name, DType dtype, const std::vector<std::int64_t>& shape,
                    std::span<const std::byte> data) {
  if (data_bytes(dtype, shape) != data.size()) {
    fail("internal: array '{}' of shape {} has {} bytes of {}", name, format_shape(shape),
         data.size(), dtype_name(dtype));
  }
  std::string header = make_npy_header(dtype, shape);
  begin_member(name, header, data.size(),
               crc32(data, crc32(std::as_bytes(std::span(header.data(), header.size())))));
  out_.write(data);
}

void NpzWriter::add_generated(
    std::string_view name, DType dtype, const std::vector<std::int64_t>& shape,
    std::size_t chunk_bytes, const std::function<void(std::uint64_t, std::span<std::byte>)>& fill) {
  const std::uint64_t size = data_bytes(dtype, shape);
  if (chunk_bytes == 0) fail("internal: NpzWriter::add_generated with chunks of 0 bytes");
  std::vector<std::byte> chunk(
      static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, size)));
  auto each_chunk = [&](const auto& use) {
    for (std::uint64_t offset = 0; offset < size; offset += chunk_bytes) {
      std::span<std::byte> out(chunk.data(), static_cast<std::size_t>(std::min<std::uint64_t>(
                                                 chunk_bytes, size - offset)));
      fill(offset, out);
      use(out);
    }
  };
  std::string header = make_npy_header(dtype, shape);
  std::uint32_t crc = crc32(std::as_bytes(std::span(header.data(), header.size())));
  each_chunk([&](std::span<const std::byte> bytes) { crc = crc32(bytes, crc); });
  begin_member(name, header, size, crc);
  each_chunk([&](std::span<const std::byte> bytes) { out_.write(bytes); });
}

void NpzWriter::finish() {
  if (finished_) return;
  std::uint64_t directory_offset = out_.position();
  std::string directory;
  for (const Entry& entry : entries_) {
    bool big_size = force_zip64_ || entry.size >= kMax32;
    bool big_offset = force_zip64_ || entry.offset >= kMax32;
    std::vector<std::uint64_t> zip64_values;
    if (big_size) zip64_values = {entry.size, entry.size};
    if (big_offset) zip64_values.push_back(entry.offset);
    std::string extra = zip64_extra(zip64_values);
    int version = extra.empty() ? 20 : 45;
    put_le(directory, kCentralHeaderSignature, 4);
    put_le(directory, (3 << 8) | version, 2);  // made by: Unix
    put_member_fields(directory, version, entry.crc, big_size ? kMax32 : entry.size,
                      entry.name.size(), extra.size());
    put_le(directory, 0, 2);               // comment
    put_le(directory, 0, 2);               // disk
    put_le(directory, 0, 2);               // internal attributes
    put_le(directory, 0100644u << 16, 4);  // external: regular file, rw-r--r--
    put_le(directory, big_offset ? kMax32 : entry.offset, 4);
    directory += entry.name;
    directory += extra;
  }
  std::uint64_t directory_size = directory.size();
  std::uint64_t entries = entries_.size();
  bool zip64 =
      force_zip64_ || entries >= kMax16 || directory_size >= kMax32 || directory_offset >= kMax32;
  std::string end;
  if (zip64) {
    std::uint64_t record_offset = directory_offset + directory_size;
    put_le(end, kZip64EndSignature, 4);
    put_le(end, 44, 8);  // size of the rest of the record
    put_le(end, (3 << 8) | 45, 2);
    put_le(end, 45, 2);
    put_le(end, 0, 4);
    put_le(end, 0, 4);
    put_le(end, entries, 8);
    put_le(end, entries, 8);
    put_le(end, directory_size, 8);
    put_le(end, directory_offset, 8);
    put_le(end, kZip64LocatorSignature, 4);
    put_le(end, 0, 4);
    put_le(end, record_offset, 8);
    put_le(end, 1, 4);
  }
  put_le(end, kEndSignature, 4);
  put_le(end, 0, 2);
  put_le(end, 0, 2);
  put_le(end, zip64 ? kMax16 : entries, 2);
  put_le(end, zip64 ? kMax16 : entries, 2);
  put_le(end, zip64 ? kMax32 : directory_size, 4);
  put_le(end, zip64 ? kMax32 : directory_offset, 4);
  put_le(end, 0, 2);  // comment
  out_.write(directory);
  out_.write(end);
  out_.commit();
  finished_ = true;
}

}  // namespace rtb::payload
