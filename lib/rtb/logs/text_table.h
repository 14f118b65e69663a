// Text tables for people: columns padded to their widest cell, two blanks apart.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rtb::logs {

// Aligned text columns; column 0 is left-aligned, the others right-aligned unless marked.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> left = {})
      : left_(std::move(left)) {
    rows_.push_back(std::move(header));
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;  // each row a line, trailing blanks removed

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> left_;
};

}  // namespace rtb::logs
