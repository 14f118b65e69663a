#include "rtb/base/slice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb {
namespace {

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

// What a slice of each type and size is made of: chips, devices (tpu7x has 2 a chip), hosts (up to
// 4 chips each), the partition (the podset slice: at most 4x4x4 for 3-D types) and the names each
// consumer spells: the compile topology (devices for tpu7x, cores for older 3-D types), the
// instance type and the GKE accelerator. An alias gives the same slice as the type's own name.
struct SliceFacts {
  const char* text;
  const char* type;
  int chips, devices, hosts, chips_per_host;
  const char* partition;
  int partition_hosts;
  const char* compile_topology;
  const char* instance_type;
  const char* gke_accelerator;
};

TEST(Slice, FactsOfEachTypeAndSize) {
  for (const SliceFacts& facts : {
           SliceFacts{"tpu7x:4x4x8", "tpu7x", 128, 256, 32, 4, "4x4x4", 16, "tpu7x-256",
                      "tpu7x:4x4x8", "tpu7x"},
           SliceFacts{"tpu7x:4x4x4", "tpu7x", 64, 128, 16, 4, "4x4x4", 16, "tpu7x-128",
                      "tpu7x:4x4x4", "tpu7x"},
           SliceFacts{"tpu7x:2x2x1", "tpu7x", 4, 8, 1, 4, "2x2x1", 1, "tpu7x-8", "tpu7x:2x2x1",
                      "tpu7x"},
           SliceFacts{"tpu7x:8x8x16", "tpu7x", 1024, 2048, 256, 4, "4x4x4", 16, "tpu7x-2048",
                      "tpu7x:8x8x16", "tpu7x"},
           SliceFacts{"tpu7x:2x2x4", "tpu7x", 16, 32, 4, 4, "2x2x4", 4, "tpu7x-32", "tpu7x:2x2x4",
                      "tpu7x"},
           SliceFacts{"tpu7x:1x1x1", "tpu7x", 1, 2, 1, 1, "1x1x1", 1, "tpu7x-2", "tpu7x:1x1x1",
                      "tpu7x"},
           SliceFacts{"v5p:4x4x4", "v5p", 64, 64, 16, 4, "4x4x4", 16, "v5p-128", "tpuv5:4x4x4",
                      "tpu-v5p-slice"},
           SliceFacts{"tpuv5:4x4x4", "v5p", 64, 64, 16, 4, "4x4x4", 16, "v5p-128", "tpuv5:4x4x4",
                      "tpu-v5p-slice"},
           SliceFacts{"tpu-v5p-slice:4x4x4", "v5p", 64, 64, 16, 4, "4x4x4", 16, "v5p-128",
                      "tpuv5:4x4x4", "tpu-v5p-slice"},
           SliceFacts{"tpuv5p:4x4x4", "v5p", 64, 64, 16, 4, "4x4x4", 16, "v5p-128", "tpuv5:4x4x4",
                      "tpu-v5p-slice"},
           SliceFacts{"tpuv5:2x2x1", "v5p", 4, 4, 1, 4, "2x2x1", 1, "v5p-8", "tpuv5:2x2x1",
                      "tpu-v5p-slice"},
           SliceFacts{"v6e:4x4", "v6e", 16, 16, 4, 4, "4x4", 4, "v6e-16", "tpuv6e:4x4",
                      "tpu-v6e-slice"},
           SliceFacts{"v6e:16x16", "v6e", 256, 256, 64, 4, "16x16", 64, "v6e-256", "tpuv6e:16x16",
                      "tpu-v6e-slice"},
           SliceFacts{"tpu-v6e-slice:2x2", "v6e", 4, 4, 1, 4, "2x2", 1, "v6e-4", "tpuv6e:2x2",
                      "tpu-v6e-slice"},
           SliceFacts{"tpuv6e:1x1", "v6e", 1, 1, 1, 1, "1x1", 1, "v6e-1", "tpuv6e:1x1",
                      "tpu-v6e-slice"},
           SliceFacts{"v5litepod:4x4", "v5e", 16, 16, 4, 4, "4x4", 4, "v5e-16", "tpuv5e:4x4",
                      "tpu-v5-lite-podslice"},
           SliceFacts{"tpu-v5-lite-podslice:2x2", "v5e", 4, 4, 1, 4, "2x2", 1, "v5e-4",
                      "tpuv5e:2x2", "tpu-v5-lite-podslice"},
           SliceFacts{"v4:2x2x2", "v4", 8, 8, 2, 4, "2x2x2", 2, "v4-16", "tpuv4:2x2x2",
                      "tpu-v4-podslice"},
       }) {
    SCOPED_TRACE(facts.text);
    Slice slice = Slice::parse(facts.text);
    EXPECT_EQ(slice.type().name, facts.type);
    EXPECT_EQ(slice.chips(), facts.chips);
    EXPECT_EQ(slice.devices(), facts.devices);
    EXPECT_EQ(slice.hosts(), facts.hosts);
    EXPECT_EQ(slice.chips_per_host(), facts.chips_per_host);
    EXPECT_EQ(slice.partition().str(), facts.partition);
    EXPECT_EQ(slice.partition_hosts(), facts.partition_hosts);
    EXPECT_EQ(slice.compile_topology(), facts.compile_topology);
    EXPECT_EQ(slice.instance_type(), facts.instance_type);
    EXPECT_EQ(slice.type().gke_accelerator, facts.gke_accelerator);
  }
  Slice slice = Slice::parse("tpu7x:4x4x8");
  EXPECT_EQ(slice.topology().str(), "4x4x8");
  EXPECT_EQ(slice.partition(), Topology({4, 4, 4}));
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
