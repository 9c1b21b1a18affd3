#!/usr/bin/env bash
# Issue 55 item 5 on a lent GPU, in one call of at most ~9.5 minutes: the
# Craftax arms of benchmarks/craftax_arms.py (Disco103, `crafter` protocol,
# one factor changed per arm) at 250,000 environment steps, each arm's
# seeds trained together (one vmapped program, `--seeds-together`) in one
# piece without checkpoints, arm after arm until the deadline; a run the
# deadline stops keeps its log rows as a partial record, and the arms not
# started are left for the next call (the same command: a finished arm is
# skipped, a partial one starts over).
#
# What one arm costs there (H200, docs/results/gpu.md): three seeds of the
# base run cost 1.31 ms per update and seed with the inner scans unrolled
# (the default off CPUs; 2026-11-29), so 250,000 steps (35,920 updates)
# take about 2.4 minutes after a compile of about 1.5; conv_grid's three
# seeds took 414 s, compiles included (2026-11-30): about one arm per call.
#
# GPU_ARMS (default "width_1024 width_256 base no_weight_decay"; conv_grid ran),
# GPU_SEEDS (default "0 1 2"), GPU_ENV_STEPS (default 250000) and
# GPU_DEADLINE_S (default 540: seconds after the start, then the run is
# stopped) change it. Wheels and weights as for gpu_protocol.sh (carry
# [".whl", ".gpu"]). Everything comes back in $OUT: log.txt, arms.csv,
# summary.csv, curves.png and runs.tgz (the records, to unpack under
# benchmarks/results/craftax_arms_gpu/).
# Tried on the CPU at a tiny budget with:
#   SKIP_INSTALL=1 OUT=/tmp/out GPU_ARMS="base no_weight_decay" \
#     GPU_SEEDS="0 1" GPU_ENV_STEPS=1400 PY=python \
#     bash benchmarks/gpu_arms.sh
set -u
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
PY="${PY:-python3}"
ARMS="${GPU_ARMS:-width_1024 width_256 base no_weight_decay}"
SEEDS="${GPU_SEEDS:-0 1 2}"
BENCH="${GPU_BENCH_DIR:-/tmp/gpu_arms}"
DEADLINE="${GPU_DEADLINE_S:-540}"
mkdir -p "${OUT}" # The device gives an empty one; elsewhere make it.
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
{
  nvidia-smi -L 2>/dev/null
  # shellcheck disable=SC2086
  timeout -s INT -k 30 "$((DEADLINE - $(elapsed)))" "${PY}" \
    benchmarks/craftax_arms.py --out "${BENCH}" --arms ${ARMS} \
    --seeds ${SEEDS} --seeds-together --no-checkpoints --no-progress \
    --env-steps "${GPU_ENV_STEPS:-250000}" --steps-per-chunk 10
  echo "[$(elapsed) s] arms stopped or done"
  "${PY}" benchmarks/craftax_arms.py --out "${BENCH}" --report \
    --include-partial
  echo "[$(elapsed) s] report done"
} 2>&1 | tee "${OUT}/log.txt"
cp "${BENCH}"/{arms,summary}.csv "${BENCH}/curves.png" "${OUT}/" 2>/dev/null
tar czf "${OUT}/runs.tgz" -C "${BENCH}" runs 2>/dev/null
echo "[$(elapsed) s] end"
