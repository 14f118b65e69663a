#include "rtb/k8s/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "rtb/base/error.h"
#include "rtb/k8s/shell.h"
#include "test_util.h"

namespace rtb::k8s {
namespace {

using Edit = FlagList::Edit;

std::string error_of(auto&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.message();
  }
  return "(no error)";
}

// From dryrun-structure.md 3.5 (trainer main container, trimmed).
constexpr std::string_view kTrainerLibtpu =
    "--DANGEROUS_tpu_runtime_abi_verification_disabled=true "
    "--xla_tpu_use_tc_device_shape_on_sc=true --xla_tpu_scoped_vmem_limit_kib=65472 "
    "--xla_tpu_dvfs_p_state=7";
// The rollout's value starts with a space.
constexpr std::string_view kRolloutLibtpu =
    " --xla_tpu_use_minor_sharding_for_major_trivial_input=true --xla_tpu_dvfs_p_state=7";
// From dryrun-structure.md 3.4 (MAXTEXT_EXTRA_FLAGS, trimmed).
constexpr std::string_view kMaxtextFlags =
    "custom_mesh_and_rule=cp-as-ep use_gdn_kernel=true use_ring_of_experts=true "
    "ragged_buffer_factor=2.0 num_moe_token_chunks=2 sa_block_q=1024 context=remat "
    "rollout_fp8_moe=true fp8_moe_fake_quant=true";

// Items and the key flag_key() finds in them ("": not a flag of the style).
void expect_keys(FlagStyle style,
                 std::initializer_list<std::pair<std::string_view, std::string_view>> cases) {
  for (const auto& [item, key] : cases) EXPECT_EQ(flag_key(item, style), key) << item;
}
// Items and the value flag_value() finds in them.
void expect_values(
    FlagStyle style,
    std::initializer_list<std::pair<std::string_view, std::optional<std::string_view>>> cases) {
  for (const auto& [item, value] : cases) EXPECT_EQ(flag_value(item, style), value) << item;
}

TEST(FlagKey, DashDashForms) {
  constexpr auto kStyle = FlagStyle::kDashDash;
  expect_keys(kStyle, {{"--maxtext_attention=flash", "maxtext_attention"},
                       {"--use_weight_converter", "use_weight_converter"},
                       {"--no-use_rollout_logps", "use_rollout_logps"},
                       {"--xla_tpu_foo.bar=1", "xla_tpu_foo.bar"},
                       {"--some-dashed-key=a=b", "some-dashed-key"},
                       {"--no-k=v", "no-k"},  // a value: not the negated form
                       {"--megascale_port=-1", "megascale_port"}});
  for (std::string_view positional : {"python", "-m", "-v", "--", "--=v", "", "x=1"}) {
    EXPECT_EQ(flag_key(positional, kStyle), "") << positional;
  }
  expect_values(kStyle, {{"--k=v", "v"},
                         {"--k=", ""},
                         {"--k", std::nullopt},
                         {"--no-k", std::nullopt},
                         {"k=v", std::nullopt}});
  EXPECT_TRUE(is_negated("--no-k", kStyle));
  EXPECT_FALSE(is_negated("--no-k=1", kStyle));
  EXPECT_FALSE(is_negated("--k", kStyle));
  EXPECT_FALSE(is_negated("--no-k", FlagStyle::kKeyValue));
}

TEST(FlagKey, KeyValueForms) {
  constexpr auto kStyle = FlagStyle::kKeyValue;
  expect_keys(kStyle,
              {{"sa_block_q=1024", "sa_block_q"}, {"a=b=c", "a"}, {"novalue", ""}, {"=v", ""}});
  expect_values(kStyle, {{"a=b=c", "b=c"}, {"=v", std::nullopt}});
}

TEST(SplitFlagItems, SplitsOnBlanksAndChecksNothing) {
  EXPECT_THAT(split_flag_items(" a=1\t\tpositional \n --k "),
              ElementsAre("a=1", "positional", "--k"));
  EXPECT_THAT(split_flag_items(" \t\n"), ElementsAre());
}

TEST(FlagList, ParseAndStrKeepOrderAndDropExtraBlanks) {
  FlagList libtpu = FlagList::parse(kRolloutLibtpu, FlagStyle::kDashDash);
  EXPECT_THAT(libtpu.items(),
              ElementsAre("--xla_tpu_use_minor_sharding_for_major_trivial_input=true",
                          "--xla_tpu_dvfs_p_state=7"));
  EXPECT_EQ(libtpu.str(), kRolloutLibtpu.substr(1));
  EXPECT_EQ(libtpu.style(), FlagStyle::kDashDash);
  EXPECT_THAT(FlagList::parse(" a=1\t\tb=2 \n c=3 ", FlagStyle::kKeyValue).items(),
              ElementsAre("a=1", "b=2", "c=3"));
  EXPECT_TRUE(FlagList::parse("  ", FlagStyle::kKeyValue).items().empty());
  EXPECT_EQ(FlagList::parse("", FlagStyle::kDashDash).str(), "");
  FlagList maxtext = FlagList::parse(kMaxtextFlags, FlagStyle::kKeyValue);
  EXPECT_EQ(maxtext.str(), kMaxtextFlags);
  EXPECT_EQ(maxtext.items().size(), 9u);
}

TEST(FlagList, GetValues) {
  FlagList libtpu = FlagList::parse(kTrainerLibtpu, FlagStyle::kDashDash);
  EXPECT_EQ(libtpu.value("xla_tpu_scoped_vmem_limit_kib"), "65472");
  EXPECT_EQ(libtpu.find("xla_tpu_scoped_vmem_limit_kib"), 2u);
  EXPECT_TRUE(libtpu.contains("DANGEROUS_tpu_runtime_abi_verification_disabled"));
  EXPECT_FALSE(libtpu.contains("xla_tpu_max_hbm_size_mib"));
  EXPECT_EQ(libtpu.value("xla_tpu_max_hbm_size_mib"), std::nullopt);
  EXPECT_FALSE(libtpu.contains(""));

  FlagList argv(FlagStyle::kDashDash, {"python", "-m", "tunix.main", "--use_weight_converter",
                                       "--no-use_rollout_logps", "--maxtext_attention=flash"});
  EXPECT_EQ(argv.value("use_weight_converter"), std::nullopt);
  EXPECT_TRUE(argv.contains("use_weight_converter"));
  EXPECT_TRUE(argv.contains("use_rollout_logps"));
  EXPECT_EQ(argv.find("use_rollout_logps"), 4u);
  EXPECT_FALSE(argv.contains("m"));
  EXPECT_EQ(argv.value("maxtext_attention"), "flash");

  FlagList maxtext = FlagList::parse(kMaxtextFlags, FlagStyle::kKeyValue);
  EXPECT_EQ(maxtext.value("ragged_buffer_factor"), "2.0");
  EXPECT_EQ(maxtext.value("custom_mesh_and_rule"), "cp-as-ep");
  EXPECT_EQ(maxtext.count("context"), 1u);
}

TEST(FlagList, UpsertReplacesInPlaceOrAppends) {
  FlagList libtpu = FlagList::parse(kTrainerLibtpu, FlagStyle::kDashDash);
  EXPECT_EQ(libtpu.upsert("--xla_tpu_scoped_vmem_limit_kib=32768"), Edit::kReplaced);
  EXPECT_EQ(libtpu.upsert("--xla_tpu_max_hbm_size_mib=84992"), Edit::kAppended);
  EXPECT_EQ(libtpu.upsert("--xla_tpu_dvfs_p_state=7"), Edit::kUnchanged);
  EXPECT_EQ(libtpu.str(),
            "--DANGEROUS_tpu_runtime_abi_verification_disabled=true "
            "--xla_tpu_use_tc_device_shape_on_sc=true --xla_tpu_scoped_vmem_limit_kib=32768 "
            "--xla_tpu_dvfs_p_state=7 --xla_tpu_max_hbm_size_mib=84992");

  FlagList maxtext = FlagList::parse(kMaxtextFlags, FlagStyle::kKeyValue);
  EXPECT_EQ(maxtext.upsert("sa_block_q=2048"), Edit::kReplaced);
  EXPECT_EQ(maxtext.upsert("num_experts_per_tok=8"), Edit::kAppended);
  EXPECT_EQ(maxtext.upsert("context=remat"), Edit::kUnchanged);
  EXPECT_EQ(maxtext.items()[5], "sa_block_q=2048");
  EXPECT_EQ(maxtext.items().back(), "num_experts_per_tok=8");
  EXPECT_EQ(maxtext.items().size(), 10u);
}

TEST(FlagList, UpsertAtAGivenPosition) {
  // pathways-proxy args: new --xla_* flags go before --sidecar_name=external.
  FlagList proxy(FlagStyle::kDashDash, {"--server_port=29000", "--temporary_flags_for_debugging=x",
                                        "--xla_tpu_dvfs_p_state=7", "--sidecar_name=external"});
  EXPECT_EQ(proxy.upsert("--xla_tpu_max_hbm_size_mib=84992", 3), Edit::kAppended);
  EXPECT_EQ(proxy.items()[3], "--xla_tpu_max_hbm_size_mib=84992");
  EXPECT_EQ(proxy.items()[4], "--sidecar_name=external");
  // A present key is replaced where it stands, whatever `append_at` says.
  EXPECT_EQ(proxy.upsert("--xla_tpu_dvfs_p_state=5", 0), Edit::kReplaced);
  EXPECT_EQ(proxy.items()[2], "--xla_tpu_dvfs_p_state=5");
  EXPECT_THAT(error_of([&] { proxy.upsert("--new=1", 6); }), HasSubstr("position 6"));
  EXPECT_EQ(proxy.items().size(), 5u);
}

TEST(FlagList, BareAndNegatedFormsAreReplacedByValuesAndBack) {
  FlagList argv(FlagStyle::kDashDash,
                {"python", "--use_weight_converter", "--no-use_rollout_logps", "--steps=3"});
  EXPECT_EQ(argv.upsert("--use_rollout_logps=true"), Edit::kReplaced);
  EXPECT_EQ(argv.upsert("--use_weight_converter=false"), Edit::kReplaced);
  EXPECT_THAT(argv.items(), ElementsAre("python", "--use_weight_converter=false",
                                        "--use_rollout_logps=true", "--steps=3"));
  EXPECT_EQ(argv.upsert("--no-use_weight_converter"), Edit::kReplaced);
  argv.replace("--steps");
  EXPECT_EQ(argv.upsert("--use_rollout_logps"), Edit::kReplaced);
  EXPECT_THAT(argv.items(),
              ElementsAre("python", "--no-use_weight_converter", "--use_rollout_logps", "--steps"));
  EXPECT_EQ(argv.value("steps"), std::nullopt);
}

TEST(FlagList, ReplaceRequiresThePresentKey) {
  FlagList argv(FlagStyle::kDashDash, {"--profiler_steps=0", "--skip_first_n_profiler_steps=-1"});
  argv.replace("--profiler_steps=5");
  EXPECT_THAT(argv.items(), ElementsAre("--profiler_steps=5", "--skip_first_n_profiler_steps=-1"));
  EXPECT_EQ(error_of([&] { argv.replace("--compute_logps_chunk_size=4"); }),
            "--compute_logps_chunk_size is not set");

  FlagList maxtext = FlagList::parse(kMaxtextFlags, FlagStyle::kKeyValue);
  maxtext.replace("num_moe_token_chunks=4");
  EXPECT_EQ(maxtext.items()[4], "num_moe_token_chunks=4");
  EXPECT_EQ(error_of([&] { maxtext.replace("ici_fsdp_parallelism=8"); }),
            "ici_fsdp_parallelism is not set");
  EXPECT_EQ(maxtext.str().find("ici_"), std::string::npos);
}

TEST(FlagList, RemoveTakesAKeyOrAnyFormOfTheItem) {
  FlagList argv(FlagStyle::kDashDash, {"python", "--a=1", "--b", "--no-c", "--d=4", "--a=2"});
  EXPECT_EQ(argv.remove("--a=whatever"), 2u);
  EXPECT_EQ(argv.remove("b"), 1u);
  EXPECT_EQ(argv.remove("--c"), 1u);
  EXPECT_EQ(argv.remove("--no-d"), 1u);
  EXPECT_THAT(argv.items(), ElementsAre("python"));
  EXPECT_EQ(error_of([&] { argv.remove("--a"); }), "--a is not set");
  EXPECT_THAT(error_of([&] { argv.remove(""); }), HasSubstr("empty key"));

  FlagList maxtext = FlagList::parse(kMaxtextFlags, FlagStyle::kKeyValue);
  EXPECT_EQ(maxtext.remove("use_gdn_kernel"), 1u);
  EXPECT_EQ(maxtext.remove("context=anything"), 1u);
  EXPECT_EQ(maxtext.str(),
            "custom_mesh_and_rule=cp-as-ep use_ring_of_experts=true ragged_buffer_factor=2.0 "
            "num_moe_token_chunks=2 sa_block_q=1024 rollout_fp8_moe=true fp8_moe_fake_quant=true");
  EXPECT_EQ(error_of([&] { maxtext.remove("context"); }), "context is not set");
}

TEST(FlagList, RemoveWithAnItemOfTheListItself) {
  FlagList argv(FlagStyle::kDashDash, {"--x=1", "--y=2", "--x=3"});
  EXPECT_EQ(argv.remove(argv.items()[0]), 2u);
  EXPECT_THAT(argv.items(), ElementsAre("--y=2"));
}

TEST(FlagList, DuplicatesLastOccurrenceIsTheEffectiveOne) {
  FlagList argv(FlagStyle::kDashDash, {"--lr=1", "--steps=2", "--lr=3", "x"});
  EXPECT_EQ(argv.count("lr"), 2u);
  EXPECT_EQ(argv.find("lr"), 2u);
  EXPECT_EQ(argv.value("lr"), "3");
  EXPECT_EQ(argv.upsert("--lr=5"), Edit::kReplaced);
  EXPECT_THAT(argv.items(), ElementsAre("--lr=1", "--steps=2", "--lr=5", "x"));
  argv.replace("--lr=6");
  EXPECT_THAT(argv.items(), ElementsAre("--lr=1", "--steps=2", "--lr=6", "x"));
  EXPECT_EQ(argv.upsert("--lr=6"), Edit::kUnchanged);
  EXPECT_EQ(argv.upsert("--lr=1"), Edit::kReplaced);  // compares with the last one

  FlagList maxtext = FlagList::parse("a=1 b=2 a=3", FlagStyle::kKeyValue);
  EXPECT_EQ(maxtext.value("a"), "3");
  maxtext.upsert("a=4");
  EXPECT_EQ(maxtext.str(), "a=1 b=2 a=4");
}

TEST(FlagList, MalformedItemsAreRejected) {
  EXPECT_EQ(error_of([] { FlagList::parse("a=1 oops b=2", FlagStyle::kKeyValue); }),
            "'oops' is not a key=value item");
  EXPECT_EQ(error_of([] { FlagList(FlagStyle::kKeyValue, {"=1"}); }),
            "'=1' is not a key=value item");
  EXPECT_THAT(error_of([] { FlagList(FlagStyle::kKeyValue, {"a=x y"}); }), HasSubstr("blank"));
  FlagList maxtext = FlagList::parse("a=1", FlagStyle::kKeyValue);
  EXPECT_THROW(maxtext.upsert("b"), Error);
}

TEST(FlagList, DashDashRejectsNonFlagsOnEdit) {
  FlagList argv(FlagStyle::kDashDash, {"python", "-m", "x"});  // positional words are fine
  for (std::string_view bad : {"-v", "x=1", "--", "--=1", ""}) {
    EXPECT_THAT(error_of([&] { argv.upsert(bad); }), HasSubstr("is not a --key")) << bad;
    EXPECT_THROW(argv.replace(bad), Error) << bad;
  }
  EXPECT_THAT(argv.items(), ElementsAre("python", "-m", "x"));
}

TEST(FlagList, ArgvWithQuotedValuesFromTheStartupLine) {
  std::vector<std::string> words;
  for (const shell::Word& word :
       shell::split("--optimizer_chain_kwargs=\"{'max_norm': 0.0625}\" "
                    "--trainable_parameters_mask='^(?!.*routed_experts/gate/kernel).*'")) {
    words.push_back(word.value);
  }
  FlagList argv(FlagStyle::kDashDash, words);
  EXPECT_EQ(argv.value("optimizer_chain_kwargs"), "{'max_norm': 0.0625}");
  EXPECT_EQ(argv.upsert("--optimizer_chain_kwargs={'max_norm': 1.0}"), Edit::kReplaced);
  EXPECT_EQ(shell::join(argv.items()),
            "'--optimizer_chain_kwargs={'\\''max_norm'\\'': 1.0}' "
            "'--trainable_parameters_mask=^(?!.*routed_experts/gate/kernel).*'");
}

}  // namespace
}  // namespace rtb::k8s
