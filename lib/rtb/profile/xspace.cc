#include "rtb/profile/xspace.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "rtb/base/compress.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"

namespace rtb::profile {

namespace {

using wire::Field;
using wire::Reader;
using wire::WireType;

// Field numbers (xspace.h has the schema and where it was read).
constexpr std::uint32_t kSpacePlanes = 1;
constexpr std::uint32_t kSpaceErrors = 2;
constexpr std::uint32_t kSpaceHostnames = 4;
constexpr std::uint32_t kPlaneId = 1;
constexpr std::uint32_t kPlaneName = 2;
constexpr std::uint32_t kPlaneLines = 3;
constexpr std::uint32_t kPlaneEventMetadata = 4;
constexpr std::uint32_t kPlaneStatMetadata = 5;
constexpr std::uint32_t kPlaneStats = 6;
constexpr std::uint32_t kLineId = 1;
constexpr std::uint32_t kLineName = 2;
constexpr std::uint32_t kLineTimestampNs = 3;
constexpr std::uint32_t kLineEvents = 4;
constexpr std::uint32_t kLineDurationPs = 9;
constexpr std::uint32_t kLineDisplayName = 11;
constexpr std::uint32_t kEventMetadataId = 1;
constexpr std::uint32_t kEventOffsetPs = 2;
constexpr std::uint32_t kEventDurationPs = 3;
constexpr std::uint32_t kEventStats = 4;
constexpr std::uint32_t kEventOccurrences = 5;
constexpr std::uint32_t kStatMetadataId = 1;
constexpr std::uint32_t kStatDouble = 2;
constexpr std::uint32_t kStatUint64 = 3;
constexpr std::uint32_t kStatInt64 = 4;
constexpr std::uint32_t kStatString = 5;
constexpr std::uint32_t kStatBytes = 6;
constexpr std::uint32_t kStatRef = 7;
constexpr std::uint32_t kMapKey = 1;
constexpr std::uint32_t kMapValue = 2;
constexpr std::uint32_t kMetadataId = 1;  // XEventMetadata and XStatMetadata
constexpr std::uint32_t kMetadataName = 2;
constexpr std::uint32_t kEventMetadataDisplayName = 4;
constexpr std::uint32_t kEventMetadataStats = 5;

// The picoseconds in a nanosecond.
constexpr std::int64_t kPsPerNs = 1000;

using wire::bytes_of;
using wire::int64_of;

// A map<int64, Message> entry: its key and its value's bytes.
std::pair<std::int64_t, std::string_view> map_entry(std::string_view input, const Field& entry,
                                                    std::string_view what) {
  Reader reader(input, bytes_of(entry, "XPlane", what), what, kXSpaceFormat);
  Field field;
  std::int64_t key = 0;
  std::string_view value;
  while (reader.next(field)) {
    if (field.number == kMapKey) key = int64_of(field, what, "key");
    if (field.number == kMapValue) value = bytes_of(field, what, "value");
  }
  return {key, value};
}

EventMetadata read_event_metadata(std::string_view input, std::string_view message) {
  EventMetadata metadata;
  metadata.stats = {message, kEventMetadataStats};
  Reader reader(input, message, "XEventMetadata", kXSpaceFormat);
  Field field;
  while (reader.next(field)) {
    switch (field.number) {
      case kMetadataId:
        metadata.id = int64_of(field, "XEventMetadata", "id");
        break;
      case kMetadataName:
        metadata.name = bytes_of(field, "XEventMetadata", "name");
        break;
      case kEventMetadataDisplayName:
        metadata.display_name = bytes_of(field, "XEventMetadata", "display_name");
        break;
      default:
        break;
    }
  }
  return metadata;
}

StatMetadata read_stat_metadata(std::string_view input, std::string_view message) {
  StatMetadata metadata;
  Reader reader(input, message, "XStatMetadata", kXSpaceFormat);
  Field field;
  while (reader.next(field)) {
    if (field.number == kMetadataId) metadata.id = int64_of(field, "XStatMetadata", "id");
    if (field.number == kMetadataName) metadata.name = bytes_of(field, "XStatMetadata", "name");
  }
  return metadata;
}

Line read_line_header(std::string_view input, std::string_view message) {
  Line line;
  line.message = message;
  Reader reader(input, message, "XLine", kXSpaceFormat);
  Field field;
  while (reader.next(field)) {
    switch (field.number) {
      case kLineId:
        line.id = int64_of(field, "XLine", "id");
        break;
      case kLineName:
        line.name = bytes_of(field, "XLine", "name");
        break;
      case kLineDisplayName:
        line.display_name = bytes_of(field, "XLine", "display_name");
        break;
      case kLineTimestampNs:
        line.timestamp_ns = int64_of(field, "XLine", "timestamp_ns");
        break;
      case kLineDurationPs:
        line.duration_ps = int64_of(field, "XLine", "duration_ps");
        break;
      case kLineEvents:
        wire::expect_type(field, WireType::kLength, "XLine", "events");
        ++line.events;
        break;
      default:
        break;
    }
  }
  return line;
}

Plane read_plane(std::string_view input, std::string_view message, const std::string& file) {
  Plane plane;
  plane.file = file;
  plane.stats = {message, kPlaneStats};
  Reader reader(input, message, "XPlane", kXSpaceFormat);
  Field field;
  while (reader.next(field)) {
    switch (field.number) {
      case kPlaneId:
        plane.id = int64_of(field, "XPlane", "id");
        break;
      case kPlaneName:
        plane.name = bytes_of(field, "XPlane", "name");
        break;
      case kPlaneLines:
        plane.lines.push_back(read_line_header(input, bytes_of(field, "XPlane", "lines")));
        break;
      case kPlaneEventMetadata: {
        auto [key, value] = map_entry(input, field, "XPlane.EventMetadataEntry");
        EventMetadata metadata = read_event_metadata(input, value);
        if (metadata.id != key) {
          fail("XSpace: plane '{}': event metadata at byte {} has id {} under key {}", plane.name,
               field.offset, metadata.id, key);
        }
        if (!plane.event_metadata.emplace(key, std::move(metadata)).second) {
          fail("XSpace: plane '{}': event metadata id {} twice (at byte {})", plane.name, key,
               field.offset);
        }
        break;
      }
      case kPlaneStatMetadata: {
        auto [key, value] = map_entry(input, field, "XPlane.StatMetadataEntry");
        StatMetadata metadata = read_stat_metadata(input, value);
        if (metadata.id != key) {
          fail("XSpace: plane '{}': stat metadata at byte {} has id {} under key {}", plane.name,
               field.offset, metadata.id, key);
        }
        if (!plane.stat_metadata.emplace(key, std::move(metadata)).second) {
          fail("XSpace: plane '{}': stat metadata id {} twice (at byte {})", plane.name, key,
               field.offset);
        }
        break;
      }
      default:
        break;
    }
  }
  return plane;
}

// True for the names a directory capture holds.
bool is_capture_name(const std::string& name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".xplane.pb") || ends_with(".xplane.pb.gz");
}

}  // namespace

const EventMetadata* Plane::event(std::int64_t id) const {
  auto it = event_metadata.find(id);
  return it == event_metadata.end() ? nullptr : &it->second;
}

std::string_view Plane::stat_name(std::int64_t id) const {
  auto it = stat_metadata.find(id);
  return it == stat_metadata.end() ? std::string_view() : std::string_view(it->second.name);
}

std::int64_t Plane::stat_id(std::string_view name) const {
  for (const auto& [id, metadata] : stat_metadata) {
    if (metadata.name == name) return id;
  }
  return -1;
}

std::string_view Plane::stat_string(const Stat& stat) const {
  if (stat.kind == Stat::Kind::kString) return stat.bytes;
  if (stat.kind == Stat::Kind::kRef) return stat_name(static_cast<std::int64_t>(stat.uint_value));
  return {};
}

Stat read_stat(std::string_view input, std::string_view message) {
  Stat stat;
  Reader reader(input, message, "XStat", kXSpaceFormat);
  Field field;
  while (reader.next(field)) {
    switch (field.number) {
      case kStatMetadataId:
        stat.metadata_id = int64_of(field, "XStat", "metadata_id");
        break;
      case kStatDouble: {
        wire::expect_type(field, WireType::kFixed64, "XStat", "double_value");
        std::uint64_t bits = field.value;
        std::memcpy(&stat.double_value, &bits, sizeof bits);
        stat.kind = Stat::Kind::kDouble;
        break;
      }
      case kStatUint64:
        wire::expect_type(field, WireType::kVarint, "XStat", "uint64_value");
        stat.uint_value = field.value;
        stat.kind = Stat::Kind::kUint64;
        break;
      case kStatInt64:
        stat.int_value = int64_of(field, "XStat", "int64_value");
        stat.kind = Stat::Kind::kInt64;
        break;
      case kStatString:
        stat.bytes = bytes_of(field, "XStat", "str_value");
        stat.kind = Stat::Kind::kString;
        break;
      case kStatBytes:
        stat.bytes = bytes_of(field, "XStat", "bytes_value");
        stat.kind = Stat::Kind::kBytes;
        break;
      case kStatRef:
        wire::expect_type(field, WireType::kVarint, "XStat", "ref_value");
        stat.uint_value = field.value;
        stat.kind = Stat::Kind::kRef;
        break;
      default:
        break;
    }
  }
  return stat;
}

namespace {

// One varint at `p` (advanced), at most 9 bytes; false at a longer one or the end.
bool fast_varint(const unsigned char*& p, const unsigned char* end, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift <= 56; shift += 7) {
    if (p >= end) return false;
    unsigned byte = *p++;
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

// find_stat over fields as XProf writes them (one-byte keys; varints and lengths that fit; each
// stat's metadata_id first): 1 found, 0 not there, -1 anything else (the checked reader decides).
int find_stat_fast(std::string_view message, std::uint32_t stats_field, std::int64_t id,
                   std::string_view& found) {
  const auto* p = reinterpret_cast<const unsigned char*>(message.data());
  const auto* end = p + message.size();
  const unsigned stats_key = (stats_field << 3) | 2;
  while (p < end) {
    unsigned key = *p++;
    if (key >= 0x80) return -1;
    std::uint64_t value = 0;
    if (!fast_varint(p, end, value)) return -1;
    if ((key & 7) == 0) continue;
    if ((key & 7) != 2 || value > static_cast<std::uint64_t>(end - p)) return -1;
    const unsigned char* stat = p;
    p += value;
    if (key != stats_key) continue;
    const unsigned char* at = stat + 1;
    std::uint64_t stat_id = 0;
    if (value < 2 || stat[0] != 0x08 || !fast_varint(at, p, stat_id)) return -1;
    if (static_cast<std::int64_t>(stat_id) == id) {
      found = std::string_view(reinterpret_cast<const char*>(stat), value);
      return 1;
    }
  }
  return 0;
}

}  // namespace

bool find_stat(std::string_view input, const Stats& stats, std::int64_t id, Stat& out) {
  std::string_view found;
  int fast = find_stat_fast(stats.message, stats.field, id, found);
  if (fast == 0) return false;
  if (fast == 1) {
    out = read_stat(input, found);
    return true;
  }
  Reader reader(input, stats.message, "message with stats", kXSpaceFormat);
  Field field;
  while (reader.next(field)) {
    if (field.number != stats.field) continue;
    if (field.type != WireType::kLength) {
      wire::expect_type(field, WireType::kLength, "message with stats", "stats");
    }
    // XProf writes metadata_id first (key 0x08, a varint): a stat of another id needs no more
    // reading. Anything else is read in full.
    std::string_view bytes = field.bytes;
    if (bytes.size() >= 2 && bytes[0] == '\x08') {
      std::uint64_t value = 0;
      std::size_t at = 1;
      int shift = 0;
      bool done = false;
      while (at < bytes.size() && shift <= 56) {
        auto byte = static_cast<unsigned char>(bytes[at++]);
        value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
        shift += 7;
        if (byte < 0x80) {
          done = true;
          break;
        }
      }
      if (done && static_cast<std::int64_t>(value) != id) continue;
    }
    Stat candidate = read_stat(input, field.bytes);
    if (candidate.metadata_id == id) {
      out = candidate;
      return true;
    }
  }
  return false;
}

// ---- EventCursor ---------------------------------------------------------------------------

EventCursor::EventCursor(std::string_view input, const Line& line, std::int64_t origin_ns,
                         const std::string& file, const WantedStats& wanted)
    : input_(input),
      fields_(input, line.message, "XLine", kXSpaceFormat),
      file_(&file),
      wanted_(wanted),
      any_wanted_(
          std::any_of(wanted.begin(), wanted.end(), [](std::int64_t id) { return id >= 0; })) {
  // |timestamp - origin| in ps must fit int64 (about 106 days).
  std::int64_t since = 0;
  if (__builtin_sub_overflow(line.timestamp_ns, origin_ns, &since) ||
      __builtin_mul_overflow(since, kPsPerNs, &base_ps_)) {
    fail_at(file, 0, "XSpace: line '{}' starts at {} ns, too far from the capture's start {} ns",
            line.name, line.timestamp_ns, origin_ns);
  }
}

namespace {

// The index among `wanted` of stat metadata id `id` whose stat `event` has not got yet, or -1.
int wanted_index(const WantedStats& wanted, const Event& event, std::uint64_t id) {
  for (std::size_t i = 0; i < kWantedStats; ++i) {
    if (wanted[i] >= 0 && static_cast<std::uint64_t>(wanted[i]) == id &&
        event.wanted[i].kind == Stat::Kind::kNone) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// One XStat's value fields after its metadata_id, as XProf writes them (one-byte keys, varints
// of at most 9 bytes, lengths that fit) into `stat`: false at anything else.
bool read_stat_value_fast(const unsigned char* p, const unsigned char* end, Stat& stat) {
  while (p < end) {
    unsigned key = *p++;
    if (key == ((kStatDouble << 3) | 1)) {
      if (end - p < 8) return false;
      std::uint64_t bits = 0;
      std::memcpy(&bits, p, sizeof bits);  // little-endian, as the wire format
      std::memcpy(&stat.double_value, &bits, sizeof bits);
      stat.kind = Stat::Kind::kDouble;
      p += 8;
      continue;
    }
    std::uint64_t value = 0;
    if (!fast_varint(p, end, value)) return false;
    switch (key) {
      case (kStatUint64 << 3) | 0:
        stat.uint_value = value;
        stat.kind = Stat::Kind::kUint64;
        break;
      case (kStatInt64 << 3) | 0:
        stat.int_value = static_cast<std::int64_t>(value);
        stat.kind = Stat::Kind::kInt64;
        break;
      case (kStatRef << 3) | 0:
        stat.uint_value = value;
        stat.kind = Stat::Kind::kRef;
        break;
      case (kStatString << 3) | 2:
      case (kStatBytes << 3) | 2:
        if (value > static_cast<std::uint64_t>(end - p)) return false;
        stat.bytes = std::string_view(reinterpret_cast<const char*>(p), value);
        stat.kind = key == ((kStatString << 3) | 2) ? Stat::Kind::kString : Stat::Kind::kBytes;
        p += value;
        break;
      default:
        return false;  // a second metadata_id, another field: the checked reader decides
    }
  }
  return true;
}

// The fields of one XEvent as XProf writes them (one-byte keys of fields 1, 2, 3 and 5 with
// varints of at most 9 bytes, stats of field 4 that fit, each stat's metadata_id first when
// stats are wanted) and the wanted stats among its stats, in one walk: false at anything else,
// which the checked reader then reads (other fields, long varints, errors). Most of a capture's
// bytes are events; this loop is most of the time of a summary.
bool read_event_fast(std::string_view message, Event& event, std::int64_t& offset_ps,
                     const WantedStats* wanted) {
  const auto* p = reinterpret_cast<const unsigned char*>(message.data());
  const auto* end = p + message.size();
  // Tests in the order of how often the keys come (most of an event's fields are stats), not a
  // switch: its jump table was the costliest instruction of a summary (mispredicted).
  constexpr unsigned kStatsKey = (kEventStats << 3) | 2;
  while (p < end) {
    unsigned key = *p++;
    std::uint64_t value = 0;
    if (p < end && *p < 0x80) {
      value = *p++;
    } else if (!fast_varint(p, end, value)) {
      return false;
    }
    if (key == kStatsKey) {
      if (value > static_cast<std::uint64_t>(end - p)) return false;
      const unsigned char* stat = p;
      p += value;
      if (wanted == nullptr) continue;
      // Each stat's metadata_id first (key 0x08), as XProf writes it: a stat of an id not
      // wanted is stepped over whole.
      const unsigned char* at = stat + 1;
      std::uint64_t id = 0;
      if (value < 2 || stat[0] != 0x08) return false;
      if (*at < 0x80) {
        id = *at++;
      } else if (!fast_varint(at, p, id)) {
        return false;
      }
      int index = wanted_index(*wanted, event, id);
      if (index < 0) continue;
      Stat& found = event.wanted[static_cast<std::size_t>(index)];
      found.metadata_id = static_cast<std::int64_t>(id);
      if (!read_stat_value_fast(at, p, found) || found.kind == Stat::Kind::kNone) return false;
    } else if (key == ((kEventMetadataId << 3) | 0)) {
      event.metadata_id = static_cast<std::int64_t>(value);
    } else if (key == ((kEventOffsetPs << 3) | 0)) {
      offset_ps = static_cast<std::int64_t>(value);
    } else if (key == ((kEventDurationPs << 3) | 0)) {
      event.duration_ps = static_cast<std::int64_t>(value);
    } else if (key == ((kEventOccurrences << 3) | 0)) {
      event.occurrences = static_cast<std::int64_t>(value);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

void EventCursor::read_event_checked(std::string_view message, Event& event,
                                     std::int64_t& offset_ps) const {
  Reader reader(input_, message, "XEvent", kXSpaceFormat);
  Field part;
  while (reader.next(part)) {
    switch (part.number) {
      case kEventMetadataId:
        event.metadata_id = int64_of(part, "XEvent", "metadata_id");
        break;
      case kEventOffsetPs:
        offset_ps = int64_of(part, "XEvent", "offset_ps");
        break;
      case kEventDurationPs:
        event.duration_ps = int64_of(part, "XEvent", "duration_ps");
        break;
      case kEventOccurrences:
        event.occurrences = int64_of(part, "XEvent", "num_occurrences");
        break;
      case kEventStats:
        if (any_wanted_) read_wanted_stat_checked(bytes_of(part, "XEvent", "stats"), event);
        break;
      default:
        break;
    }
  }
}

void EventCursor::read_wanted_stat_checked(std::string_view bytes, Event& event) const {
  // The stat's id: its first field when that is a metadata_id (as find_stat reads it), else
  // what a full read finds.
  std::uint64_t id = 0;
  const auto* at = reinterpret_cast<const unsigned char*>(bytes.data()) + 1;
  const auto* end = reinterpret_cast<const unsigned char*>(bytes.data() + bytes.size());
  bool first_is_id = bytes.size() >= 2 && bytes[0] == '\x08' && fast_varint(at, end, id);
  Stat stat = read_stat(input_, bytes);
  if (!first_is_id) id = static_cast<std::uint64_t>(stat.metadata_id);
  int index = wanted_index(wanted_, event, id);
  if (index < 0 || static_cast<std::uint64_t>(stat.metadata_id) != id ||
      stat.kind == Stat::Kind::kNone) {
    return;
  }
  event.wanted[static_cast<std::size_t>(index)] = stat;
}

bool EventCursor::next(Event& event) {
  try {
    Field field;
    while (fields_.next(field)) {
      if (field.number != kLineEvents) continue;
      // Every field is set again (a wanted stat not met keeps its old value but kind kNone):
      // clearing the whole Event, stats and all, per event costs more than the rest of it.
      event.metadata_id = event.duration_ps = event.occurrences = 0;
      for (Stat& stat : event.wanted) stat.kind = Stat::Kind::kNone;
      event.offset = field.offset;
      event.stats = {bytes_of(field, "XLine", "events"), kEventStats};
      std::int64_t offset_ps = 0;
      if (!read_event_fast(field.bytes, event, offset_ps, any_wanted_ ? &wanted_ : nullptr)) {
        event.metadata_id = event.duration_ps = event.occurrences = offset_ps = 0;
        for (Stat& stat : event.wanted) stat.kind = Stat::Kind::kNone;
        read_event_checked(field.bytes, event, offset_ps);
      }
      if (event.duration_ps < 0) {
        fail("XSpace: the event at byte {} has a negative duration ({} ps)", field.offset,
             event.duration_ps);
      }
      std::int64_t end = 0;
      if (__builtin_add_overflow(base_ps_, offset_ps, &event.start_ps) ||
          __builtin_add_overflow(event.start_ps, event.duration_ps, &end)) {
        fail("XSpace: the event at byte {} ends past what int64 picoseconds hold", field.offset);
      }
      return true;
    }
    return false;
  } catch (const Error& error) {
    if (!error.file().empty()) throw;
    throw error.in_file(*file_);
  }
}

// ---- XSpaceFile ----------------------------------------------------------------------------

XSpaceFile::XSpaceFile(const std::string& path) : name_(display_name(path)) {
  auto file = std::make_unique<FileSource>(path, FileAccess::kMapped);
  std::string_view whole = file->contiguous();
  if (!whole.empty() && !is_gzip(whole)) {
    bytes_ = whole;
    owner_ = std::shared_ptr<const FileSource>(std::move(file));
  } else {
    // stdin, a pipe or a gzip stream: read it whole into a temporary file, then map that.
    std::string prefix;
    std::unique_ptr<ByteSource> source;
    if (!whole.empty()) {
      source = gunzip_source(std::move(file));
    } else {
      prefix = read_prefix(*file, 2);
      if (is_gzip(prefix)) {
        // The magic bytes are read already: the decompressor gets them back first.
        source =
            gunzip_source(std::make_unique<PrefixedSource>(std::move(prefix), std::move(file)));
        prefix.clear();
      } else {
        source = std::move(file);
      }
    }
    auto spooled = spool(prefix, *source, name_);
    bytes_ = spooled->bytes();
    owner_ = spooled;
  }
  index();
}

XSpaceFile::XSpaceFile(std::string_view bytes, std::string name)
    : name_(std::move(name)), bytes_(bytes) {
  index();
}

void XSpaceFile::index() {
  try {
    if (bytes_.empty()) fail("XSpace: the file is empty");
    Reader reader(bytes_, bytes_, "top level", kXSpaceFormat);
    Field field;
    bool first = true;
    while (reader.next(field)) {
      if (first && (field.number > 4 || field.type != WireType::kLength)) {
        fail("XSpace: not an XSpace (the first field is {} of wire type {}, not a plane)",
             field.number, static_cast<int>(field.type));
      }
      first = false;
      switch (field.number) {
        case kSpacePlanes:
          planes_.push_back(read_plane(bytes_, bytes_of(field, "XSpace", "planes"), name_));
          break;
        case kSpaceErrors:
          errors_.emplace_back(bytes_of(field, "XSpace", "errors"));
          break;
        case kSpaceHostnames:
          hostnames_.emplace_back(bytes_of(field, "XSpace", "hostnames"));
          break;
        default:
          break;
      }
    }
  } catch (const Error& error) {
    if (!error.file().empty()) throw;
    throw error.in_file(name_);
  }
  for (const Plane& plane : planes_) {
    for (const Line& line : plane.lines) {
      if (line.events == 0) continue;
      if (!has_events_ || line.timestamp_ns < earliest_ns_) earliest_ns_ = line.timestamp_ns;
      has_events_ = true;
    }
  }
}

// ---- Capture -------------------------------------------------------------------------------

Capture::Capture(const std::string& path) {
  std::error_code error;
  if (path != "-" && std::filesystem::is_directory(path, error)) {
    std::vector<std::string> names;
    std::filesystem::recursive_directory_iterator it(path, error), end;
    if (error) fail_at(path, 0, "cannot read the directory: {}", error.message());
    for (; it != end; it.increment(error)) {
      if (error) fail_at(path, 0, "cannot read the directory: {}", error.message());
      if (it->is_regular_file(error) && is_capture_name(it->path().filename().string())) {
        names.push_back(it->path().string());
      }
    }
    std::sort(names.begin(), names.end());
    if (names.empty()) fail_at(path, 0, "no *.xplane.pb or *.xplane.pb.gz file in the directory");
    for (const auto& name : names) files_.push_back(std::make_unique<XSpaceFile>(name));
  } else {
    files_.push_back(std::make_unique<XSpaceFile>(path));
  }
  set_origin();
}

Capture::Capture(std::vector<std::unique_ptr<XSpaceFile>> files) : files_(std::move(files)) {
  set_origin();
}

void Capture::set_origin() {
  bool any = false;
  for (const auto& file : files_) {
    if (!file->has_events()) continue;
    if (!any || file->earliest_ns() < origin_ns_) origin_ns_ = file->earliest_ns();
    any = true;
  }
}

std::uint64_t Capture::bytes() const {
  std::uint64_t total = 0;
  for (const auto& file : files_) total += file->bytes().size();
  return total;
}

}  // namespace rtb::profile
