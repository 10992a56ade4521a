#!/usr/bin/env bash
# Downloads into .whl/ the wheels the lent GPU machine's image lacks (Python 3.12, x86-64) for bench/gpu_suite.py
# and the test suite there: the references (ltx-core, ltx-pipelines, diffusers and what diffusers adds), PyAV, and
# SageAttention (py3-none-any, 20 KB; Triton, which the device's CUDA PyTorch brings) for the `attention` section.
# flash-attn-4 (py3-none-any) is left out: its nvidia-cutlass-dsl-libs-cu12/cu13 wheels are 92 MB each, past the
# device's 64 MiB carry; the `attention` section reports it unavailable.
# Run it here, then carry .whl to the device (docs/performance.md, "GPU suite", has the whole command).
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$tag")
done
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .whl ltx-core==1.0.0 ltx-pipelines==1.0.0 diffusers==0.42.1 importlib_metadata zipp lazy-importer av \
  sageattention==1.0.6
ls -l .whl
