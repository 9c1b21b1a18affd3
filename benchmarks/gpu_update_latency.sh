#!/usr/bin/env bash
# Issue 37 item 3c on a lent GPU, one call of about 8 minutes: what the
# `crafter` iteration of Disco103 on Craftax-Classic costs per update
# (`learner_cost.py`: one rollout of 6 environments x 29 steps and the 25
# updates it feeds, steady state), and what cuts it. One seed alone cost
# 7.3 ms per update on an H100 on 2026-11-28 (17.5 minutes for 1M steps);
# about half of it is the rollout's 29 sequential Craftax steps, each of
# which runs some 300 iterations of short scans one after another.
# Settings, in this order (what fitting one seed's 1M-step run in one
# call needs first; none starts after the deadline):
#   1. one_seed: one seed as it runs today (the baseline of this call);
#   2. one_seed_unrolled: the scans inside an environment step and a learner
#      step unrolled (`--inner-scans unrolled`, TrainConfig.
#      unroll_inner_scans; the same values bit for bit on a CPU);
#   3. one_seed_unrolled_envs24: and 24 environments per rollout (100
#      updates per rollout, the replay ratio kept);
#   4. one_seed_cmdbuf, one_seed_unrolled_cmdbuf: XLA's command buffers
#      (CUDA graphs) for while loops and conditionals too
#      (`--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL`);
#   5. one_seed_envs24, three_seeds_unrolled, one_seed_envs96;
#   6. XLA's while-loop unrolling modes of GPU_UNROLL (default
#      "DOUBLE_BUFFER NO_UNROLL"; FULL_UNROLL gave no row within 120 s on
#      2026-11-28), then three seeds with each frame embedded once and
#      every frame (3.87 ms per update and seed, every frame, 2026-11-28).
# GPU_SETTINGS names the settings to run, in its order (default: the list
# above, by the names in `named` below); beside them eight_seeds_unrolled,
# sixteen_seeds_unrolled and, for issue 55, pixels_paper_unrolled(_bf16):
# the `paper` agent on Craftax-Classic-Pixels, a rollout of every
# environment per update.
# Each setting is its own learner_cost.py invocation (one process) under
# `timeout` (GPU_SETTING_TIMEOUT_S, default 150), and none starts after
# GPU_DEADLINE_S (default 400). The CSVs come back in $OUT with log.txt.
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
DEADLINE="${GPU_DEADLINE_S:-400}"
LOG="${OUT}/log.txt"
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
UNROLL=--xla_gpu_enable_while_loop_unrolling=WHILE_LOOP_UNROLLING
CMDBUF=--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL
# One setting: its name, its XLA_FLAGS, then learner_cost.py's arguments.
setting() {
  local name=$1 flags=$2
  shift 2
  if (($(elapsed) >= DEADLINE)); then
    echo "[$(elapsed) s] ${name}: skipped (deadline)"
    return
  fi
  XLA_FLAGS="${flags}" timeout -s INT -k 10 \
    "${GPU_SETTING_TIMEOUT_S:-150}" "${PY}" benchmarks/learner_cost.py \
    --presets crafter --envs craftax:Craftax-Classic-Symbolic-v1 \
    --agents craftax_frames --dtypes float32 --rules disco \
    --chunk "${GPU_CHUNK:-10}" --chunks "${GPU_CHUNKS:-3}" "$@" \
    --out "${OUT}/${name}.csv"
  local rc=$? # Before $(elapsed), whose own status would replace it.
  echo "[$(elapsed) s] ${name}: rc=${rc}"
}
# Each named setting: its XLA_FLAGS, then learner_cost.py's arguments
# (later flags replace the defaults above: argparse keeps the last).
PIXELS=(--presets crafter_rollout_per_update
  --envs craftax:Craftax-Classic-Pixels-v1 --agents paper --chunk 2)
named() {
  case $1 in
    one_seed) setting "$1" "" --num-seeds 1 ;;
    one_seed_unrolled) setting "$1" "" --num-seeds 1 --inner-scans unrolled ;;
    one_seed_unrolled_envs24)
      setting "$1" "" --num-seeds 1 --inner-scans unrolled --num-envs 24 \
        --chunk 3 ;;
    one_seed_cmdbuf) setting "$1" "${CMDBUF}" --num-seeds 1 ;;
    one_seed_unrolled_cmdbuf)
      setting "$1" "${CMDBUF}" --num-seeds 1 --inner-scans unrolled ;;
    one_seed_envs24)
      setting "$1" "" --num-seeds 1 --num-envs 24 --chunk 3 ;;
    three_seeds_unrolled)
      setting "$1" "" --num-seeds 3 --inner-scans unrolled ;;
    eight_seeds_unrolled)
      setting "$1" "" --num-seeds 8 --inner-scans unrolled --chunk 3 ;;
    sixteen_seeds_unrolled)
      setting "$1" "" --num-seeds 16 --inner-scans unrolled --chunk 2 ;;
    one_seed_envs96) setting "$1" "" --num-seeds 1 --num-envs 96 --chunk 1 ;;
    unroll_*) setting "$1" "${UNROLL}_${1#unroll_}" --num-seeds 1 ;;
    once) setting "$1" "" --num-seeds 3 ;;
    every) setting "$1" "" --num-seeds 3 --frame-embeddings every ;;
    # Issue 55: the paper's agent on Craftax-Classic pixels, a rollout of
    # every environment per update; float32 and bfloat16.
    pixels_paper_unrolled)
      setting "$1" "" "${PIXELS[@]}" --inner-scans unrolled ;;
    pixels_paper_unrolled_bf16)
      setting "$1" "" "${PIXELS[@]}" --inner-scans unrolled \
        --dtypes bfloat16 ;;
    *) echo "unknown setting $1" ;;
  esac
}
DEFAULT_SETTINGS="one_seed one_seed_unrolled one_seed_unrolled_envs24
  one_seed_cmdbuf one_seed_unrolled_cmdbuf one_seed_envs24
  three_seeds_unrolled one_seed_envs96 unroll_DOUBLE_BUFFER unroll_NO_UNROLL
  once every"
{
  nvidia-smi -L 2>/dev/null
  for name in ${GPU_SETTINGS:-${DEFAULT_SETTINGS}}; do named "${name}"; done
  for f in "${OUT}"/*.csv; do echo "== ${f##*/}"; cat "${f}"; done
  # Each setting's cost per update and seed against one_seed's (this call).
  "${PY}" - "${OUT}" <<'EOF_PY'
import csv, pathlib, sys
rows = {}
for path in sorted(pathlib.Path(sys.argv[1]).glob('*.csv')):
  lines = [l for l in path.read_text().splitlines() if not l.startswith('#')]
  for row in csv.DictReader(lines):
    rows[path.stem] = float(row['ms_per_update'])
base = rows.get('one_seed')
for name, ms in rows.items():
  ratio = f'{base / ms:.2f}x one_seed' if base else ''
  print(f'{name:28} {ms:8.2f} ms per update and seed  {ratio}')
EOF_PY
} 2>&1 | tee "${LOG}"
