// Byte encodings for text that must travel inside a Kubernetes manifest: gzip (zlib's deflate
// with a gzip header, so `gzip -dc` reads it back) and base64 (RFC 4648, so `base64 -d` does).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "rtb/base/io.h"

namespace rtb {

// The gzip stream of `data` at the best compression. Throws rtb::Error if zlib fails.
std::string gzip_compress(std::string_view data);
// `data` decompressed from a gzip stream. Throws rtb::Error on a corrupt or truncated stream.
std::string gzip_decompress(std::string_view data);

// Whether `prefix` starts with gzip's magic bytes (1f 8b).
bool is_gzip(std::string_view prefix);
// The decompressed bytes of the gzip stream `inner` gives, read in order (read(); no random
// access), in bounded memory. Concatenated members are read as one stream, as gzip -d does.
// read() throws rtb::Error naming the input for a corrupt or truncated stream.
std::unique_ptr<ByteSource> gunzip_source(std::unique_ptr<ByteSource> inner);

// Base64 of `data` with `=` padding, a newline after every `line_width` characters and at the end
// (line_width 0: one line, no newline).
std::string base64_encode(std::string_view data, std::size_t line_width = 76);
// The bytes of base64 `text` (RFC 4648, `=` padding), line breaks ignored: base64_encode's inverse
// for any line width. Throws rtb::Error on any other character or a length or padding that is
// not base64's.
std::string base64_decode(std::string_view text);

}  // namespace rtb
