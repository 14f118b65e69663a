#include "rtb/logs/text_table.h"

#include <algorithm>

namespace rtb::logs {

std::string TextTable::str() const {
  std::vector<std::size_t> width;
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      bool left = i == 0 || (i < left_.size() && left_[i]);
      std::size_t pad = width[i] - row[i].size();
      if (i > 0) line += "  ";
      if (left) {
        line += row[i];
        if (i + 1 < row.size()) line += std::string(pad, ' ');
      } else {
        line += std::string(pad, ' ') + row[i];
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace rtb::logs
