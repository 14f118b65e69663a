#include "rtb/base/compress.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <utility>

#include "rtb/base/error.h"

namespace rtb {
namespace {

// windowBits 15 + 16: a gzip header and trailer instead of zlib's.
constexpr int kGzipWindowBits = 15 + 16;

class GunzipSource final : public ByteSource {
 public:
  explicit GunzipSource(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {
    if (inflateInit2(&stream_, kGzipWindowBits) != Z_OK) {
      fail_at(inner_->name(), 0, "gzip: cannot start decompressing");
    }
  }
  ~GunzipSource() override { inflateEnd(&stream_); }
  GunzipSource(const GunzipSource&) = delete;
  GunzipSource& operator=(const GunzipSource&) = delete;
  const std::string& name() const override { return inner_->name(); }

  std::size_t read(char* buffer, std::size_t capacity) override {
    std::size_t produced = 0;
    while (produced == 0 && capacity > 0) {
      if (stream_.avail_in == 0) {
        std::size_t n = inner_->read(input_.data(), input_.size());
        if (n == 0) {
          if (member_open_) fail_at(name(), 0, "gzip: a truncated stream");
          return 0;
        }
        stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
        stream_.avail_in = static_cast<uInt>(n);
      }
      member_open_ = true;
      stream_.next_out = reinterpret_cast<Bytef*>(buffer);
      stream_.avail_out = static_cast<uInt>(std::min<std::size_t>(capacity, 1u << 30));
      int status = inflate(&stream_, Z_NO_FLUSH);
      produced = static_cast<std::size_t>(reinterpret_cast<char*>(stream_.next_out) - buffer);
      if (status == Z_STREAM_END) {
        member_open_ = false;
        if (inflateReset(&stream_) != Z_OK) fail_at(name(), 0, "gzip: cannot read on");
      } else if (status != Z_OK && status != Z_BUF_ERROR) {
        fail_at(name(), 0, "gzip: a corrupt stream ({})",
                stream_.msg != nullptr ? stream_.msg : "inflate failed");
      }
    }
    return produced;
  }

 private:
  std::unique_ptr<ByteSource> inner_;
  z_stream stream_{};
  std::array<char, 1 << 16> input_{};
  bool member_open_ = false;  // inside a member: the input may not end here
};

}  // namespace

bool is_gzip(std::string_view prefix) {
  return prefix.size() >= 2 && prefix[0] == '\x1f' && prefix[1] == '\x8b';
}

std::unique_ptr<ByteSource> gunzip_source(std::unique_ptr<ByteSource> inner) {
  return std::make_unique<GunzipSource>(std::move(inner));
}

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

std::string base64_decode(std::string_view text) {
  auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  unsigned group = 0;  // the current quantum's bits
  int filled = 0;      // characters of it read
  int padding = 0;     // `=` at its end
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') continue;
    int value = c == '=' ? 0 : value_of(c);
    if (value < 0) throw Error(fmt::format("base64: byte {}: not a base64 character", i));
    if (c == '=') {
      if (filled < 2) throw Error(fmt::format("base64: byte {}: padding too early", i));
      ++padding;
    } else if (padding > 0) {
      throw Error(fmt::format("base64: byte {}: data after padding", i));
    }
    group = group << 6 | static_cast<unsigned>(value);
    if (++filled == 4) {
      out += static_cast<char>(group >> 16 & 0xff);
      if (padding < 2) out += static_cast<char>(group >> 8 & 0xff);
      if (padding < 1) out += static_cast<char>(group & 0xff);
      group = 0;
      filled = 0;
      if (padding > 0) padding = -1;  // the quantum that ends the text
    } else if (padding < 0) {
      throw Error(fmt::format("base64: byte {}: data after padding", i));
    }
  }
  if (filled != 0) throw Error("base64: the length is not a multiple of 4");
  return out;
}

}  // namespace rtb
