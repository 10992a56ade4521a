#!/usr/bin/env bash
# The two device calls of docs/performance.md "Running the GPU measurements", each well inside 5 minutes, run ON the
# lent GPU machine from the repository root (its $OUT comes back):
#   bash bench/gpu_calls.sh suite     # carry [".whl"] (bench/gpu_wheels.sh): bench/gpu_suite.py, the issue-36 sections
#   bash bench/gpu_calls.sh comfyui   # carry [".gpu"] (bench/gpu_comfyui.sh): native swap 768x512, end to end bf16
#   bash bench/gpu_calls.sh more      # carry [".gpu"], a third call if time is left: swap 384x256, end to end fp8
# Every step has its own time limit, so a slow one costs its own figures only; results are written as they come.
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
wheels() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@"; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
case ${1:-} in
  suite)
    wheels .whl/*.whl || exit 1
    # goal order of issue 36: stage-1 speed, fp8, attention, the guided step and bf16 forward, the profile, caching
    timeout 280 python3 bench/gpu_suite.py --versions 2.0,2.3,2.5 --repeats 5 --budget 200 --out "$OUT" \
      --sections stage1,fp8,attention,step,forward,profile,cache 2>&1 | tee "$OUT/suite.log"
    ;;
  comfyui|more)
    wheels .gpu/whl/*.whl || exit 1
    swap() {  # the native swap on 8 of the 48 released 2.3 blocks at $1 x $2 x 121, with and without EasyCache
      timeout "$3" python3 bench/native_swap.py --comfyui .gpu/ComfyUI --released-layers 8 --easycache 0.2 \
        --width "$1" --height "$2" --frames 121 --repeats 3 --out "$OUT/swap_$1.json" 2>&1 | tail -12
    }
    if [[ $1 == comfyui ]]; then
      swap 768 512 80                                    # goal 6 at the size users run
      timeout 200 python3 bench/end_to_end.py --warmup --out "$OUT" 2>&1 | tee "$OUT/end_to_end.log" | tail -25
    else                                                 # a third call, where the device time allows
      swap 384 256 60                                    # goal 6 at stage-1 size
      timeout 220 python3 bench/end_to_end.py --warmup --fp8 --out "$OUT" 2>&1 | tee "$OUT/end_to_end_fp8.log" | tail -25
    fi
    ;;
  *) echo "usage: bash bench/gpu_calls.sh suite|comfyui|more" >&2; exit 2 ;;
esac
ls -la "$OUT"
