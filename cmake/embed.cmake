# Turns a file into a C++ source that defines `std::string_view <SYMBOL>()` returning its bytes.
# Usage: cmake -DINPUT=file -DOUTPUT=out.cc -DSYMBOL=name -P embed.cmake
# Bytes are written as a hex array, so any content (quotes, `)"`, NULs) survives.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR byte_count "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x[0-9a-f][0-9a-f],){24}" "\\0\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed.cmake. Do not edit.\n"
  "#include <string_view>\n"
  "namespace rtb::embedded {\n"
  "namespace {\nconstexpr unsigned char kBytes[] = {\n${bytes}0};\n}  // namespace\n"
  "std::string_view ${SYMBOL}() {\n"
  "  return {reinterpret_cast<const char*>(kBytes), ${byte_count}};\n}\n"
  "}  // namespace rtb::embedded\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
