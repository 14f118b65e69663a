// The default routing target table, a copy of data/routing/qwen3.5-397b-a17b.txt (that file is the
// source; routing_test checks that this copy equals it byte for byte, so edit the file, then paste
// its text between the delimiters below).
#include "rtb/routing.h"

namespace rtb {

std::string_view default_routing_table_text() {
  static constexpr std::string_view kText = R"rtb_table(# Default per-layer routing targets (max expert load / mean expert load) for Qwen3.5-397B-A17B:
# 60 decoder layers, each with an MoE block of 512 routed experts, top-10 per token.
#
# NOT MEASURED. This is an extrapolation. No public per-layer load data exists for 512 experts at
# top-10 (Qwen3-Next / Qwen3.5); the numbers below are derived from a measurement of a smaller model
# of the same family. Replace this table with one measured on your own production run:
#   check-payload measure ROUTED_EXPERTS.npy --ep 2 -o my-targets.txt
# (ROUTED_EXPERTS: the routed-experts array of real micro-batches, [R,T,L,K] or [N,L,K]) and pass it
# with --routing-targets my-targets.txt (check-payload) or to render-bench.
#
# Source: Qwen3-30B-A3B-Base (128 experts, top-8, 48 MoE layers) on real text: the per-layer median
# over 6 English benchmark sets (ARC, COPA, GSM8K, MMLU, NLI, TED; 10^4-10^5 tokens each) of
# max_e(c_e) / mean_e(c_e), c_e = token-slots routed to expert e. File
# ../shared/external/routing/derived/qwen3-30b-a3b-base_max_over_mean.csv (its SOURCES.md, section 1,
# gives the origin: sarelWeinberger/qwen-hebrew-finetuning @ d82c8315, cross_lang_moe_analysis/
# moe_csv_results/*_avg_activation.csv). A copy is testdata/routing_qwen3-30b-a3b-base_max_over_mean.csv.
#
# Derivation (two assumptions):
# 1. Depth: layer l of the 60 takes the value at the same relative depth of the 48 measured layers,
#    x = l * 47 / 59, linearly interpolated between measured layers floor(x) and floor(x) + 1.
# 2. Magnitude: max/mean is kept as measured, not rescaled for 512 experts at top-10. Max/mean is
#    the quantity the load-balancing loss acts on (it is E/K times the hottest expert's token share),
#    and the measured fine-grained models sit at the same magnitude despite different E/K:
#    DeepSeek-V3 (256 experts, top-8, E/K = 32) median 6.3, Qwen3-30B-A3B (128, top-8, E/K = 16)
#    median 7.9. Keeping the hottest expert's token share instead would multiply every value by
#    (512/10) / (128/8) = 3.2. The reachable maximum here is E/K = 51.2; these values are 3.9-10.1.
#    Production micro-batches mix many prompts and domains, which usually lowers max/mean compared
#    with a single benchmark set; --routing-scale S (t' = 1 + S (t - 1)) stretches or shrinks it.
#
# Reproduce (Python 3, standard library; prints the `layer,target` lines below):
#   import csv
#   src = "../shared/external/routing/derived/qwen3-30b-a3b-base_max_over_mean.csv"
#   v = [float(r["max_over_mean"]) for r in csv.DictReader(open(src))]
#   for l in range(60):
#       x = l * (len(v) - 1) / 59
#       i = min(int(x), len(v) - 2)
#       print(f"{l},{v[i] + (x - i) * (v[i + 1] - v[i]):.4f}")
#
# Format: `layer,target` (0-based layer, max/mean load >= 1).
0,3.9452
1,5.4326
2,6.4876
3,6.7871
4,6.8400
5,8.1601
6,8.2005
7,8.0422
8,8.3314
9,8.6679
10,7.0236
11,7.7742
12,7.8818
13,7.6491
14,7.5122
15,7.8960
16,7.7804
17,8.4530
18,9.4638
19,10.0506
20,8.8817
21,8.9177
22,8.3780
23,8.2673
24,9.0098
25,8.0269
26,7.4879
27,7.8204
28,7.9491
29,7.1376
30,7.2511
31,7.9493
32,8.2192
33,8.7722
34,10.0758
35,8.7600
36,8.2241
37,7.9584
38,8.0391
39,8.5162
40,7.9296
41,7.6531
42,7.8124
43,7.9299
44,7.4296
45,7.8033
46,8.0965
47,8.7833
48,9.4856
49,9.4311
50,9.2062
51,8.0106
52,7.4469
53,7.5778
54,7.4562
55,6.8081
56,7.1409
57,7.3811
58,7.0828
59,6.3098
)rtb_table";
  return kText;
}

}  // namespace rtb
