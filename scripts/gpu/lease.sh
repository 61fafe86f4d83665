#!/usr/bin/env bash
# The one device call for issues 56-58 (about 9 minutes): run from the repository root on the GPU machine, with the
# wheels the chapters need in .whl/ and the generated Sudoku sets in .energylab_cache/ (both carried, not committed).
#   1. python -m energylab.bench attention on CUDA (float32, bfloat16; 256..16,384 tokens), alone on the GPU
#   2. side by side: 9x9 Sudoku Transformer vs Hyper-SET (issue 57), LIS MHA-only and MHA2nd1st-only (issue 58),
#      every chapter and every experiment's quick profile with device cuda (issue 56)
# Everything lands in $OUT/gpu.tgz (and the logs beside it). TINY=1 rehearses it on a CPU in a minute.
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 ENERGYLAB_CACHE="$PWD/.energylab_cache"
O=${OUT:-/tmp/gpu-out}; W=/tmp/gpu-work; mkdir -p "$O" "$W"
t0=$(date +%s); stamp() { echo "[lease $(( $(date +%s) - t0 ))s] $*"; }
if [ "${TINY:-0}" = 1 ]; then
  T=--tiny; B1=30; B2=60; PY=python
else
  T=; B1=170; B2=330; PY=python3
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
  nvidia-smi > "$W/nvidia-smi.txt" 2>&1
fi
$PY -c "import torch, energylab, platform; print(torch.__version__, energylab.__version__, platform.processor(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no cuda')" 2>&1 | tee "$O/env.txt"
stamp "bench"
timeout $B1 $PY scripts/gpu/cuda_check.py --out "$W/c56b" --parts bench --bench-deadline $((B1 - 30)) $T \
  > "$O/bench.log" 2>&1; echo "bench rc $?" >> "$O/bench.log"
stamp "side by side"
timeout $B2 $PY scripts/gpu/sudoku9.py --out "$W/s57" --budget $((B2 * 6 / 10)) $T > "$O/s57.log" 2>&1 &
timeout $B2 $PY scripts/gpu/lis_scale.py --variant MHA-only --out "$W/l58" --budget $((B2 * 3 / 4)) $T \
  > "$O/l58a.log" 2>&1 &
timeout $B2 $PY scripts/gpu/lis_scale.py --variant MHA2nd1st-only --out "$W/l58" --budget $((B2 * 3 / 4)) $T \
  > "$O/l58b.log" 2>&1 &
timeout $B2 $PY scripts/gpu/cuda_check.py --out "$W/c56" --parts experiments,chapters --deadline $((B2 - 40)) \
  --workers 13 $T > "$O/c56.log" 2>&1 &
wait
stamp "done"
for f in "$O"/*.log; do echo "== $f"; tail -4 "$f"; done
tar czf "$O/gpu.tgz" -C "$W" .
