#include "rtb/bench/render_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "rtb/base/io.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

k8s::Document fixture_trainer() {
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt"), "launch_dryrun.txt");
  return *k8s::select_roles(dryrun, k8s::RoleMains{}).trainer;
}

// The seed's rule: the client's whole set (its order, its values, its repeats), then the workers'
// flags whose key the client does not set, in their order.
TEST(RenderTable, WorkersRunTheClientsLibtpuSetPlusTheirExtras) {
  auto flags = [](std::string_view text) {
    return k8s::FlagList::parse(text, k8s::FlagStyle::kDashDash);
  };
  EXPECT_THAT(bench_worker_libtpu(flags("--a=1 --b=2 --a=3"),
                                  flags("--b=9 --megascale_port=-1 --no-a --x=1"))
                  .items(),
              ::testing::ElementsAre("--a=1", "--b=2", "--a=3", "--megascale_port=-1", "--x=1"));
  EXPECT_THAT(bench_worker_libtpu(flags(""), flags("--x=1 --y")).items(),
              ::testing::ElementsAre("--x=1", "--y"));
  EXPECT_THAT(bench_worker_libtpu(flags("--a=1"), flags("")).items(),
              ::testing::ElementsAre("--a=1"));
}

TEST(RenderTable, SliceFieldsByKey) {
  test::expect_cases<std::optional<SliceField>, std::string_view>(
      slice_field, {{"cloud.google.com/gke-tpu-topology", SliceField::kTopology},
                    {"cloud.google.com/gke-tpu-slice-topology", SliceField::kTopology},
                    {"kueue.x-k8s.io/podset-slice-size", SliceField::kPartitionHosts},
                    {"cloud.google.com/gke-tpu-accelerator", SliceField::kAccelerator},
                    {"google.com/tpu", SliceField::kChipsPerHost},
                    {"kueue.x-k8s.io/podset-slice-required-topology", std::nullopt},
                    {kGangIdLabel, std::nullopt}});
}

TEST(RenderTable, SliceFieldValuesOfA256ChipSlice) {
  Slice slice = Slice::parse("tpu7x:4x4x8");
  EXPECT_EQ(slice_field_value(slice, SliceField::kTopology), "4x4x8");
  EXPECT_EQ(slice_field_value(slice, SliceField::kAccelerator), "tpu7x");
  EXPECT_EQ(slice_field_value(slice, SliceField::kChipsPerHost), "4");
  // A 4x4x8 slice is scheduled in 4x4x4 partitions of 16 four-chip hosts.
  EXPECT_EQ(slice_field_value(slice, SliceField::kPartitionHosts), "16");
}

TEST(RenderTable, TheTrainerSliceFromPathwaysRmFirst) {
  k8s::Document trainer = fixture_trainer();
  std::optional<TrainerSlice> found = find_trainer_slice(k8s::JobSetView(trainer));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->text, "tpu7x:4x4x8");
  EXPECT_EQ(found->source, "pathways-rm --instance_type");
}

TEST(RenderTable, TheTrainerSliceFromTheLabelsWithoutPathwaysRm) {
  k8s::Document trainer = fixture_trainer();
  trainer.root = YAML::Clone(trainer.root);
  k8s::JobSetView view(trainer);
  auto rm = view.container(kResourceManagerContainer);
  ASSERT_TRUE(rm);
  rm->node["name"] = "renamed";
  std::optional<TrainerSlice> found = find_trainer_slice(view);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->text, "tpu7x:4x4x8");
  EXPECT_EQ(found->source, "the accelerator and topology labels");
}

TEST(RenderTable, NoSliceWithoutRmOrLabels) {
  k8s::Document bare{YAML::Load("kind: JobSet\nmetadata: {name: x}\nspec: {replicatedJobs: []}\n"),
                     1};
  EXPECT_EQ(find_trainer_slice(k8s::JobSetView(bare)), std::nullopt);
}

TEST(RenderTable, TpuJobsAreThoseRequestingTpus) {
  k8s::Document trainer = fixture_trainer();
  EXPECT_EQ(tpu_jobs(k8s::JobSetView(trainer)), std::set<std::string>{"pw-node"});
}

}  // namespace
}  // namespace rtb::bench
