"""rl-trainer-bench driver: times the RL trainer program of a Tunix GRPO run on one trainer slice.

render-bench writes this driver to /tmp/bench_driver.py in the bench JobSet's client container and
runs `python3 /tmp/bench_driver.py` in the trainer image (Tunix + MaxText + JAX on Pathways). It
builds the trainer worker, the GRPO algorithm and the batch configuration through Tunix's own
parsers and factories from the e2e argv, compiles, then times STEPS optimizer steps of MICRO_STEPS
fwd_bwd calls on a synthetic micro-batch whose MoE routing load is calibrated per layer.
`--help` says how to run it; its settings come from the environment (settings.tsv, one row each).

The source is the rtb_driver package (tools/render-bench/driver/ in rl-trainer-bench); the build
joins its modules into this one file (amalgamate.py), so that it travels inside the JobSet.
"""
