// An XSpace encoder for tests (field numbers: lib/rtb/profile/xspace.h), written with the wire
// writer of base/proto_wire.h.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "rtb/base/proto_wire.h"

namespace rtb::test {

// The value of one stat: a string, or a ref to the stat metadata whose name is the string.
struct StatValue {
  std::uint32_t field = 5;  // XStat str_value 5, int64_value 4, ref_value 7
  std::string text;
  std::int64_t number = 0;
  static StatValue string(std::string text) { return {5, std::move(text), 0}; }
  static StatValue ref(std::int64_t id) { return {7, {}, id}; }
  static StatValue int64(std::int64_t value) { return {4, {}, value}; }
};

// XStat messages, each as field `field` of its holder (XEvent 4, XEventMetadata 5).
inline void put_stats(std::string& out, std::uint32_t field,
                      std::initializer_list<std::pair<std::int64_t, StatValue>> stats) {
  for (const auto& [id, value] : stats) {
    std::string stat;
    wire::put_varint_field(stat, 1, static_cast<std::uint64_t>(id));
    if (value.field == 5) {
      wire::put_length_field(stat, 5, value.text);
    } else {
      wire::put_varint_field(stat, value.field, static_cast<std::uint64_t>(value.number));
    }
    wire::put_length_field(out, field, stat);
  }
}

class LineBuilder {
 public:
  LineBuilder(std::string name, std::int64_t timestamp_ns)
      : name_(std::move(name)), timestamp_ns_(timestamp_ns) {}
  LineBuilder& event(std::int64_t metadata_id, std::int64_t offset_ps, std::int64_t duration_ps,
                     std::initializer_list<std::pair<std::int64_t, StatValue>> stats) {
    std::string event;
    wire::put_varint_field(event, 1, static_cast<std::uint64_t>(metadata_id));
    wire::put_varint_field(event, 2, static_cast<std::uint64_t>(offset_ps));
    wire::put_varint_field(event, 3, static_cast<std::uint64_t>(duration_ps));
    put_stats(event, 4, stats);
    events_.push_back(std::move(event));
    return *this;
  }
  std::string bytes(std::int64_t id) const {
    std::string line;
    wire::put_varint_field(line, 1, static_cast<std::uint64_t>(id));
    wire::put_length_field(line, 2, name_);
    wire::put_varint_field(line, 3, static_cast<std::uint64_t>(timestamp_ns_));
    for (const auto& event : events_) wire::put_length_field(line, 4, event);
    return line;
  }

 private:
  std::string name_;
  std::int64_t timestamp_ns_;
  std::vector<std::string> events_;
};

class PlaneBuilder {
 public:
  PlaneBuilder(std::string name, std::int64_t id) : name_(std::move(name)), id_(id) {}
  PlaneBuilder& event_name(std::int64_t id, const std::string& name,
                           std::initializer_list<std::pair<std::int64_t, StatValue>> stats = {}) {
    std::string metadata;
    wire::put_varint_field(metadata, 1, static_cast<std::uint64_t>(id));
    wire::put_length_field(metadata, 2, name);
    put_stats(metadata, 5, stats);
    metadata_.push_back(entry(4, id, metadata));
    return *this;
  }
  PlaneBuilder& stat_name(std::int64_t id, const std::string& name) {
    std::string metadata;
    wire::put_varint_field(metadata, 1, static_cast<std::uint64_t>(id));
    wire::put_length_field(metadata, 2, name);
    metadata_.push_back(entry(5, id, metadata));
    return *this;
  }
  LineBuilder& line(const std::string& name, std::int64_t timestamp_ns) {
    return lines_.emplace_back(name, timestamp_ns);
  }
  // Lines first, then metadata, as XProf writes them (the reader must not depend on it).
  std::string bytes() const {
    std::string plane;
    wire::put_varint_field(plane, 1, static_cast<std::uint64_t>(id_));
    wire::put_length_field(plane, 2, name_);
    std::int64_t line_id = 0;
    for (const auto& line : lines_) wire::put_length_field(plane, 3, line.bytes(++line_id));
    for (const auto& metadata : metadata_) plane += metadata;
    return plane;
  }

 private:
  static std::string entry(std::uint32_t field, std::int64_t key, const std::string& value) {
    std::string entry;
    wire::put_varint_field(entry, 1, static_cast<std::uint64_t>(key));
    wire::put_length_field(entry, 2, value);
    std::string out;
    wire::put_length_field(out, field, entry);
    return out;
  }
  std::string name_;
  std::int64_t id_;
  std::deque<LineBuilder> lines_;
  std::vector<std::string> metadata_;
};

class SpaceBuilder {
 public:
  PlaneBuilder& plane(const std::string& name, std::int64_t id) {
    return planes_.emplace_back(name, id);
  }
  std::string bytes() const {
    std::string space;
    for (const auto& plane : planes_) wire::put_length_field(space, 1, plane.bytes());
    return space;
  }

 private:
  std::deque<PlaneBuilder> planes_;
};

}  // namespace rtb::test
