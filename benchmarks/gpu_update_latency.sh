#!/usr/bin/env bash
# Issue 37 item 3c on a lent GPU, one call of about 8 minutes: what the
# `crafter` iteration of Disco103 on Craftax-Classic costs per update
# (`learner_cost.py`: one rollout of 6 environments x 29 steps and the 25
# updates it feeds, steady state), and what cuts it, in this order (what
# fitting one seed's 1M-step run in one call needs first):
#   1. one seed alone: 7.3 ms per update on an H100 on 2026-11-28, 17.5
#      minutes for 1M steps;
#   2. one seed acting with 24 and 96 environments (100 and 400 updates
#      per rollout, the replay ratio kept): the rollout's 29 sequential
#      Craftax steps were half of it;
#   3. XLA's while-loop unrolling (`--xla_gpu_enable_while_loop_unrolling`),
#      one seed, each mode of GPU_UNROLL (default "DOUBLE_BUFFER
#      NO_UNROLL", against XLA's default mode in 1): the update's latency
#      is that of loops of small steps (docs/benchmarks.md). On 2026-11-28
#      FULL_UNROLL gave no row within 120 s (the default's program compiles
#      in 65 s);
#   4. three seeds together, each frame embedded once and every frame of
#      every stack (2026-11-28: 3.87 ms per update and seed, every frame).
# Each setting is its own learner_cost.py invocation (one process) under
# `timeout` (GPU_SETTING_TIMEOUT_S, default 120), and none starts after
# GPU_DEADLINE_S (default 420). The CSVs come back in $OUT with log.txt.
# Wheels and weights as for gpu_protocol.sh (carry [".whl",
# ".gpu/disco_103.npz"]).
# Tried on the CPU at a tiny budget with:
#   SKIP_INSTALL=1 OUT=/tmp/out GPU_CHUNK=1 GPU_CHUNKS=2 \
#     GPU_SETTING_TIMEOUT_S=300 bash benchmarks/gpu_update_latency.sh
set -u
shopt -s nullglob
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
PY="${PY:-python3}"
DEADLINE="${GPU_DEADLINE_S:-420}"
LOG="${OUT}/log.txt"
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
UNROLL=--xla_gpu_enable_while_loop_unrolling=WHILE_LOOP_UNROLLING
# One setting: its name, its XLA_FLAGS, then learner_cost.py's arguments.
setting() {
  local name=$1 flags=$2
  shift 2
  if (($(elapsed) >= DEADLINE)); then
    echo "[$(elapsed) s] ${name}: skipped (deadline)"
    return
  fi
  XLA_FLAGS="${flags}" timeout -s INT -k 10 \
    "${GPU_SETTING_TIMEOUT_S:-120}" "${PY}" benchmarks/learner_cost.py \
    --presets crafter --envs craftax:Craftax-Classic-Symbolic-v1 \
    --agents craftax_frames --dtypes float32 --rules disco \
    --chunk "${GPU_CHUNK:-10}" --chunks "${GPU_CHUNKS:-3}" "$@" \
    --out "${OUT}/${name}.csv"
  echo "[$(elapsed) s] ${name}: rc=$?"
}
{
  nvidia-smi -L 2>/dev/null
  setting one_seed "" --num-seeds 1
  setting one_seed_envs24 "" --num-seeds 1 --num-envs 24 --chunk 3
  setting one_seed_envs96 "" --num-seeds 1 --num-envs 96 --chunk 1
  for unroll in ${GPU_UNROLL:-DOUBLE_BUFFER NO_UNROLL}; do
    setting "unroll_${unroll,,}" "${UNROLL}_${unroll}" --num-seeds 1
  done
  setting once "" --num-seeds 3
  setting every "" --num-seeds 3 --frame-embeddings every
  for f in "${OUT}"/*.csv; do echo "== ${f##*/}"; cat "${f}"; done
} 2>&1 | tee "${LOG}"
