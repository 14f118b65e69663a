#include "rtb/base/compress.h"

#include <zlib.h>

#include <array>

#include "rtb/base/error.h"

namespace rtb {
namespace {

// windowBits 15 + 16: a gzip header and trailer instead of zlib's.
constexpr int kGzipWindowBits = 15 + 16;

}  // namespace

std::string gzip_compress(std::string_view data) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 9,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    fail("gzip: cannot start compressing");
  }
  std::string out(deflateBound(&stream, static_cast<uLong>(data.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int status = deflate(&stream, Z_FINISH);
  std::size_t written = stream.total_out;
  deflateEnd(&stream);
  if (status != Z_STREAM_END) fail("gzip: compressing {} bytes failed ({})", data.size(), status);
  out.resize(written);
  return out;
}

std::string gzip_decompress(std::string_view data) {
  z_stream stream{};
  if (inflateInit2(&stream, kGzipWindowBits) != Z_OK) fail("gzip: cannot start decompressing");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  std::string out;
  std::array<char, 1 << 16> chunk{};
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk.data());
    stream.avail_out = static_cast<uInt>(chunk.size());
    status = inflate(&stream, Z_NO_FLUSH);
    if (status == Z_OK || status == Z_STREAM_END) {
      out.append(chunk.data(), chunk.size() - stream.avail_out);
    }
    if (status == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      status = Z_BUF_ERROR;  // the input ended before the stream did
    }
  }
  inflateEnd(&stream);
  if (status != Z_STREAM_END) fail("gzip: a corrupt or truncated stream");
  return out;
}

std::string base64_encode(std::string_view data, std::size_t line_width) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t encoded = (data.size() + 2) / 3 * 4;
  out.reserve(encoded + (line_width ? encoded / line_width + 1 : 0));
  std::size_t column = 0;
  auto put = [&](char c) {
    out += c;
    if (line_width && ++column == line_width) {
      out += '\n';
      column = 0;
    }
  };
  for (std::size_t i = 0; i < data.size(); i += 3) {
    std::size_t left = data.size() - i;
    unsigned value = static_cast<unsigned char>(data[i]) << 16;
    if (left > 1) value |= static_cast<unsigned char>(data[i + 1]) << 8;
    if (left > 2) value |= static_cast<unsigned char>(data[i + 2]);
    put(kAlphabet[(value >> 18) & 63]);
    put(kAlphabet[(value >> 12) & 63]);
    put(left > 1 ? kAlphabet[(value >> 6) & 63] : '=');
    put(left > 2 ? kAlphabet[value & 63] : '=');
  }
  if (line_width && column != 0) out += '\n';
  return out;
}

}  // namespace rtb
