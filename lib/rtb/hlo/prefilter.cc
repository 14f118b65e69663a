#include "rtb/hlo/prefilter.h"

#include "rtb/hlo/flat_index.h"
#include "rtb/hlo/opcodes.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {

bool Prefilter::keep(const Statement& s, StatementNote& note) {
  std::string_view text = s.text;
  std::size_t i = 0;
  bool newline = false;  // the statement starts with blank lines
  while (i < text.size() && is_space(text[i])) {
    newline = newline || text[i] == '\n';
    ++i;
  }
  std::string_view body = text.substr(i);
  while (!body.empty() && is_space(body.back())) body.remove_suffix(1);
  if (body.empty() || is_comment(body)) return false;  // the analyser ignores them
  if (!header_seen_) {
    header_seen_ = true;
    return pass(note);
  }
  if (!in_computation_) {
    if (s.depth_after != 1) return pass(note);
    in_computation_ = true;
    // The name and its hash, found here: the scanning threads have time to spare, the
    // analysing one has not. (A header without a name goes on as text: the analyser reports.)
    if (!newline) {
      note.kind = kNoteHeader;
      note.key = body;
      if (std::string_view name = header_name(body); !name.empty()) {
        note.key = name;
        note.hash = hash_name(name);
      }
    }
    return pass(note);
  }
  if (s.depth_after == 0) {
    in_computation_ = false;
    // A plain `}` (one per computation) is only flagged on the next statement passed on.
    if (body.size() == 1 && body[0] == '}' && !keep_all_) {
      closed_ = true;
      return false;
    }
    return pass(note);
  }
  if (s.head == nullptr || newline) return pass(note);
  OpcodeRole role = opcode_role(s.head->opcode);
  if (role == OpcodeRole::kOther && !keep_all_) {
    if (!s.head->root) {
      ++dropped_;
      return false;
    }
    if (std::uint16_t tag = plain_opcode_tag(s.head->opcode); tag != 0) {
      ++dropped_;
      dropped_root_ = tag;
      return false;
    }
  }
  note.kind = static_cast<std::uint8_t>(kNoteInstruction + static_cast<std::uint8_t>(role));
  if (role == OpcodeRole::kCompute && equals(s.head->opcode, "fusion")) {
    // The fused computation it calls, for the analyser's call graph (key and hash).
    if (std::string_view callee = fusion_callee(s.head->call); !callee.empty()) {
      note.key = callee;
      note.hash = hash_name(callee);
    }
  }
  return pass(note);
}

}  // namespace rtb::hlo
