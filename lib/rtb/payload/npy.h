// NumPy .npy and uncompressed .npz files: reading (from a byte span or, in blocks, from a file)
// and writing. Supports format versions 1.0, 2.0 and 3.0, C order, and the little-endian dtypes
// the payload uses: int16, int32, int64, float32, float64, bool and uint8. An .npz is a zip
// archive of .npy members; only stored (uncompressed) members are read, as numpy.savez writes
// them, including zip64 archives and members over 4 GiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/io.h"  // OutputStream

namespace rtb::payload {

enum class DType { kInt16, kInt32, kInt64, kFloat32, kFloat64, kBool, kUInt8 };

std::size_t dtype_size(DType dtype);
// NumPy's name ("int16", "float32", "bool", ...).
std::string_view dtype_name(DType dtype);
// NumPy's descr string ("<i2", "|b1", ...).
std::string_view dtype_descr(DType dtype);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<std::int16_t>() {
  return DType::kInt16;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::kUInt8;
}

// "[64, 65536, 60, 10]".
std::string format_shape(const std::vector<std::int64_t>& shape);

// One array: where its C-order data lies in the source.
struct ArrayInfo {
  std::string name;  // npz member without ".npy"; empty for a plain .npy file
  DType dtype = DType::kUInt8;
  std::vector<std::int64_t> shape;
  std::int64_t count = 0;         // number of elements
  std::uint64_t data_offset = 0;  // in the source
  std::uint64_t data_bytes = 0;   // count * dtype_size
  int format_version = 1;         // .npy major version
};

// Parses the .npy header of the member that occupies [offset, offset + size) of `source` and
// checks that exactly its data follows. `what` names the array in messages.
ArrayInfo read_npy_info(const ByteSource& source, std::uint64_t offset, std::uint64_t size,
                        const std::string& what);

// The arrays of an .npz (one per .npy member, in archive order) or of a plain .npy (one array with
// an empty name), told apart by their first bytes. Throws rtb::Error naming the source and the
// member for anything it cannot read: truncation, compressed members, bad headers, unsupported
// dtypes, Fortran order.
std::vector<ArrayInfo> list_arrays(const ByteSource& source);

// The array called `name` (an npz member without ".npy"), or nullptr.
const ArrayInfo* find_array(const std::vector<ArrayInfo>& arrays, std::string_view name);

// Reads elements [first, first + count) of `info` into `out` (count * dtype_size bytes); the
// array's dtype must be `expected`.
void read_elements_raw(const ByteSource& source, const ArrayInfo& info, std::int64_t first,
                       std::int64_t count, DType expected, std::span<std::byte> out);
// The same, typed: reads out.size() elements starting at `first`.
template <typename T>
void read_elements(const ByteSource& source, const ArrayInfo& info, std::int64_t first,
                   std::span<T> out) {
  read_elements_raw(source, info, first, static_cast<std::int64_t>(out.size()), dtype_of<T>(),
                    std::as_writable_bytes(out));
}

// Reads elements of an integer array (int16, int32 or int64) as int64, whatever its dtype.
void read_integers(const ByteSource& source, const ArrayInfo& info, std::int64_t first,
                   std::span<std::int64_t> out);

// The .npy header (magic, version, dict, padding) for `shape` of `dtype`, padded so the data
// starts on a 64-byte boundary; version 1.0, or 2.0 if the dict does not fit in 64 KiB.
std::string make_npy_header(DType dtype, const std::vector<std::int64_t>& shape);

// CRC-32 (zip / zlib polynomial), continued from `crc` (0 to start).
std::uint32_t crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// Writes one .npy file.
void write_npy(const std::string& path, DType dtype, const std::vector<std::int64_t>& shape,
               std::span<const std::byte> data);

// Writes an uncompressed .npz (what numpy.savez writes; numpy.load reads it): members are stored,
// with zip64 records where a size or offset needs them. Timestamps are fixed (1980-01-01), so the
// same arrays always give the same bytes.
class NpzWriter {
 public:
  // force_zip64 writes zip64 records for every member (as numpy.savez does for local headers),
  // also where 32-bit fields would do; readers must accept both.
  explicit NpzWriter(const std::string& path, bool force_zip64 = false);
  ~NpzWriter();
  NpzWriter(const NpzWriter&) = delete;
  NpzWriter& operator=(const NpzWriter&) = delete;

  // Adds member `name`.npy holding `data` (C order, count * dtype_size bytes).
  void add(std::string_view name, DType dtype, const std::vector<std::int64_t>& shape,
           std::span<const std::byte> data);
  template <typename T>
  void add(std::string_view name, const std::vector<std::int64_t>& shape, std::span<const T> data) {
    add(name, dtype_of<T>(), shape, std::as_bytes(data));
  }
  // Adds member `name`.npy whose data (count * dtype_size bytes) `fill` makes a chunk at a time:
  // fill(offset, out) writes the data's bytes [offset, offset + out.size()), each chunk
  // `chunk_bytes` long but the last. The data is never held whole: `fill` runs twice over it,
  // in order, once for the CRC that goes before the data and once to write it, and must make the
  // same bytes both times.
  void add_generated(std::string_view name, DType dtype, const std::vector<std::int64_t>& shape,
                     std::size_t chunk_bytes,
                     const std::function<void(std::uint64_t, std::span<std::byte>)>& fill);
  // Writes the central directory and moves the file into place.
  void finish();

 private:
  // The member's local header and npy header: the data follows.
  void begin_member(std::string_view name, const std::string& npy_header, std::uint64_t bytes,
                    std::uint32_t crc);
  std::uint64_t data_bytes(DType dtype, const std::vector<std::int64_t>& shape) const;
  struct Entry {
    std::string name;
    std::uint32_t crc;
    std::uint64_t size;
    std::uint64_t offset;
  };
  OutputStream out_;
  bool force_zip64_;
  std::vector<Entry> entries_;
  bool finished_ = false;
};

}  // namespace rtb::payload
