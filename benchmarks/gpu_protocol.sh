#!/usr/bin/env bash
# Issue 37 item 3c on a lent GPU, in one call of at most ~9 minutes:
# Disco103 on Craftax-Classic with the paper's Crafter protocol (`--preset
# crafter`, agent `craftax_frames`), aimed at 1M environment steps (143,678
# learner updates per seed), as benchmarks/paper_protocol.py runs it on the
# CPU, three seeds trained together (one vmapped program), until the
# deadline:
#   1. where the time goes: rollout_cost.py times the acting half of an
#      iteration alone (6 and 24 environments, the seeds together); the
#      run's own rows time whole iterations and evaluations;
#   2. the run, with few evaluations (GPU_EVALUATIONS, default 40: one per
#      ~25,000 steps) and no checkpoints (`--no-checkpoints`: a buffer of
#      13,794 trajectories of 60 frames per seed is 13 GB to write, and a
#      checkpoint could not outlive the call), stopped at the deadline with
#      its log rows kept as a partial record.
# GPU_ENV and GPU_ALGOS run another environment or rule the same way, e.g.
# GPU_ENV=gymnax:Breakout-MinAtar GPU_ALGOS="disco actor_critic"
# GPU_ENV_STEPS=1452610 GPU_SKIP_COST=1 (the `atari` protocol at the old
# runs' 1,452,610 steps; GPU_SKIP_COST skips step 1, which times Craftax's
# rollout). GPU_PRESET and GPU_AGENT set step 1's preset and agent
# (default crafter, craftax_frames); GPU_SEEDS (default "0 1 2") and
# GPU_DEADLINE_S (default 530) the seeds and the run's deadline;
# GPU_NUM_ENVS the environments per rollout (default: the protocol's).
# Everything comes back in $OUT: log.txt, rollout_cost_gpu.csv, the report
# (results, summary, comparison, curves: CSV and PNG) and runs.tgz.
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
ENV="${GPU_ENV:-craftax:Craftax-Classic-Symbolic-v1}"
ALGOS="${GPU_ALGOS:-disco}"
ENV_STEPS="${GPU_ENV_STEPS:-1000000}"
SEEDS="${GPU_SEEDS:-0 1 2}"
DEADLINE="${GPU_DEADLINE_S:-530}"   # seconds after start: stop the run
RC_TIMEOUT="${GPU_RC_TIMEOUT_S:-90}"
BENCH="${GPU_BENCH_DIR:-/tmp/gpu_protocol}"
LOG="${OUT}/log.txt"
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
{
  nvidia-smi -L 2>/dev/null
  "${PY}" -c 'import jax, haiku, craftax, disco.train as t
print("jax", jax.__version__, jax.devices())' || exit 1
  echo "[$(elapsed) s] imports ok"

  # 1. The acting half alone (GPU_SKIP_COST=1 skips it).
  if [[ -z "${GPU_SKIP_COST:-}" ]]; then
    timeout -s INT -k 10 "${RC_TIMEOUT}" "${PY}" benchmarks/rollout_cost.py \
      --preset "${GPU_PRESET:-crafter}" --env "${ENV}" \
      --agent "${GPU_AGENT:-craftax_frames}" \
      --num-envs 6 24 --num-seeds 3 --chunk 4 --chunks 3 \
      --out "${OUT}/rollout_cost_gpu.csv"
    echo "[$(elapsed) s] rollout cost stopped or done"
  fi

  # 2. The run until the deadline.
  left=$((DEADLINE - $(elapsed)))
  # shellcheck disable=SC2086
  timeout -s INT -k 30 "${left}" "${PY}" benchmarks/paper_protocol.py \
    --out "${BENCH}" --env "${ENV}" --algos ${ALGOS} --seeds ${SEEDS} \
    --seeds-together --env-steps "${ENV_STEPS}" \
    --evaluations "${GPU_EVALUATIONS:-40}" --no-checkpoints \
    --steps-per-chunk "${GPU_STEPS_PER_CHUNK:-10}" --no-progress \
    ${GPU_NUM_ENVS:+--num-envs "${GPU_NUM_ENVS}"}
  echo "[$(elapsed) s] run stopped or done"
  "${PY}" benchmarks/paper_protocol.py --out "${BENCH}" --report \
    --include-partial
  echo "[$(elapsed) s] report done"
} 2>&1 | tee "${LOG}"
cp "${BENCH}"/{results,summary,comparison,curves}.csv "${BENCH}/curves.png" \
  "${OUT}/" 2>/dev/null
tar czf "${OUT}/runs.tgz" -C "${BENCH}" runs 2>/dev/null
echo "[$(elapsed) s] end"
