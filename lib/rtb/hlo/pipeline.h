// The pipelined mode of split_statements (scan.h): on a contiguous source, threads scan pieces
// of the text in parallel while the callback runs on the caller's thread, in order, seeing what
// one thread would have given (see pipeline.cc for how the pieces are cut and checked).
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "rtb/hlo/scan.h"

namespace rtb::hlo {

// split_statements with `scanners` (>= 2) scanning threads; `source` must be contiguous.
SplitEnd split_pipelined(ByteSource& source, const SplitOptions& options, int scanners,
                         const std::function<void(const Statement&)>& on_statement,
                         StatementFilter* filter);

// Where the piece that starts at or after offset `from` begins. A guess, which the scan checks:
// the start of the line after the next line that starts with '}' (where a computation ends),
// provided that line is blank or starts at its first column; text.size() if there is none.
std::size_t next_piece_start(std::string_view text, std::size_t from);

}  // namespace rtb::hlo
