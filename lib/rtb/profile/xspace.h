// XSpace profiler captures (`*.xplane.pb`, written by jax.profiler / XProf, and `.gz` of them;
// a multi-host capture is a directory of them) read with our own wire reader (base/proto_wire).
//
// Schema (proto3, package tensorflow.profiler; field numbers as read at fractalyze/zkx
// 44714577273fc6fa00dc53739b776640ec0a2f5e, a fork carrying openxla/xla's
// xla/tsl/profiler/protobuf/xplane.proto; docs/profile-report.md lists them):
//   XSpace    planes 1, errors 2, warnings 3, hostnames 4
//   XPlane    id 1, name 2, lines 3, event_metadata 4 (map<int64, XEventMetadata>: key 1 value 2),
//             stat_metadata 5 (map<int64, XStatMetadata>), stats 6
//   XLine     id 1, name 2, timestamp_ns 3, events 4, duration_ps 9, display_id 10,
//             display_name 11
//   XEvent    metadata_id 1, offset_ps 2 | num_occurrences 5, duration_ps 3, stats 4
//   XStat     metadata_id 1, double 2 (fixed64), uint64 3, int64 4, str 5, bytes 6, ref 7 (the
//             name of stat metadata `ref` is the value)
//   XEventMetadata  id 1, name 2, metadata 3, display_name 4, stats 5, child_id 6
//   XStatMetadata   id 1, name 2, description 3
//
// Reading is two passes over the mapped bytes: the first reads every plane's metadata and its
// lines' headers (the events of a line are skipped as one length-delimited field), the second
// hands out events one at a time from cursors over the lines. Heap use is bounded by the
// metadata and the number of lines, never by the number of events. Times are picoseconds from
// the capture's origin: the earliest timestamp_ns of any line (of any file of a directory).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rtb/base/proto_wire.h"

namespace rtb::profile {

// What every error message about an XSpace's bytes starts with.
inline constexpr std::string_view kXSpaceFormat = "XSpace";

struct StatMetadata {
  std::int64_t id = 0;
  std::string name;
};

// Where stats are: the message that holds them and their field number in it (XEvent 4,
// XEventMetadata 5, XPlane 6); read with for_each_stat.
struct Stats {
  std::string_view message;
  std::uint32_t field = 0;
};

// One stat of an event, an event's metadata or a plane, as stored (the string of a ref value is
// resolved by Plane::stat_string).
struct Stat {
  enum class Kind { kNone, kDouble, kUint64, kInt64, kString, kBytes, kRef };
  std::int64_t metadata_id = 0;
  Kind kind = Kind::kNone;
  double double_value = 0;
  std::uint64_t uint_value = 0;  // kUint64, kRef
  std::int64_t int_value = 0;    // kInt64
  std::string_view bytes;        // kString, kBytes
};

struct EventMetadata {
  std::int64_t id = 0;
  std::string name;
  std::string display_name;
  Stats stats;
};

struct Line {
  std::int64_t id = 0;
  std::string name;
  std::string display_name;
  std::int64_t timestamp_ns = 0;
  std::int64_t duration_ps = 0;
  std::size_t events = 0;    // how many events it holds
  std::string_view message;  // the XLine (its events are read from it in the second pass)
};

struct Plane {
  std::int64_t id = 0;
  std::string name;
  std::string file;  // the file it came from (messages; several in a multi-host capture)
  std::unordered_map<std::int64_t, EventMetadata> event_metadata;
  std::unordered_map<std::int64_t, StatMetadata> stat_metadata;
  std::vector<Line> lines;
  Stats stats;  // the plane's own stats

  // The metadata of event metadata id `id`, or nullptr.
  const EventMetadata* event(std::int64_t id) const;
  // The name of stat metadata `id` ("" when there is none).
  std::string_view stat_name(std::int64_t id) const;
  // The metadata id of the stat named `name`, or -1.
  std::int64_t stat_id(std::string_view name) const;
  // A string or ref stat's text ("" for other kinds).
  std::string_view stat_string(const Stat& stat) const;
};

// Calls `on_stat(const Stat&)` for each XStat in `stats`, in stored order; `input` is the whole
// file (offsets in messages). Throws rtb::Error for malformed stats.
template <typename Callback>
void for_each_stat(std::string_view input, const Stats& stats, Callback&& on_stat);

// The stat with metadata id `id` among `stats` into `out`: false when there is none. Faster than
// for_each_stat for one stat: a stat whose first field names another id is not read further.
bool find_stat(std::string_view input, const Stats& stats, std::int64_t id, Stat& out);

// The stats an event cursor decodes in the same walk as the event's own fields: up to
// kWantedStats stat metadata ids (-1: none), so that a reader of a few stats per event (the
// summary's module, op name and category) walks each event's bytes once.
inline constexpr std::size_t kWantedStats = 3;
using WantedStats = std::array<std::int64_t, kWantedStats>;
inline constexpr WantedStats kNoWantedStats = {-1, -1, -1};

struct Event {
  std::int64_t metadata_id = 0;
  std::int64_t start_ps = 0;  // from the capture's origin
  std::int64_t duration_ps = 0;
  std::int64_t occurrences = 0;  // of an aggregated event (no start time), else 0
  Stats stats;
  std::size_t offset = 0;  // of the event in its file
  // The first stat of each wanted id, in the cursor's order; kind kNone when the event has none
  // (the other fields are then left as they were).
  std::array<Stat, kWantedStats> wanted{};
};

// The events of one line in stored order (the second pass).
class EventCursor {
 public:
  EventCursor(std::string_view input, const Line& line, std::int64_t origin_ns,
              const std::string& file, const WantedStats& wanted = kNoWantedStats);
  // The next event into `event`; false after the last. Throws rtb::Error (naming the file) for a
  // malformed event or a time outside int64 picoseconds from the origin.
  bool next(Event& event);

 private:
  // An XEvent's fields through the checked wire reader (errors name the byte).
  void read_event_checked(std::string_view message, Event& event, std::int64_t& offset_ps) const;
  // One XStat of the event into event.wanted when its id is wanted (checked reader).
  void read_wanted_stat_checked(std::string_view bytes, Event& event) const;

  std::string_view input_;
  wire::Reader fields_;       // of the line
  std::int64_t base_ps_ = 0;  // the line's timestamp from the origin
  const std::string* file_;
  WantedStats wanted_;
  bool any_wanted_ = false;
};

// One XSpace file, mapped (or spooled: stdin, .gz), with its first pass done.
class XSpaceFile {
 public:
  // Opens `path` ("-" = stdin; gzip detected by its magic bytes, whatever the name) and reads
  // its metadata. Throws rtb::Error naming the file.
  explicit XSpaceFile(const std::string& path);
  // The same over bytes in memory (tests, fuzzing): they must outlive the object.
  XSpaceFile(std::string_view bytes, std::string name);

  const std::string& name() const { return name_; }
  std::string_view bytes() const { return bytes_; }
  const std::vector<Plane>& planes() const { return planes_; }
  const std::vector<std::string>& hostnames() const { return hostnames_; }
  const std::vector<std::string>& errors() const { return errors_; }
  // The earliest timestamp_ns of a line with events (0 when there is none).
  std::int64_t earliest_ns() const { return earliest_ns_; }
  bool has_events() const { return has_events_; }

 private:
  void index();

  std::string name_;
  std::shared_ptr<const void> owner_;  // keeps the mapping alive
  std::string_view bytes_;
  std::vector<Plane> planes_;
  std::vector<std::string> hostnames_;
  std::vector<std::string> errors_;
  std::int64_t earliest_ns_ = 0;
  bool has_events_ = false;
};

// A capture: one file, or every `*.xplane.pb` / `*.xplane.pb.gz` under a directory (a
// multi-host capture; recursively, in name order), with one time origin for all of them.
class Capture {
 public:
  // Throws rtb::Error naming the path (nothing to read, a bad file).
  explicit Capture(const std::string& path);
  // Over files already opened (tests).
  explicit Capture(std::vector<std::unique_ptr<XSpaceFile>> files);

  const std::vector<std::unique_ptr<XSpaceFile>>& files() const { return files_; }
  std::int64_t origin_ns() const { return origin_ns_; }
  // Total bytes of the (uncompressed) files.
  std::uint64_t bytes() const;
  EventCursor events(const XSpaceFile& file, const Line& line,
                     const WantedStats& wanted = kNoWantedStats) const {
    return EventCursor(file.bytes(), line, origin_ns_, file.name(), wanted);
  }

 private:
  void set_origin();
  std::vector<std::unique_ptr<XSpaceFile>> files_;
  std::int64_t origin_ns_ = 0;
};

// ---- implementation of for_each_stat ---------------------------------------------------------

// One XStat message's fields into `stat`.
Stat read_stat(std::string_view input, std::string_view message);

template <typename Callback>
void for_each_stat(std::string_view input, const Stats& stats, Callback&& on_stat) {
  wire::Reader reader(input, stats.message, "message with stats", kXSpaceFormat);
  wire::Field field;
  while (reader.next(field)) {
    if (field.number != stats.field) continue;
    wire::expect_type(field, wire::WireType::kLength, "message with stats", "stats");
    on_stat(read_stat(input, field.bytes));
  }
}

}  // namespace rtb::profile
