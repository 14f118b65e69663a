#include "rtb/base/slice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"

namespace rtb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string slice_error(std::string_view text) {
  try {
    Slice::parse(text);
  } catch (const Error& error) {
    return error.message();
  }
  return "(no error)";
}

std::string fsdp_error(int devices, int context, int expert, int tensor) {
  try {
    fill_fsdp(devices, context, expert, tensor);
  } catch (const Error& error) {
    return error.message();
  }
  return "(no error)";
}

// --- topologies
// -----------------------------------------------------------------------------------

TEST(Topology, Parse) {
  Topology t = Topology::parse("4x4x8");
  EXPECT_THAT(t.dims(), ElementsAre(4, 4, 8));
  EXPECT_EQ(t.chips(), 128);
  EXPECT_EQ(t.str(), "4x4x8");
  EXPECT_EQ(Topology::parse("2x2x1").chips(), 4);
  EXPECT_EQ(Topology::parse("16x16").chips(), 256);
  EXPECT_EQ(Topology::parse("16x16").str(), "16x16");
  EXPECT_EQ(Topology::parse("4x4x4"), Topology({4, 4, 4}));
  EXPECT_FALSE(Topology::parse("4x4x4") == Topology::parse("4x4x8"));
}

TEST(Topology, Errors) {
  for (const char* text : {"",      "4",    "x",    "4x",   "x4",      "4xx4", "4x4x",
                           "4x0x4", "0x4",  "-4x4", "4x-4", "4x4x4x4", "a",    "4xa",
                           "4 x4",  " 4x4", "4x4 ", "4X4",  "4.0x4",   "+4x4", "99999999999x4"}) {
    EXPECT_THROW(Topology::parse(text), Error) << "'" << text << "'";
  }
}

// --- slices
// ---------------------------------------------------------------------------------------

TEST(Slice, Tpu7x4x4x8) {
  Slice slice = Slice::parse("tpu7x:4x4x8");
  EXPECT_EQ(slice.type().name, "tpu7x");
  EXPECT_EQ(slice.chips(), 128);
  EXPECT_EQ(slice.devices(), 256);
  EXPECT_EQ(slice.chips_per_host(), 4);
  EXPECT_EQ(slice.hosts(), 32);
  EXPECT_EQ(slice.partition(), Topology({4, 4, 4}));
  EXPECT_EQ(slice.partition().str(), "4x4x4");
  EXPECT_EQ(slice.partition_hosts(), 16);
  EXPECT_EQ(slice.compile_topology(), "tpu7x-256");
  EXPECT_EQ(slice.instance_type(), "tpu7x:4x4x8");
  EXPECT_EQ(slice.type().gke_accelerator, "tpu7x");
  EXPECT_EQ(slice.topology().str(), "4x4x8");
}

TEST(Slice, Tpu7x4x4x4) {
  Slice slice = Slice::parse("tpu7x:4x4x4");
  EXPECT_EQ(slice.chips(), 64);
  EXPECT_EQ(slice.devices(), 128);
  EXPECT_EQ(slice.hosts(), 16);
  EXPECT_EQ(slice.partition().str(), "4x4x4");
  EXPECT_EQ(slice.partition_hosts(), 16);
  EXPECT_EQ(slice.compile_topology(), "tpu7x-128");
  EXPECT_EQ(slice.instance_type(), "tpu7x:4x4x4");
}

TEST(Slice, Tpu7x2x2x1) {
  Slice slice = Slice::parse("tpu7x:2x2x1");
  EXPECT_EQ(slice.chips(), 4);
  EXPECT_EQ(slice.devices(), 8);
  EXPECT_EQ(slice.hosts(), 1);
  EXPECT_EQ(slice.chips_per_host(), 4);
  EXPECT_EQ(slice.partition(), Topology({2, 2, 1}));
  EXPECT_EQ(slice.partition_hosts(), 1);
  EXPECT_EQ(slice.compile_topology(), "tpu7x-8");
  EXPECT_EQ(slice.instance_type(), "tpu7x:2x2x1");
}

TEST(Slice, Tpu7xLargerAndSmaller) {
  Slice big = Slice::parse("tpu7x:8x8x16");
  EXPECT_EQ(big.chips(), 1024);
  EXPECT_EQ(big.hosts(), 256);
  EXPECT_EQ(big.partition().str(), "4x4x4");
  EXPECT_EQ(big.partition_hosts(), 16);
  Slice rollout = Slice::parse("tpu7x:2x2x4");
  EXPECT_EQ(rollout.chips(), 16);
  EXPECT_EQ(rollout.devices(), 32);
  EXPECT_EQ(rollout.hosts(), 4);
  EXPECT_EQ(rollout.partition().str(), "2x2x4");
  EXPECT_EQ(rollout.partition_hosts(), 4);
  Slice single = Slice::parse("tpu7x:1x1x1");
  EXPECT_EQ(single.chips(), 1);
  EXPECT_EQ(single.chips_per_host(), 1);
  EXPECT_EQ(single.hosts(), 1);
  EXPECT_EQ(single.partition_hosts(), 1);
}

TEST(Slice, V5p) {
  for (const char* text : {"v5p:4x4x4", "tpuv5:4x4x4", "tpu-v5p-slice:4x4x4", "tpuv5p:4x4x4"}) {
    SCOPED_TRACE(text);
    Slice slice = Slice::parse(text);
    EXPECT_EQ(slice.type().name, "v5p");
    EXPECT_EQ(slice.chips(), 64);
    EXPECT_EQ(slice.devices(), 64);
    EXPECT_EQ(slice.hosts(), 16);
    EXPECT_EQ(slice.instance_type(), "tpuv5:4x4x4");
    EXPECT_EQ(slice.compile_topology(), "v5p-128");
    EXPECT_EQ(slice.type().gke_accelerator, "tpu-v5p-slice");
  }
  Slice small = Slice::parse("tpuv5:2x2x1");
  EXPECT_EQ(small.chips(), 4);
  EXPECT_EQ(small.hosts(), 1);
  EXPECT_EQ(small.compile_topology(), "v5p-8");
  EXPECT_EQ(small.instance_type(), "tpuv5:2x2x1");
}

TEST(Slice, V6eTwoDimensional) {
  Slice slice = Slice::parse("v6e:4x4");
  EXPECT_EQ(slice.type().name, "v6e");
  EXPECT_EQ(slice.chips(), 16);
  EXPECT_EQ(slice.devices(), 16);
  EXPECT_EQ(slice.hosts(), 4);
  EXPECT_EQ(slice.compile_topology(), "v6e-16");
  EXPECT_EQ(slice.instance_type(), "tpuv6e:4x4");
  EXPECT_EQ(slice.partition().str(), "4x4");
  EXPECT_EQ(slice.type().gke_accelerator, "tpu-v6e-slice");

  Slice pod = Slice::parse("v6e:16x16");
  EXPECT_EQ(pod.chips(), 256);
  EXPECT_EQ(pod.hosts(), 64);
  EXPECT_EQ(pod.compile_topology(), "v6e-256");
  EXPECT_EQ(pod.partition().str(), "16x16");

  Slice small = Slice::parse("tpu-v6e-slice:2x2");
  EXPECT_EQ(small.chips(), 4);
  EXPECT_EQ(small.hosts(), 1);
  Slice one = Slice::parse("tpuv6e:1x1");
  EXPECT_EQ(one.chips(), 1);
  EXPECT_EQ(one.hosts(), 1);
}

TEST(Slice, V5eAndV4) {
  Slice v5e = Slice::parse("v5litepod:4x4");
  EXPECT_EQ(v5e.type().name, "v5e");
  EXPECT_EQ(v5e.chips(), 16);
  EXPECT_EQ(v5e.compile_topology(), "v5e-16");
  EXPECT_EQ(Slice::parse("tpu-v5-lite-podslice:2x2").type().name, "v5e");
  Slice v4 = Slice::parse("v4:2x2x2");
  EXPECT_EQ(v4.chips(), 8);
  EXPECT_EQ(v4.hosts(), 2);
  EXPECT_EQ(v4.compile_topology(), "v4-16");
}

TEST(Slice, Aliases) {
  for (const char* alias : {"tpu7x", "v7x", "tpuv7x"}) {
    EXPECT_EQ(find_tpu_type(alias).name, "tpu7x") << alias;
  }
  for (const char* alias : {"v5p", "tpuv5", "tpuv5p", "tpu-v5p-slice"}) {
    EXPECT_EQ(find_tpu_type(alias).name, "v5p") << alias;
  }
  for (const char* alias : {"v6e", "tpuv6e", "tpu-v6e-slice"}) {
    EXPECT_EQ(find_tpu_type(alias).name, "v6e") << alias;
  }
  for (const char* alias : {"v5e", "tpuv5e", "v5litepod", "v5lite", "tpu-v5-lite-podslice"}) {
    EXPECT_EQ(find_tpu_type(alias).name, "v5e") << alias;
  }
  EXPECT_EQ(Slice::parse("v7x:4x4x8").instance_type(), "tpu7x:4x4x8");
  EXPECT_EQ(Slice::parse("tpuv7x:4x4x8").compile_topology(), "tpu7x-256");
}

TEST(Slice, TypeTable) {
  std::vector<std::string> names;
  for (const TpuType& type : tpu_types()) names.push_back(type.name);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"tpu7x", "v5p", "v6e", "v5e"}));
  const TpuType& tpu7x = find_tpu_type("tpu7x");
  EXPECT_EQ(tpu7x.devices_per_chip, 2);
  EXPECT_EQ(tpu7x.dimensions, 3);
  EXPECT_GT(tpu7x.hbm_gib_per_device, 0.0);
  EXPECT_EQ(find_tpu_type("v6e").dimensions, 2);
}

TEST(Slice, Errors) {
  std::string unknown = slice_error("v9:4x4x4");
  EXPECT_THAT(unknown, HasSubstr("v9"));
  EXPECT_THAT(unknown, HasSubstr("tpu7x"));  // lists the known names
  EXPECT_THAT(unknown, HasSubstr("v5p"));
  EXPECT_THROW(find_tpu_type(""), Error);
  EXPECT_THROW(find_tpu_type("TPU7X"), Error);

  EXPECT_THAT(slice_error("tpu7x:4x4"), HasSubstr("4x4"));  // 2-D on a 3-D type
  EXPECT_THAT(slice_error("tpu7x:4x4"), HasSubstr("3-D"));
  EXPECT_THAT(slice_error("v6e:4x4x4"), HasSubstr("2-D"));           // 3-D on a 2-D type
  EXPECT_THAT(slice_error("tpu7x:4x4x0"), HasSubstr("4x4x0"));       // zero
  EXPECT_THAT(slice_error("tpu7x:4xx4"), HasSubstr("4xx4"));         // bad topology
  EXPECT_THAT(slice_error("4x4x8"), HasSubstr("TYPE:TOPOLOGY"));     // no type
  EXPECT_THAT(slice_error("tpu7x:1x1x5"), HasSubstr("hosts of 4"));  // 5 chips cannot split
  for (const char* text : {"", ":", "tpu7x:", ":4x4x4", "tpu7x:4x4x8:1", "tpu7x 4x4x8",
                           "tpu7x:4x4x8x2", "tpu7x:0x0x0", "tpu7x:-4x4x4", "v5p:4x4"}) {
    EXPECT_THROW(Slice::parse(text), Error) << "'" << text << "'";
  }
}

// --- fill_fsdp
// ------------------------------------------------------------------------------------

TEST(FillFsdp, FillsTheDevices) {
  EXPECT_EQ(fill_fsdp(256, 4, 2, 1), 32);  // the 397B v7x trainer: 4x4x8 mesh 32/1/2/4
  EXPECT_EQ(fill_fsdp(128, 2, 1, 1), 64);  // 35B on tpu7x 4x4x4
  EXPECT_EQ(fill_fsdp(64, 2, 1, 1), 32);   // 35B on v5p 4x4x4
  EXPECT_EQ(fill_fsdp(8, 1, 1, 8), 1);
  EXPECT_EQ(fill_fsdp(Slice::parse("tpu7x:4x4x4").devices(), 4, 2, 1), 16);
}

TEST(FillFsdp, NotDividingNamesTheNumbers) {
  std::string message = fsdp_error(256, 3, 2, 1);
  EXPECT_THAT(message, HasSubstr("256"));
  EXPECT_THAT(message, HasSubstr("3"));
  EXPECT_THAT(message, HasSubstr("6"));
  EXPECT_THAT(message, HasSubstr("context"));
  EXPECT_THAT(message, HasSubstr("expert"));
  EXPECT_THAT(fsdp_error(128, 4, 4, 16), HasSubstr("256"));  // more than the devices
  EXPECT_THAT(fsdp_error(8, 0, 1, 1), HasSubstr("positive"));
  EXPECT_THAT(fsdp_error(8, 1, -2, 1), HasSubstr("positive"));
  EXPECT_THAT(fsdp_error(8, 1, 1, 0), HasSubstr("positive"));
}

}  // namespace
}  // namespace rtb
