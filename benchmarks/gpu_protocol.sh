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
# GPU_DEADLINE_S (default 530, or 430 with GPU_CHECKPOINTS) the seeds and
# the run's deadline;
# GPU_NUM_ENVS the environments per rollout (default: the protocol's);
# GPU_RUN_AGENT and GPU_RUN_PRESET the run's agent and protocol preset
# (issue 55's pixel run: GPU_ENV=craftax:Craftax-Classic-Pixels-v1
# GPU_AGENT=paper GPU_RUN_AGENT=paper GPU_PRESET=crafter_rollout_per_update
# GPU_RUN_PRESET=crafter_rollout_per_update GPU_SEEDS=0);
# GPU_UNROLL_INNER_SCANS=1 unrolls the scans inside an environment step and
# a learner step (`--unroll-inner-scans`; the same values, fewer kernels in
# a row). GPU_CHECKPOINTS=1 lets one run span two calls on one warm
# machine: the run checkpoints when the deadline stops it (and at its end;
# one seed's buffer is 4.5 GB, under GPU_BENCH_DIR on the device's disk,
# which a warm machine keeps between calls), and the same command in the
# next call resumes it. Start that call within the machine's 30 s of idle.
# Everything comes back in $OUT: log.txt, rollout_cost_gpu.csv, the report
# (results, summary, comparison, curves: CSV and PNG) and runs.tgz.
#
# The device has no network: the packages its image lacks travel as wheels
# in .whl/ and the weights in .gpu/ (both git-ignored; docs/results/gpu.md,
# "On a GPU").
#   PY=python3 bash benchmarks/gpu_protocol.sh
# Tried on the CPU at a tiny budget with:
#   SKIP_INSTALL=1 OUT=/tmp/out GPU_ENV_STEPS=2000 GPU_SKIP_COST=1 \
#     bash benchmarks/gpu_protocol.sh
# and, one run over two calls (the first stopped by its deadline):
#   SKIP_INSTALL=1 OUT=/tmp/out GPU_ENV_STEPS=8000 GPU_SKIP_COST=1 \
#     GPU_SEEDS=0 GPU_CHECKPOINTS=1 GPU_UNROLL_INNER_SCANS=1 \
#     GPU_EVALUATIONS=4 GPU_DEADLINE_S=90 bash benchmarks/gpu_protocol.sh
#   (the same with GPU_DEADLINE_S=400)
set -u
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
PY="${PY:-python3}"
ENV="${GPU_ENV:-craftax:Craftax-Classic-Symbolic-v1}"
ALGOS="${GPU_ALGOS:-disco}"
ENV_STEPS="${GPU_ENV_STEPS:-1000000}"
SEEDS="${GPU_SEEDS:-0 1 2}"
RC_TIMEOUT="${GPU_RC_TIMEOUT_S:-90}"
BENCH="${GPU_BENCH_DIR:-/tmp/gpu_protocol}"
mkdir -p "${OUT}"  # The device gives an empty one; elsewhere make it.
LOG="${OUT}/log.txt"
if [[ -n "${GPU_CHECKPOINTS:-}" ]]; then
  # Only when stopped and at the end; time to write one when stopped.
  CHECKPOINTS="--checkpoint-every 100000000"
  KILL_AFTER="${GPU_KILL_AFTER_S:-150}"
  DEADLINE="${GPU_DEADLINE_S:-430}" # seconds after start: stop the run
else
  CHECKPOINTS=--no-checkpoints
  KILL_AFTER="${GPU_KILL_AFTER_S:-30}"
  DEADLINE="${GPU_DEADLINE_S:-530}"
fi
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
      ${GPU_UNROLL_INNER_SCANS:+--inner-scans unrolled} \
      --out "${OUT}/rollout_cost_gpu.csv"
    echo "[$(elapsed) s] rollout cost stopped or done"
  fi

  # 2. The run until the deadline.
  left=$((DEADLINE - $(elapsed)))
  # shellcheck disable=SC2086
  timeout -s INT -k "${KILL_AFTER}" "${left}" "${PY}" \
    benchmarks/paper_protocol.py \
    --out "${BENCH}" --env "${ENV}" --algos ${ALGOS} --seeds ${SEEDS} \
    --seeds-together --env-steps "${ENV_STEPS}" \
    --evaluations "${GPU_EVALUATIONS:-40}" ${CHECKPOINTS} \
    --steps-per-chunk "${GPU_STEPS_PER_CHUNK:-10}" --no-progress \
    ${GPU_NUM_ENVS:+--num-envs "${GPU_NUM_ENVS}"} \
    ${GPU_RUN_AGENT:+--agent "${GPU_RUN_AGENT}"} \
    ${GPU_RUN_PRESET:+--preset "${GPU_RUN_PRESET}"} \
    ${GPU_UNROLL_INNER_SCANS:+--unroll-inner-scans}
  echo "[$(elapsed) s] run stopped or done"
  "${PY}" benchmarks/paper_protocol.py --out "${BENCH}" --report \
    --include-partial
  echo "[$(elapsed) s] report done"
} 2>&1 | tee "${LOG}"
cp "${BENCH}"/{results,summary,comparison,curves}.csv "${BENCH}/curves.png" \
  "${OUT}/" 2>/dev/null
tar czf "${OUT}/runs.tgz" -C "${BENCH}" runs 2>/dev/null
echo "[$(elapsed) s] end"
