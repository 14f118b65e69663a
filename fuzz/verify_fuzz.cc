// libFuzzer target: the payload verifier's row checks (check.h) and their kernel (slots.h).
// Properties:
//   - the SIMD and the portable slot_range agree on any int16 slots, at any length and offset;
//   - verify_payload gives the same report (check-payload verify --json's document) with one
//     thread and the portable kernels reading through the source, counting every token, as with
//     several threads and the SIMD kernels reading the payload in place, counting repeated tokens
//     once (repeats.h) in a table of one or two entries (a place taken over and over) or the
//     default one.
// The input's first bytes pick a small payload shape; the rest overwrite its routing (ids drawn
// around [0, E), so repeats, ids out of range and stray ids on padding are frequent) and flip a
// few real tokens to padding and back. Only rtb::Error is an expected exception.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/payload/builder.h"
#include "rtb/payload/check.h"
#include "rtb/payload/report.h"
#include "rtb/payload/slots.h"

namespace {

void check_kernels(const std::uint8_t* data, std::size_t size) {
  std::vector<std::int16_t> slots(size / 2);
  if (!slots.empty()) std::memcpy(slots.data(), data, slots.size() * 2);
  for (std::size_t first = 0; first < std::min<std::size_t>(slots.size(), 3); ++first) {
    for (std::size_t n = 1; first + n <= slots.size(); n += 1 + n / 7) {
      if (rtb::payload::slot_range(slots.data() + first, n) !=
          rtb::payload::slot_range_portable(slots.data() + first, n)) {
        std::fprintf(stderr, "verify_fuzz: slot_range differs from the portable version\n");
        __builtin_trap();
      }
    }
  }
}

std::string verify_json(const rtb::payload::Payload& payload, int threads, bool portable,
                        bool in_place, int repeat_entries) {
  rtb::payload::VerifyOptions v;
  v.experts = payload.options.experts;
  v.vocab = payload.options.vocab;
  v.targets = payload.targets;
  v.max_examples = 3;
  v.threads = threads;
  v.portable = portable;
  v.repeat_entries = repeat_entries;
  rtb::payload::VerifyReport report;
  if (in_place) {
    report = rtb::payload::verify_payload(payload, v);
  } else {
    rtb::payload::PayloadView view = rtb::payload::view_payload(payload);
    report = rtb::payload::verify_payload(*view.source, view.arrays, v);
  }
  return rtb::payload::format_verify_json("fuzz.npz", report, "");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_kernels(data, size);
  if (size < 6) return 0;
  rtb::payload::PayloadOptions o;
  o.rows = 1 + data[0] % 4;
  o.tokens = 1 + data[1] % 96;
  o.layers = 1 + data[2] % 4;
  o.topk = 1 + data[3] % 5;
  o.experts = o.topk + data[4] % 12;
  o.segments = 1 + data[5] % 3;
  o.routing_targets.assign(static_cast<std::size_t>(o.layers), 1.0);
  o.threads = 1;
  rtb::payload::Payload payload;
  try {
    payload = rtb::payload::build_payload(o);
  } catch (const rtb::Error&) {
    return 0;
  }
  // The rest of the input: routing slots, then segment ids set to 0 (padding) or 1.
  std::size_t at = 6;
  const std::int64_t span = payload.options.experts + 3;
  for (std::size_t i = 0; i < payload.routed_experts.size() && at < size; ++i, ++at) {
    payload.routed_experts[i] = static_cast<std::int16_t>(data[at] % span - 2);
  }
  for (std::size_t i = 0; at + 1 < size; at += 2) {
    i += data[at] % 64;
    if (i >= payload.segment_ids.size()) break;
    payload.segment_ids[i] = data[at + 1] % 2;
  }
  try {
    const std::string expected = verify_json(payload, 1, true, false, 0);
    if (verify_json(payload, 3, false, true, 1) != expected ||
        verify_json(payload, 2, false, false, -1) != expected ||
        verify_json(payload, 1, false, true, 2) != expected) {
      std::fprintf(stderr, "verify_fuzz: threads, kernels or repeats change the report\n");
      __builtin_trap();
    }
  } catch (const rtb::Error&) {
  }
  return 0;
}
