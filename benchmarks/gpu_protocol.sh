#!/usr/bin/env bash
# Issue 37 item 3c on a lent GPU, in one call of at most ~9 minutes: one seed
# of Disco103 on Craftax-Classic at 1M environment steps with the paper's
# Crafter protocol (`--preset crafter`, agent `craftax_frames`: 143,678
# learner updates), as benchmarks/paper_protocol.py runs it on the CPU.
#   1. where the time goes: learner_cost.py's update cost (the update with
#      its share of the rollout, no evaluation, no checkpoints), alone;
#   2. the run, with few evaluations (GPU_EVALUATIONS, default 4) and rare
#      checkpoints (GPU_CHECKPOINT_EVERY iterations, default 1,000 of 5,747),
#      stopped at the deadline with its checkpoint kept; a stopped run is
#      reported up to its last checkpoint (`--include-partial`) and resumes
#      only on the same machine (the checkpoints live in $BENCH there).
# Everything comes back in $OUT: log.txt, learner_cost_gpu_crafter.csv, the
# report (results, summary, comparison, curves: CSV and PNG) and runs.tgz.
#
# The device has no network: the packages its image lacks travel as wheels
# in .whl/ and the weights in .gpu/ (both git-ignored; docs/benchmarks.md,
# "On a GPU").
#   PY=python3 bash benchmarks/gpu_protocol.sh
# Tried on the CPU at a tiny budget with:
#   SKIP_INSTALL=1 OUT=/tmp/out GPU_ENV_STEPS=2000 GPU_SKIP_COST=1 \
#     bash benchmarks/gpu_protocol.sh
set -u
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
PY="${PY:-python3}"
ENV=craftax:Craftax-Classic-Symbolic-v1
ENV_STEPS="${GPU_ENV_STEPS:-1000000}"
SEEDS="${GPU_SEEDS:-0}"
DEADLINE="${GPU_DEADLINE_S:-500}"   # seconds after start: stop the run
LC_TIMEOUT="${GPU_LC_TIMEOUT_S:-100}"
BENCH="${GPU_BENCH_DIR:-/tmp/gpu_protocol}"
LOG="${OUT}/log.txt"
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
{
  nvidia-smi -L 2>/dev/null
  "${PY}" -c 'import jax, haiku, craftax, disco.train as t
print("jax", jax.__version__, jax.devices())' || exit 1
  echo "[$(elapsed) s] imports ok"

  # 1. The update's cost alone (GPU_SKIP_COST=1 skips it).
  if [[ -z "${GPU_SKIP_COST:-}" ]]; then
    timeout -s INT -k 10 "${LC_TIMEOUT}" "${PY}" benchmarks/learner_cost.py \
      --presets crafter --envs "${ENV}" --agents craftax_frames \
      --dtypes float32 --chunk 8 --chunks 4 \
      --out "${OUT}/learner_cost_gpu_crafter.csv"
    echo "[$(elapsed) s] learner cost stopped or done"
  fi

  # 2. The run until the deadline.
  left=$((DEADLINE - $(elapsed)))
  timeout -s INT -k 45 "${left}" "${PY}" benchmarks/paper_protocol.py \
    --out "${BENCH}" --env "${ENV}" --algos disco --seeds ${SEEDS} \
    --env-steps "${ENV_STEPS}" --evaluations "${GPU_EVALUATIONS:-4}" \
    --checkpoint-every "${GPU_CHECKPOINT_EVERY:-1000}" \
    --steps-per-chunk "${GPU_STEPS_PER_CHUNK:-50}" --no-progress
  echo "[$(elapsed) s] run stopped or done"
  "${PY}" benchmarks/paper_protocol.py --out "${BENCH}" --report \
    --include-partial
  echo "[$(elapsed) s] report done"
} 2>&1 | tee "${LOG}"
cp "${BENCH}"/{results,summary,comparison,curves}.csv "${BENCH}/curves.png" \
  "${OUT}/" 2>/dev/null
tar czf "${OUT}/runs.tgz" -C "${BENCH}" runs 2>/dev/null
echo "[$(elapsed) s] end"
