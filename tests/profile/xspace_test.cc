// Tests of the XSpace reader (profile/xspace.h): captures built with the wire writer, hostile
// and truncated bytes, and the real jax.profiler capture checked against its JSON twin.
#include "rtb/profile/xspace.h"

#include <map>
#include <string>
#include <vector>

#include "rtb/base/compress.h"
#include "rtb/base/io.h"
#include "rtb/base/proto_wire.h"
#include "test_util.h"
#include "xspace_builder.h"

namespace rtb::profile {
namespace {

using test::error_of;
using test::testdata;
using test::what_of;

std::vector<Event> all_events(const Capture& capture, const XSpaceFile& file, const Line& line,
                              const WantedStats& wanted = kNoWantedStats) {
  std::vector<Event> events;
  EventCursor cursor = capture.events(file, line, wanted);
  Event event;
  while (cursor.next(event)) events.push_back(event);
  return events;
}

TEST(XSpace, ReadsPlanesLinesEventsAndMetadata) {
  test::SpaceBuilder space;
  auto& device = space.plane("/device:TPU:0", 7);
  device.event_name(1, "fusion.1");
  device.stat_name(5, "hlo_module");
  device.stat_name(6, "jit_train_step");
  auto& ops = device.line("XLA Ops", 1000);
  ops.event(1, 2'000, 500, {{5, test::StatValue::ref(6)}});
  ops.event(1, 3'000, 250, {{5, test::StatValue::string("direct")}});
  space.plane("/host:CPU", 8).line("python", 999).event(0, 0, 10, {});
  std::string bytes = space.bytes();
  std::vector<std::unique_ptr<XSpaceFile>> files;
  files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
  Capture capture(std::move(files));
  const XSpaceFile& file = *capture.files()[0];
  ASSERT_EQ(file.planes().size(), 2u);
  const Plane& plane = file.planes()[0];
  EXPECT_EQ(plane.name, "/device:TPU:0");
  EXPECT_EQ(plane.id, 7);
  ASSERT_NE(plane.event(1), nullptr);
  EXPECT_EQ(plane.event(1)->name, "fusion.1");
  EXPECT_EQ(plane.event(2), nullptr);
  EXPECT_EQ(plane.stat_id("hlo_module"), 5);
  ASSERT_EQ(plane.lines.size(), 1u);
  EXPECT_EQ(plane.lines[0].events, 2u);
  // The origin is the earliest line (the host's, 999 ns): the device line starts 1 ns later.
  EXPECT_EQ(capture.origin_ns(), 999);
  std::vector<Event> events = all_events(capture, file, plane.lines[0]);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].start_ps, 1'000 + 2'000);
  EXPECT_EQ(events[0].duration_ps, 500);
  std::vector<std::string> modules;
  for (const Event& event : events) {
    for_each_stat(file.bytes(), event.stats, [&](const Stat& stat) {
      if (stat.metadata_id == 5) modules.emplace_back(plane.stat_string(stat));
    });
  }
  EXPECT_THAT(modules, ElementsAre("jit_train_step", "direct"));
}

// Events in a form the fast path leaves to the checked reader: an unknown field, a stat whose
// metadata_id is not first, a negative offset (a 10-byte varint). Same values either way.
TEST(XSpace, EventsOutsideTheFastPathReadAlike) {
  std::string stat;
  wire::put_length_field(stat, 5, "late id");
  wire::put_varint_field(stat, 1, 4);
  std::string event;
  wire::put_varint_field(event, 1, 1);
  wire::put_varint_field(event, 2, static_cast<std::uint64_t>(-500));
  wire::put_varint_field(event, 3, 20);
  wire::put_varint_field(event, 9, 77);  // unknown
  wire::put_length_field(event, 4, stat);
  std::string line;
  wire::put_length_field(line, 2, "XLA Ops");
  wire::put_varint_field(line, 3, 10);
  wire::put_length_field(line, 4, event);
  std::string plane;
  wire::put_length_field(plane, 2, "/device:TPU:0");
  wire::put_length_field(plane, 3, line);
  std::string bytes;
  wire::put_length_field(bytes, 1, plane);
  std::vector<std::unique_ptr<XSpaceFile>> files;
  files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
  Capture capture(std::move(files));
  const XSpaceFile& file = *capture.files()[0];
  std::vector<Event> events = all_events(capture, file, file.planes()[0].lines[0]);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].metadata_id, 1);
  EXPECT_EQ(events[0].start_ps, -500);
  EXPECT_EQ(events[0].duration_ps, 20);
  Stat found;
  ASSERT_TRUE(find_stat(file.bytes(), events[0].stats, 4, found));
  EXPECT_EQ(found.bytes, "late id");
  EXPECT_FALSE(find_stat(file.bytes(), events[0].stats, 5, found));
  // Decoded in the event's own walk (the checked reader's, here), as find_stat finds it.
  events = all_events(capture, file, file.planes()[0].lines[0], {5, 4, -1});
  EXPECT_EQ(events[0].wanted[0].kind, Stat::Kind::kNone);
  EXPECT_EQ(events[0].wanted[1].kind, Stat::Kind::kString);
  EXPECT_EQ(events[0].wanted[1].bytes, "late id");
  EXPECT_EQ(events[0].duration_ps, 20);
}

// The stats a cursor is asked for come out of the event's one walk with the values find_stat
// gives, for every kind of value, the first of a repeated id, and none for an id not there.
TEST(XSpace, WantedStatsAreDecodedInTheEventsWalk) {
  test::SpaceBuilder space;
  auto& device = space.plane("/device:GPU:0", 1);
  device.stat_name(3, "hlo_op").stat_name(4, "hlo_module").stat_name(5, "n");
  device.stat_name(6, "jit_step");
  auto& line = device.line("Stream #1", 0);
  line.event(1, 0, 10,
             {{5, test::StatValue::int64(-7)},
              {3, test::StatValue::string("copy.1")},
              {4, test::StatValue::ref(6)},
              {3, test::StatValue::string("second")}});
  line.event(1, 20, 10, {{5, test::StatValue::int64(9)}});
  std::string bytes = space.bytes();
  std::vector<std::unique_ptr<XSpaceFile>> files;
  files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
  Capture capture(std::move(files));
  const XSpaceFile& file = *capture.files()[0];
  const Plane& plane = file.planes()[0];
  std::vector<Event> events = all_events(capture, file, plane.lines[0], {3, 4, 5});
  ASSERT_EQ(events.size(), 2u);
  for (const Event& event : events) {
    for (std::size_t i = 0; i < kWantedStats; ++i) {
      Stat expected;
      std::int64_t id = std::array<std::int64_t, 3>{3, 4, 5}[i];
      if (!find_stat(file.bytes(), event.stats, id, expected)) {
        EXPECT_EQ(event.wanted[i].kind, Stat::Kind::kNone) << i;
        continue;
      }
      EXPECT_EQ(event.wanted[i].kind, expected.kind) << i;
      EXPECT_EQ(event.wanted[i].int_value, expected.int_value) << i;
      EXPECT_EQ(event.wanted[i].uint_value, expected.uint_value) << i;
      EXPECT_EQ(event.wanted[i].bytes, expected.bytes) << i;
    }
  }
  EXPECT_EQ(plane.stat_string(events[0].wanted[0]), "copy.1");
  EXPECT_EQ(plane.stat_string(events[0].wanted[1]), "jit_step");
  EXPECT_EQ(events[0].wanted[2].int_value, -7);
  EXPECT_EQ(events[1].wanted[0].kind, Stat::Kind::kNone);
  EXPECT_EQ(events[1].wanted[2].int_value, 9);
  // Without wanted ids nothing is decoded.
  EXPECT_EQ(all_events(capture, file, plane.lines[0])[0].wanted[0].kind, Stat::Kind::kNone);
}

TEST(XSpace, ReadsGzipAndStdinThroughATemporaryFile) {
  test::SpaceBuilder space;
  space.plane("/device:GPU:0", 1).line("Stream #1", 5).event(1, 0, 10, {});
  std::string bytes = space.bytes();
  test::TempDir dir("xspace");
  std::string gz = (dir.path() / "a.xplane.pb.gz").string();
  write_output(gz, gzip_compress(bytes));
  Capture from_gz(gz);
  ASSERT_EQ(from_gz.files().size(), 1u);
  EXPECT_EQ(from_gz.files()[0]->bytes(), bytes);
  // A directory is a multi-host capture: every *.xplane.pb[.gz] under it, in name order.
  write_output((dir.path() / "b.xplane.pb").string(), bytes);
  write_output((dir.path() / "notes.txt").string(), "not a capture");
  Capture from_dir(dir.path().string());
  ASSERT_EQ(from_dir.files().size(), 2u);
  EXPECT_THAT(from_dir.files()[1]->name(), EndsWith("b.xplane.pb"));
  EXPECT_EQ(from_dir.bytes(), 2 * bytes.size());
}

TEST(XSpace, HostileAndTruncatedInputsAreErrors) {
  test::SpaceBuilder space;
  auto& plane = space.plane("/device:TPU:0", 1);
  plane.event_name(1, "op");
  plane.line("XLA Ops", 0).event(1, 0, 10, {});
  std::string good = space.bytes();
  // Every cut of a good capture is an error or a shorter capture, never a crash.
  for (std::size_t cut = 1; cut < good.size(); ++cut) {
    std::string bytes = good.substr(0, cut);
    try {
      std::vector<std::unique_ptr<XSpaceFile>> files;
      files.push_back(std::make_unique<XSpaceFile>(bytes, "cut"));
      Capture capture(std::move(files));
      for (const Plane& p : capture.files()[0]->planes()) {
        for (const Line& line : p.lines) all_events(capture, *capture.files()[0], line);
      }
    } catch (const Error& error) {
      EXPECT_EQ(error.file(), "cut");
    }
  }
  auto error_for = [](const std::string& bytes) {
    return what_of([&] {
      std::vector<std::unique_ptr<XSpaceFile>> files;
      files.push_back(std::make_unique<XSpaceFile>(bytes, "x.xplane.pb"));
      Capture capture(std::move(files));
      for (const Plane& p : capture.files()[0]->planes()) {
        for (const Line& line : p.lines) all_events(capture, *capture.files()[0], line);
      }
    });
  };
  EXPECT_EQ(error_for(""), "x.xplane.pb: XSpace: the file is empty");
  EXPECT_THAT(error_for("HloModule m\n"), HasSubstr("not an XSpace"));
  EXPECT_THAT(error_for(good.substr(0, good.size() - 1)), HasSubstr("past the end"));
  test::SpaceBuilder negative;
  negative.plane("p", 1).line("l", 0).event(1, 0, -5, {});
  EXPECT_THAT(error_for(negative.bytes()), HasSubstr("negative duration"));
  test::SpaceBuilder twice;
  auto& twice_plane = twice.plane("p", 1);
  twice_plane.event_name(3, "a");
  twice_plane.event_name(3, "b");
  EXPECT_THAT(error_for(twice.bytes()), HasSubstr("event metadata id 3 twice"));
  test::SpaceBuilder far;
  far.plane("p", 1).line("early", 0).event(1, 0, 1, {});
  far.plane("q", 2).line("late", INT64_MAX).event(1, 0, 1, {});
  EXPECT_THAT(error_for(far.bytes()), HasSubstr("too far from the capture's start"));
}

// The real capture (testdata/profile, SOURCES.md) against its JSON twin, the profiler's own
// view of the same capture: device events by name, the host's event count, and times.
TEST(XSpace, RealCaptureMatchesItsJsonTwin) {
  Capture capture(testdata("profile/jax0.11.2_h200_bench_driver_profile_window.xplane.pb"));
  const XSpaceFile& file = *capture.files()[0];
  std::map<std::string, std::size_t> device_names;
  std::size_t host_events = 0;
  std::int64_t first_ps = INT64_MAX;
  std::int64_t first_duration = 0;
  for (const Plane& plane : file.planes()) {
    for (const Line& line : plane.lines) {
      for (const Event& event : all_events(capture, file, line)) {
        if (plane.name == "/device:GPU:0") {
          const EventMetadata* metadata = plane.event(event.metadata_id);
          ASSERT_NE(metadata, nullptr);
          ++device_names[metadata->display_name.empty() ? metadata->name : metadata->display_name];
          if (event.start_ps < first_ps) {
            first_ps = event.start_ps;
            first_duration = event.duration_ps;
          }
        } else if (plane.name == "/host:CPU" && event.duration_ps > 0) {
          ++host_events;
        }
      }
    }
  }
  // Counted in the twin's traceEvents: pid 1 (/device:GPU:0) and pid 701 (/host:CPU), ph "X".
  // The JSON view leaves out instant events (duration 0: 103 on the host, none on the device),
  // so the host count is of events with a duration.
  EXPECT_THAT(device_names,
              ElementsAre(Pair("MemcpyD2D", 1288), Pair("MemcpyH2D", 12),
                          Pair("gemm_fusion_dot_general_1", 1264), Pair("loop_add_fusion", 1264),
                          Pair("loop_convert_fusion", 6), Pair("wrapped_add", 11)));
  EXPECT_EQ(host_events, 14786u);
  // The twin's first device event: MemcpyD2D, "dur": 0.96 (microseconds).
  EXPECT_EQ(first_duration, 960'000);
}

}  // namespace
}  // namespace rtb::profile
