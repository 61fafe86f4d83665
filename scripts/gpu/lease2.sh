#!/usr/bin/env bash
# The second device call (about 5 minutes), after the first one's findings were fixed: the tiled CPU kernels no
# longer run on CUDA, and SDPA under the vmapped ensemble takes the math backend there.
#   1. python -m energylab.bench attention on CUDA again (float32 and bfloat16 in turn, 256 tokens up), alone
#   2. side by side: LIS MHA-only vs MHA2nd1st-only at L = 10, d = 64 (issue 58), and what failed or timed out in
#      the first call (chapter 4, experiments lis and forms at the quick profile)
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 ENERGYLAB_CACHE="$PWD/.energylab_cache"
O=${OUT:-/tmp/gpu-out}; W=/tmp/gpu-work; mkdir -p "$O" "$W"
t0=$(date +%s); stamp() { echo "[lease $(( $(date +%s) - t0 ))s] $*"; }
if [ "${TINY:-0}" = 1 ]; then T=--tiny; B1=30; B2=60; PY=python; else
  T=; B1=105; B2=170; PY=python3
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
stamp "bench"
timeout $B1 $PY scripts/gpu/cuda_check.py --out "$W/c56b" --parts bench --bench-deadline $((B1 - 25)) $T \
  > "$O/bench.log" 2>&1; echo "bench rc $?" >> "$O/bench.log"
stamp "side by side"
timeout $B2 $PY scripts/gpu/lis_scale.py --out "$W/l58" --budget $((B2 - 35)) $T > "$O/l58.log" 2>&1 &
timeout $B2 $PY scripts/gpu/cuda_check.py --out "$W/c56" --parts experiments,chapters --deadline $((B2 - 15)) \
  --only 04_newton_attention,lis,forms --workers 3 $T > "$O/c56.log" 2>&1 &
wait
stamp "done"
for f in "$O"/*.log; do echo "== $f"; tail -5 "$f"; done
tar czf "$O/gpu.tgz" -C "$W" .
