#!/usr/bin/env bash
# Issue 25 item 6 on a lent GPU, in one call of at most ~9.5 minutes:
#   1. learner updates per second per seed on Breakout-MinAtar with the
#      colab's agent (learner_cost.py: Disco103 in float32 and bfloat16 and
#      actor-critic, one seed; then Disco103 with 3 seeds trained together);
#   2. rejax's PPO (3 seeds) on Breakout-MinAtar at 10M environment steps,
#      alone: it is one XLA program that a signal cannot stop, and beside it
#      the other programs crawled (Asterix, docs/results/baselines.md);
#   3. Disco103 and actor-critic (colab's agent, 3 seeds trained together)
#      towards 10M environment steps, side by side until the deadline; stopped
#      runs keep their checkpoint and are reported up to it
#      (`--include-partial`).
# Everything comes back in $OUT: log.txt, learner_cost_gpu{,_x3}.csv, the report
# (results.csv, summary.csv, curves.csv, curves.png) and runs.tgz.
#
# The device has no network: the packages its image lacks travel as wheels
# in .whl/ and the weights in .gpu/ (both git-ignored; see docs/results/gpu.md).
#   PY=python3 bash benchmarks/gpu_run.sh
# GPU_ENV, GPU_ENV_STEPS and GPU_DEADLINE_S change the environment, budget and
# deadline, GPU_ALGOS which programs run, GPU_PPO_TIMEOUT_S PPO's limit;
# GPU_SKIP_COST=1 goes straight to the benchmark.
set -u
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
PY="${PY:-python3}"
ENV="${GPU_ENV:-gymnax:Breakout-MinAtar}"
ENV_STEPS="${GPU_ENV_STEPS:-10000000}"
DEADLINE="${GPU_DEADLINE_S:-515}"   # seconds after start: stop the runs
ALGOS="${GPU_ALGOS:-disco actor_critic ppo}"
PPO_TIMEOUT="${GPU_PPO_TIMEOUT_S:-180}"
LC_TIMEOUT="${GPU_LC_TIMEOUT_S:-120}"
LC_CHUNKS="${GPU_LC_CHUNKS:-6}"
BENCH="${GPU_BENCH_DIR:-/tmp/gpu_bench}"
LOG="${OUT}/log.txt"
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
{
  nvidia-smi -L 2>/dev/null
  "${PY}" -c 'import jax, haiku, gymnax, rejax, disco.train as t
print("jax", jax.__version__, jax.devices())' || exit 1
  echo "[$(elapsed) s] imports ok"

  # 1. The per-update cost, alone on the device (GPU_SKIP_COST=1 skips it).
  if [[ -z "${GPU_SKIP_COST:-}" ]]; then
    LC=("${PY}" benchmarks/learner_cost.py --envs "${ENV}" --agents colab \
      --chunks "${LC_CHUNKS}")
    timeout -s INT -k 10 "${LC_TIMEOUT}" "${LC[@]}" \
      --out "${OUT}/learner_cost_gpu.csv"
    timeout -s INT -k 10 "${LC_TIMEOUT}" "${LC[@]}" --rules disco \
      --dtypes float32 --num-seeds 3 --out "${OUT}/learner_cost_gpu_x3.csv"
    echo "[$(elapsed) s] learner cost stopped or done"
  fi

  B=("${PY}" benchmarks/disco103_vs_baselines.py --out "${BENCH}" \
    --env "${ENV}" --env-steps "${ENV_STEPS}" --agent colab --no-progress)
  # 2. PPO alone, if asked for.
  ours=()
  for algos in ${ALGOS}; do
    if [[ "${algos}" == ppo ]]; then
      timeout -s KILL "${PPO_TIMEOUT}" "${B[@]}" --algos ppo 2>&1 | tail -n 5
      echo "[$(elapsed) s] ppo stopped or done"
    else
      ours+=("${algos}")
    fi
  done

  # 3. Ours side by side until the deadline.
  left=$((DEADLINE - $(elapsed)))
  pids=()
  for algos in "${ours[@]}"; do
    timeout -s INT -k 45 "${left}" "${B[@]}" --algos "${algos}" \
      --seeds-together > "/tmp/gpu_${algos}.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  for algos in "${ours[@]}"; do
    echo "--- ${algos}"; tail -n 15 "/tmp/gpu_${algos}.log"
  done
  echo "[$(elapsed) s] benchmark stopped or done"

  "${PY}" benchmarks/disco103_vs_baselines.py --out "${BENCH}" --report \
    --include-partial
  echo "[$(elapsed) s] report done"
} 2>&1 | tee "${LOG}"
cp "${BENCH}"/{results,summary,curves}.csv "${BENCH}/curves.png" "${OUT}/" \
  2>/dev/null
tar czf "${OUT}/runs.tgz" -C "${BENCH}" runs 2>/dev/null
echo "[$(elapsed) s] end"
