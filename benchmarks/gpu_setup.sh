# Sourced by the one-call GPU scripts (gpu_run.sh, gpu_protocol.sh): the
# device has no network, so the packages its image lacks travel as wheels in
# .whl/ and the weights in .gpu/ (both git-ignored; docs/results/gpu.md, "On
# a GPU"). SKIP_INSTALL=1 uses what is installed (a CPU try).
export PYTHONUNBUFFERED=1
# Several processes may share the GPU (learner_cost's parent and child, the
# benchmark programs): none takes the memory up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  "${PY}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:${PWD}"
  export DISCO_WEIGHTS="${PWD}/.gpu/disco_103.npz"
fi
