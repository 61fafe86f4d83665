#!/usr/bin/env bash
# One device call (about 7 minutes), 2026-11-28: side by side on one GPU,
#   1. 9x9 Sudoku with augmentation (issues 57 and 51): the looped Transformer and Hyper-SET at d = 256, each at
#      learning rates 1e-3 and 3e-3, the same number of steps, scored on the boards that need search too
#   2. LIS at L = 10, d = 64: MHA-only against MHA2nd1st-only, 4 seeds each (issue 58)
# Carried, not committed: .whl/ (wheels the device lacks) and .energylab_cache/sudoku (the generated boards).
# TINY=1 rehearses it on a CPU in under a minute.
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 ENERGYLAB_CACHE="$PWD/.energylab_cache"
O=${OUT:-/tmp/gpu-out}; W=/tmp/gpu-work; mkdir -p "$O" "$W"
t0=$(date +%s); stamp() { echo "[lease $(( $(date +%s) - t0 ))s] $*"; }
if [ "${TINY:-0}" = 1 ]; then T=--tiny; B=10; PY=python; else
  T=; B=${BUDGET:-330}; PY=python3
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
fi
$PY -c "import torch, platform; print('torch', torch.__version__, platform.processor(), torch.cuda.is_available())"
stamp "start"
timeout $((B + 150)) $PY scripts/gpu/sudoku9.py --out "$W/s9" --budget "$B" $T > "$O/sudoku9.log" 2>&1 &
timeout $((B + 90)) $PY scripts/gpu/lis_scale.py --out "$W/lis" --budget "$B" $T > "$O/lis.log" 2>&1 &
wait
stamp "done"
cp "$W/s9/sudoku9.json" "$W/s9/sudoku9_models.pt" "$W/lis/lis_scale.json" "$O/" 2>/dev/null
for f in "$O"/*.log; do echo "== $f"; tail -6 "$f" | cut -c1-400; done
