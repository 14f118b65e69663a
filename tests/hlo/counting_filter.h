// A statement filter for tests of the pipelined HLO splitter (tests/hlo/pipeline_test.cc,
// fuzz/hlo_pieces_fuzz.cc): it drops the statements a predicate names and counts them on the
// next statement it keeps (StatementNote::count), so that the counts show whether the filters of
// the pieces add up to what one filter notes. Kept instructions get kind 1 (2 for a ROOT) and
// their name as key.
#pragma once

#include <cstdint>
#include <memory>

#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo::fixtures {

class CountingFilter final : public StatementFilter {
 public:
  using Drop = bool (*)(const Statement&);
  explicit CountingFilter(Drop drop) : drop_(drop) {}

  bool keep(const Statement& statement, StatementNote& note) override {
    if (drop_(statement)) {
      ++dropped_;
      return false;
    }
    if (statement.head != nullptr) {
      note.kind = statement.head->root ? 2 : 1;
      note.key = statement.head->name;
    }
    note.count = dropped_;
    dropped_ = 0;
    return true;
  }
  std::unique_ptr<StatementFilter> fork() const override {
    return std::make_unique<CountingFilter>(drop_);
  }
  StatementNote pending() const override {
    StatementNote note;
    note.count = dropped_;
    return note;
  }
  void merge_pending(const StatementNote& earlier, StatementNote& later) const override {
    later.count += earlier.count;
  }

 private:
  Drop drop_;
  std::uint32_t dropped_ = 0;
};

}  // namespace rtb::hlo::fixtures
