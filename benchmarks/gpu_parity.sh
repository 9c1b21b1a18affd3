#!/usr/bin/env bash
# Issue 38 item 5 on a lent GPU, in one call of at most ~9 minutes: the
# reference recorded on the GPU, whether the GPU reproduces itself, and the
# parity suite there, natively and against the CPU sets.
#   1. record: the reference (.gpu/reference) on the cases of the main set
#      (.gpu/parity) into $OUT/gpu-a, in GPU_PARITY_PROCS processes side by
#      side (default 4; compiling is the host's work, and it has 16 cores;
#      the eval curve alone takes 182 s on an H100);
#   2. again: the cheap cases (GPU_PARITY_AGAIN) into $OUT/gpu-b, compared
#      with gpu-a bit for bit (run-to-run reproducibility on one GPU);
#   3. native: the parity suite against gpu-a (a GPU recording matches this
#      GPU's kind; as a GPU does not reproduce itself bit for bit, the suite
#      holds native mode there to cross-platform tolerances);
#   4. cross: the parity suite against the CPU sets in .gpu/parity, beside
#      native when both are asked for (one deadline, D_CROSS, for both).
# Each step stops at its deadline (GPU_PARITY_DEADLINES, seconds after the
# start); GPU_PARITY_STEPS picks steps (default "record again native
# cross"; "native cross" with GPU_PARITY_RECORDED=DIR reuses a recording
# carried from an earlier call). XLA_FLAGS passes through, e.g.
# --xla_gpu_deterministic_ops=true for steps "record again". Everything comes
# back in $OUT: log.txt, the recordings (recordings.tgz.*), again.txt, and the
# suites' JSON-lines reports and their summary.csv (tests/parity/report.py).
#
# Before the call (all git-ignored; carry [".whl", ".gpu"], 64 MiB in all):
#   .whl/  the wheels of benchmarks/gpu_setup.sh (docs/results/gpu.md);
#   .gpu/disco_103.npz, and .gpu/reference, a copy of ../shared/reference;
#   .gpu/parity: the main set's files and platforms/avx2 (46 MB; the third
#   set does not fit beside them: compare it in a second call);
#   pytest and pytest-xdist, if the device's image lacks them, as wheels.
# With the tracked files that is over 64 MiB: on 2026-11-27 the call carried
# [".whlp", ".gpu"], .whlp the wheels less craftax, gymnax, gymnasium and
# farama_notifications, and .gpu without disco_103.npz, the command starting
# with `ln -s .whlp .whl; ln -s reference/disco_rl/update_rules/weights/\
# disco_103.npz .gpu/disco_103.npz;` (the reference's copy of the weights).
# The recorder, like the suite, runs matmuls at 'highest' precision there.
# Tried on the CPU at a tiny budget with:
#   SKIP_INSTALL=1 OUT=/tmp/out GPU_PARITY_CASES=utils \
#     GPU_PARITY_AGAIN=utils GPU_PARITY_TESTS=tests/parity/test_utils.py \
#     bash benchmarks/gpu_parity.sh
set -u
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { local t=$(($1 - $(elapsed))); echo $((t > 1 ? t : 1)); }
PY="${PY:-python3}"
STEPS="${GPU_PARITY_STEPS:-record again native cross}"
read -r D_RECORD D_AGAIN D_NATIVE D_CROSS \
  <<<"${GPU_PARITY_DEADLINES:-200 290 500 500}"
# The two that differed on an H100 first.
AGAIN="${GPU_PARITY_AGAIN:-agent_disco_small disco_unroll_meta_net utils input_transforms optimizer_adam_sg_clip0p5 value_utils_estimators value_utils_get_value_outs_disco}"
TESTS="${GPU_PARITY_TESTS:-tests/parity}"
PROCS="${GPU_PARITY_PROCS:-4}"
WORKERS="${GPU_PARITY_WORKERS:-4}"   # pytest-xdist's -n; 0: without xdist
xdist=()
((WORKERS > 0)) && xdist=(-n "${WORKERS}")
# What to record (a set's directory, or `builtin` with GPU_PARITY_CASES),
# and the CPU sets to compare against in cross mode.
SPEC="${GPU_PARITY_SPEC:-${PWD}/.gpu/parity}"
SETS="${GPU_PARITY_SETS:-${SPEC}}"
RECORDED="${GPU_PARITY_RECORDED:-${OUT}/gpu-a}"
LOG="${OUT}/log.txt"
fail() { echo "gpu_parity.sh: $*" >&2; exit 2; }
((PROCS >= 1)) || fail "GPU_PARITY_PROCS=${PROCS}: at least 1"
[[ " ${STEPS} " != *" record "* || -d "${SPEC}" \
  || ( "${SPEC}" == builtin && -n "${GPU_PARITY_CASES:-}" ) ]] \
  || fail "GPU_PARITY_SPEC=${SPEC}: a set's directory, or builtin with" \
    "GPU_PARITY_CASES"
[[ " ${STEPS} " != *" cross "* || -d "${SETS}" ]] \
  || fail "GPU_PARITY_SETS=${SETS}: the CPU sets' directory, for cross"
# shellcheck source=benchmarks/gpu_setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_setup.sh"
export DISCO_REFERENCE="${PWD}/.gpu/reference"
cases=()
[[ -n "${GPU_PARITY_CASES:-}" ]] && read -r -a cases <<<"${GPU_PARITY_CASES}"
read -r -a again <<<"${AGAIN}"
# The parity suite in mode $1 against the set(s) in $2, until deadline $3;
# its status.
suite() {
  rm -f "${OUT}/$1.jsonl"
  # shellcheck disable=SC2086
  DISCO_PARITY_DIR="$2" DISCO_PARITY_MODE="$1" \
    DISCO_PARITY_REPORT="${OUT}/$1.jsonl" \
    timeout -s INT -k 30 "$(left "$3")" "${PY}" -m pytest \
    -q -p no:cacheprovider ${xdist[@]+"${xdist[@]}"} ${TESTS} \
    --ignore=tests/parity/test_record.py | tail -n 60
  return "${PIPESTATUS[0]}"
}
{
  nvidia-smi -L 2>/dev/null
  "${PY}" -c 'import jax; print("jax", jax.__version__, jax.devices())' \
    || exit 1
  for step in ${STEPS}; do
    case "${step}" in
      record)
        # The cases in PROCS groups of about equal time (longest first, each
        # to the least loaded group), by their times on an H100 (s; others 5).
        mapfile -t groups < <("${PY}" - "${PROCS}" "${SPEC}" \
          ${cases[@]+"${cases[@]}"} <<'EOF'
import pathlib, sys
procs, spec, names = int(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
names = names or sorted(p.stem for p in spec.glob('*.npz'))
cost = dict(eval_curve_catch=182, meta_gradient_random=86,
            agent_full_eval_config=76, meta_gradient_disco103=41,
            disco_unroll_meta_net=38, agent_disco_small=20,
            value_utils_categorical_and_losses=14, agent_actor_critic_small=13,
            value_function=10)
groups = [[0, []] for _ in range(procs)]
for name in sorted(names, key=lambda n: -cost.get(n, 5)):
  group = min(groups, key=lambda g: g[0])
  group[0] += cost.get(name, 5)
  group[1].append(name)
print('\n'.join(' '.join(g[1]) for g in groups if g[1]))
EOF
        )
        pids=()
        for line in "${groups[@]}"; do
          read -r -a group <<<"${line}"
          timeout -s INT -k 10 "$(left "${D_RECORD}")" "${PY}" \
            -m tests.parity.record --spec "${SPEC}" --out "${OUT}/gpu-a" \
            --set-name gpu-a --cases "${group[@]}" &
          pids+=($!)
        done
        wait "${pids[@]}"
        ;;
      again)
        # The cases of AGAIN that the record step wrote whole (json last).
        present=()
        for c in "${again[@]}"; do
          if [[ -e "${RECORDED}/${c}.json" ]]; then present+=("${c}")
          else echo "${c}: not in ${RECORDED}" | tee -a "${OUT}/again.txt"; fi
        done
        if ((${#present[@]})); then
          timeout -s INT -k 10 "$(left "${D_AGAIN}")" "${PY}" \
            -m tests.parity.record --spec "${RECORDED}" --out "${OUT}/gpu-b" \
            --set-name gpu-b --cases "${present[@]}"
          "${PY}" - "${RECORDED}" "${OUT}/gpu-b" "${present[@]}" <<'EOF' \
            | tee -a "${OUT}/again.txt"
import pathlib, sys
import numpy as np
a, b = (pathlib.Path(p) for p in sys.argv[1:3])
for name in sys.argv[3:]:
  try:
    if not (b / f'{name}.json').exists():
      raise FileNotFoundError('not recorded again (deadline or error above)')
    with np.load(a / f'{name}.npz') as x, np.load(b / f'{name}.npz') as y:
      if set(x.files) != set(y.files):
        raise KeyError('the two recordings hold other keys')
      differ, worst = 0, (0.0, 0.0, '')
      for key in sorted(x.files):
        u, v = x[key], y[key]
        if u.shape == v.shape and u.tobytes() == v.tobytes():
          continue
        differ += 1
        d = np.abs(u.astype(np.float64) - v.astype(np.float64))
        rel = d / np.maximum(np.abs(u.astype(np.float64)), 1e-30)
        if d.max() > worst[0]:
          worst = (float(d.max()), float(rel.flat[d.argmax()]), key)
    print(f'{name}: ' + ('bit for bit' if not differ else
          f'{differ} of {len(x.files)} keys differ, the largest difference'
          f' {worst[0]:.3g} ({worst[1]:.2g} relative) at {worst[2]}'))
  except Exception as e:  # pylint: disable=broad-except
    print(f'{name}: {e}')
EOF
        fi
        ;;
      native)
        if [[ " ${STEPS} " == *" cross "* ]]; then
          suite cross "${SETS}" "${D_CROSS}" >"${OUT}/cross.txt" 2>&1 &
          cross_pid=$!
          suite native "${RECORDED}" "${D_CROSS}"
          echo "native: exit ${?}"
          wait "${cross_pid}"
          echo "cross: exit ${?}"
          cat "${OUT}/cross.txt" && rm "${OUT}/cross.txt"
        else
          suite native "${RECORDED}" "${D_NATIVE}"
        fi
        ;;
      cross)
        [[ " ${STEPS} " == *" native "* ]] || suite cross "${SETS}" "${D_CROSS}"
        ;;
      *) echo "unknown step ${step}" ;;
    esac
    echo "[$(elapsed) s] ${step} stopped or done (exit ${?})"
  done
} 2>&1 | tee "${LOG}"
compgen -G "${OUT}/*.jsonl" >/dev/null && "${PY}" -m tests.parity.report \
  "${OUT}"/*.jsonl --out "${OUT}/summary.csv"
# Fewer files come back than a recording holds, and none over 16 MiB: the
# recordings as one archive in parts of 15 MB (cat recordings.tgz.* | tar xz).
recordings=()
for d in gpu-a gpu-b; do [[ -d "${OUT}/${d}" ]] && recordings+=("${d}"); done
((${#recordings[@]})) && (cd "${OUT}" \
  && tar cz "${recordings[@]}" | split -b 15m - recordings.tgz. \
  && rm -rf "${recordings[@]}")
echo "[$(elapsed) s] end"
