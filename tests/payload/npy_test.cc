#include "rtb/payload/npy.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

template <typename T>
std::vector<T> read_all(const ByteSource& source, const ArrayInfo& info) {
  std::vector<T> out(info.count);
  read_elements(source, info, 0, std::span(out));
  return out;
}

class NpyFiles : public ::testing::Test {
 protected:
  test::TempDir temp_{"rtb_npy_test"};
  fs::path dir_ = temp_.path();
};

TEST(NpyRead, NumpySavezWithEveryDtype) {
  FileSource source(testdata("payload_numpy_dtypes.npz"), FileAccess::kRandom);
  std::vector<ArrayInfo> arrays = list_arrays(source);
  ASSERT_EQ(arrays.size(), 9u);

  const ArrayInfo* i16 = find_array(arrays, "i16");
  ASSERT_NE(i16, nullptr);
  EXPECT_EQ(i16->dtype, DType::kInt16);
  EXPECT_THAT(i16->shape, ElementsAre(2, 3));
  EXPECT_THAT(read_all<std::int16_t>(source, *i16), ElementsAre(1, -2, 3, -32768, 32767, 0));

  const ArrayInfo* i32 = find_array(arrays, "i32");
  ASSERT_NE(i32, nullptr);
  EXPECT_THAT(i32->shape, ElementsAre(3, 4));
  std::vector<std::int32_t> i32_values = read_all<std::int32_t>(source, *i32);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(i32_values[i], i - 5);

  EXPECT_THAT(read_all<std::int64_t>(source, *find_array(arrays, "i64")),
              ElementsAre(1LL << 40, -1, 7));
  std::vector<float> f32 = read_all<float>(source, *find_array(arrays, "f32"));
  EXPECT_EQ(f32[0], 0.5f);
  EXPECT_EQ(f32[1], -1.25f);
  EXPECT_TRUE(std::isinf(f32[2]));
  EXPECT_THAT(read_all<double>(source, *find_array(arrays, "f64")),
              ElementsAre(0.0, 0.25, 0.5, 0.75, 1.0));
  EXPECT_EQ(find_array(arrays, "b")->dtype, DType::kBool);
  EXPECT_EQ(find_array(arrays, "u8")->dtype, DType::kUInt8);
  EXPECT_THAT(read_all<std::uint8_t>(source, *find_array(arrays, "u8")), ElementsAre(0, 255));
  const ArrayInfo* empty = find_array(arrays, "empty");
  EXPECT_THAT(empty->shape, ElementsAre(2, 0));
  EXPECT_EQ(empty->count, 0);
  EXPECT_TRUE(find_array(arrays, "scalar")->shape.empty());
  EXPECT_EQ(find_array(arrays, "scalar")->count, 1);
  EXPECT_EQ(find_array(arrays, "missing"), nullptr);
}

TEST(NpyRead, FormatVersionsOneTwoAndThree) {
  for (int version : {1, 2, 3}) {
    FileSource source(testdata("payload_numpy_v" + std::to_string(version) + ".npy"),
                      FileAccess::kRandom);
    std::vector<ArrayInfo> arrays = list_arrays(source);
    ASSERT_EQ(arrays.size(), 1u);
    EXPECT_EQ(arrays[0].name, "");
    EXPECT_EQ(arrays[0].format_version, version);
  }
  FileSource v3(testdata("payload_numpy_v3.npy"), FileAccess::kRandom);
  ArrayInfo info = list_arrays(v3)[0];
  EXPECT_THAT(read_all<std::int16_t>(v3, info), ElementsAre(1, -2, 3, -32768, 32767, 0));
}

TEST(NpyRead, ReadsBlocksAndWidensIntegers) {
  FileSource source(testdata("payload_numpy_dtypes.npz"), FileAccess::kRandom);
  std::vector<ArrayInfo> arrays = list_arrays(source);
  std::vector<std::int64_t> wide(3);
  read_integers(source, *find_array(arrays, "i16"), 2, wide);
  EXPECT_THAT(wide, ElementsAre(3, -32768, 32767));
  read_integers(source, *find_array(arrays, "i32"), 9, wide);
  EXPECT_THAT(wide, ElementsAre(4, 5, 6));
  EXPECT_THROW(read_integers(source, *find_array(arrays, "f32"), 0, std::span(wide).first(1)),
               Error);
  std::vector<std::int16_t> too_many(7);
  EXPECT_THROW(read_elements(source, *find_array(arrays, "i16"), 0, std::span(too_many)), Error);
  std::vector<std::int32_t> wrong_type(1);
  EXPECT_THAT(test::what_of([&] {
                read_elements(source, *find_array(arrays, "i16"), 0, std::span(wrong_type));
              }),
              HasSubstr("'i16' is int16, expected int32"));
}

TEST(NpyRead, RejectsWhatItCannotReadWithClearMessages) {
  const std::pair<const char*, const char*> files_and_messages[] = {
      {"payload_numpy_compressed.npz", "member 'i32.npy' is compressed"},
      {"payload_numpy_fortran.npy", "Fortran-order"},
      {"payload_numpy_bigendian.npy", "big-endian dtype '>i4'"},
      {"payload_numpy_uint16.npy", "unsupported dtype '<u2'"},
  };
  for (const auto& [file, message] : files_and_messages) {
    EXPECT_THAT(test::what_of([&, path = testdata(file)] {
                  list_arrays(FileSource(path, FileAccess::kRandom));
                }),
                HasSubstr(message));
  }
  std::string text = "layer,target\n0,1.5\n";
  EXPECT_THAT(test::what_of([&] { list_arrays(MemorySource(bytes_of(text), "t.csv")); }),
              HasSubstr("t.csv: not a NumPy .npy or .npz file"));
  EXPECT_THAT(test::what_of([] { list_arrays(MemorySource(std::string_view(), "e")); }),
              HasSubstr("empty file"));
  EXPECT_THAT(test::what_of([] { FileSource source(RTB_TESTDATA_DIR, FileAccess::kRandom); }),
              HasSubstr("is a directory"));
  EXPECT_THAT(
      test::what_of([] { FileSource source(testdata("no_such_file.npz"), FileAccess::kRandom); }),
      HasSubstr("cannot open"));
}

TEST(NpyRead, ExtraBytesAfterTheDataAreAnError) {
  std::string npy = read_file(testdata("payload_numpy_v1.npy")) + "xx";
  EXPECT_THAT(test::what_of([&] { list_arrays(MemorySource(bytes_of(npy), "x.npy")); }),
              HasSubstr("2 bytes after the data"));
}

// Every truncation of a valid file fails with an rtb::Error (never a crash or a bad read).
TEST(NpyRead, EveryTruncationIsAnError) {
  for (const char* name :
       {"payload_numpy_dtypes.npz", "payload_numpy_v1.npy", "payload_numpy_v2.npy"}) {
    std::string whole = read_file(testdata(name));
    for (std::size_t length = 0; length < whole.size(); ++length) {
      std::string part = whole.substr(0, length);
      EXPECT_THROW(list_arrays(MemorySource(bytes_of(part), name)), Error)
          << name << " cut at " << length;
    }
  }
}

// Flipping bytes anywhere gives either a readable file or an rtb::Error; reading every array of
// what was accepted stays inside the buffer.
TEST(NpyRead, CorruptedBytesNeverCrash) {
  std::string whole = read_file(testdata("payload_numpy_dtypes.npz"));
  std::uint64_t state = 12345;
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string copy = whole;
    for (int flips = 0; flips < 3; ++flips) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      copy[(state >> 33) % copy.size()] = static_cast<char>(state >> 20);
    }
    MemorySource source(bytes_of(copy), "fuzz");
    try {
      for (const ArrayInfo& info : list_arrays(source)) {
        std::vector<std::byte> data(info.data_bytes);
        read_elements_raw(source, info, 0, info.count, info.dtype, data);
      }
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(accepted, 0);  // flips in the array data leave the file readable
}

TEST(NpyWrite, HeaderMatchesNumpyAndIsAligned) {
  std::string numpy_file = read_file(testdata("payload_numpy_v1.npy"));
  std::string header = make_npy_header(DType::kInt32, {3, 4});
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_EQ(numpy_file.substr(0, header.size()), header);
  EXPECT_THAT(make_npy_header(DType::kFloat32, {5}), HasSubstr("'shape': (5,), }"));
  EXPECT_THAT(make_npy_header(DType::kBool, {}), HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(make_npy_header(DType::kBool, {}), HasSubstr("'shape': (), }"));
}

TEST(NpyWrite, Crc32KnownValues) {
  std::string check = "123456789";
  EXPECT_EQ(crc32(bytes_of(check)), 0xcbf43926u);
  EXPECT_EQ(crc32({}), 0u);
  std::string long_text(1000, 'a');
  std::uint32_t whole = crc32(bytes_of(long_text));
  std::uint32_t pieces =
      crc32(bytes_of(long_text.substr(500)), crc32(bytes_of(long_text.substr(0, 500))));
  EXPECT_EQ(whole, pieces);
}

TEST_F(NpyFiles, NpzWriterRoundTripsAndWorksWithOrWithoutZip64) {
  for (bool zip64 : {false, true}) {
    fs::path path = dir_ / (zip64 ? "z64.npz" : "plain.npz");
    std::vector<std::int16_t> routed = {0, 1, -1, 511, 7, 8};
    std::vector<float> mask = {1.0f, 0.0f};
    std::vector<std::int32_t> empty;
    NpzWriter writer(path, zip64);
    writer.add<std::int16_t>("routed_experts", {1, 2, 3}, routed);
    writer.add<float>("completion_mask", {1, 2}, mask);
    writer.add<std::int32_t>("prompt_ids", {1, 0}, empty);
    EXPECT_FALSE(fs::exists(path));  // written to a temporary file until finish()
    writer.finish();
    FileSource source(path, FileAccess::kRandom);
    std::vector<ArrayInfo> arrays = list_arrays(source);
    ASSERT_EQ(arrays.size(), 3u);
    EXPECT_EQ(arrays[0].name, "routed_experts");
    EXPECT_THAT(arrays[0].shape, ElementsAre(1, 2, 3));
    EXPECT_EQ(read_all<std::int16_t>(source, arrays[0]), routed);
    EXPECT_EQ(read_all<float>(source, arrays[1]), mask);
    EXPECT_THAT(arrays[2].shape, ElementsAre(1, 0));
    // local header (30 bytes, the name, the zip64 extra) and the 128-byte .npy header
    EXPECT_EQ(arrays[0].data_offset, (zip64 ? 68u : 48u) + 128u);
  }
  // Zip64 costs only the extra records.
  EXPECT_GT(fs::file_size(dir_ / "z64.npz"), fs::file_size(dir_ / "plain.npz"));
}

TEST_F(NpyFiles, AGeneratedMemberIsTheFileItsDataWouldMake) {
  // 1,000 int16 made 64, 333 or 5,000 bytes at a time (the last chunk short, or one chunk for
  // all): the file is byte for byte the one add() writes from the whole array.
  std::vector<std::int16_t> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::int16_t>(i * 37 - 500);
  fs::path expected_path = dir_ / "whole.npz";
  NpzWriter whole(expected_path);
  whole.add<std::int16_t>("a", {10, 100}, data);
  whole.add<std::int16_t>("b", {1000}, data);
  whole.finish();
  const std::string expected = read_file(expected_path);
  for (std::size_t chunk : {64u, 334u, 5000u}) {
    fs::path path = dir_ / fmt::format("generated_{}.npz", chunk);
    NpzWriter writer(path);
    writer.add<std::int16_t>("a", {10, 100}, data);
    std::vector<std::uint64_t> offsets;
    writer.add_generated(
        "b", DType::kInt16, {1000}, chunk, [&](std::uint64_t offset, std::span<std::byte> out) {
          offsets.push_back(offset);
          std::memcpy(out.data(), reinterpret_cast<const std::byte*>(data.data()) + offset,
                      out.size());
        });
    writer.finish();
    EXPECT_EQ(read_file(path), expected) << chunk;
    const std::size_t chunks = (2000 + chunk - 1) / chunk;
    ASSERT_EQ(offsets.size(), 2 * chunks) << "once for the CRC, once to write";
    for (std::size_t i = 0; i < offsets.size(); ++i) EXPECT_EQ(offsets[i], (i % chunks) * chunk);
  }
}

TEST_F(NpyFiles, AbandonedWriterLeavesNoFile) {
  fs::path path = dir_ / "abandoned.npz";
  {
    NpzWriter writer(path);
    std::vector<std::int32_t> v = {1};
    writer.add<std::int32_t>("x", {1}, v);
  }
  EXPECT_FALSE(fs::exists(path));
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 0);
}

TEST_F(NpyFiles, WriteNpyRoundTrips) {
  fs::path path = dir_ / "a.npy";
  std::vector<double> values = {1.5, -2.0, std::numeric_limits<double>::max()};
  write_npy(path, DType::kFloat64, {3}, std::as_bytes(std::span(values)));
  FileSource source(path, FileAccess::kRandom);
  std::vector<ArrayInfo> arrays = list_arrays(source);
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(read_all<double>(source, arrays[0]), values);
}

TEST(NpyFormat, NamesAndShapes) {
  EXPECT_EQ(format_shape({64, 65536, 60, 10}), "[64, 65536, 60, 10]");
  EXPECT_EQ(format_shape({}), "[]");
  EXPECT_EQ(dtype_name(DType::kInt16), "int16");
  EXPECT_EQ(dtype_descr(DType::kFloat64), "<f8");
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
}

}  // namespace
}  // namespace rtb::payload
