// The statement filter of the analyser (StatementFilter, scan.h): what the scanning threads do
// for the analysis before a statement crosses over to the analysing thread.
#pragma once

#include <cstdint>
#include <memory>

#include "rtb/hlo/scan.h"

namespace rtb::hlo {

// What the filter tells the analyser about a statement (StatementNote::kind).
enum NoteKind : std::uint8_t {
  kNoteNone = 0,     // nothing known: the analyser reads the statement itself
  kNoteHeader,       // a computation header starting on the statement's first line; key =
                     // its name and hash its hash (hash 0: key is the text, without a name)
  kNoteInstruction,  // an instruction with the splitter's head, starting on the statement's
                     // first line; + OpcodeRole. A fusion's key and hash: the computation it calls.
};

// StatementNote::tag: the index + 1 of a dropped ROOT's opcode in kPlainOpcodes (low bits), and
// whether a computation's closing `}` line was dropped before the statement.
constexpr std::uint16_t kTagRootMask = 0x7fff;
constexpr std::uint16_t kTagClosed = 0x8000;

// The statement filter of the pipelined reader (scan.h), run on the scanning thread. It
// follows the analyser's state machine (module header, computations) and does the stateless
// part of the work while the text is hot in that core's cache: trimming, the opcode's role, the
// names and hashes of computation headers and fusion callees. Instructions that matter to
// nobody (role kOther: most of a dump) are dropped and only counted, so that the analysing
// thread does not touch their text at all; so are a computation's plain `}` line and its ROOT
// when the opcode is in kPlainOpcodes. StatementNote::count carries the number of instructions
// dropped since the previous statement passed on, StatementNote::tag the ROOT and the `}`.
//
// The pending note (see StatementFilter) is the count and tag not yet passed on; merging adds
// the counts and joins the tags (a piece starts at top level, so at most one side has a ROOT
// and a `}` flag that matter for the same computation).
class Prefilter final : public StatementFilter {
 public:
  explicit Prefilter(bool keep_all, bool header_seen = false)
      : keep_all_(keep_all), header_seen_(header_seen) {}

  std::unique_ptr<StatementFilter> fork() const override {
    return std::make_unique<Prefilter>(keep_all_, true);
  }

  StatementNote pending() const override {
    StatementNote note;
    note.count = dropped_;
    note.tag = tag();
    return note;
  }

  void merge_pending(const StatementNote& earlier, StatementNote& later) const override {
    later.count += earlier.count;
    // The ROOT tag belongs to the computation the earlier statements were in; a later note of
    // a new piece has none of its own before its first header.
    if ((later.tag & kTagRootMask) == 0) later.tag |= earlier.tag & kTagRootMask;
    later.tag |= earlier.tag & kTagClosed;
  }

  bool keep(const Statement& s, StatementNote& note) override;

 private:
  std::uint16_t tag() const { return dropped_root_ | (closed_ ? kTagClosed : 0); }

  bool pass(StatementNote& note) {
    note.count = dropped_;
    note.tag = tag();
    dropped_ = 0;
    dropped_root_ = 0;
    closed_ = false;
    return true;
  }

  bool keep_all_;
  bool header_seen_ = false;
  bool in_computation_ = false;
  std::uint32_t dropped_ = 0;
  std::uint16_t dropped_root_ = 0;  // the tag of a ROOT dropped since the last pass
  bool closed_ = false;             // a `}` dropped since the last pass
};

}  // namespace rtb::hlo
