#!/usr/bin/env bash
# Prepares .gpu/ for the second device call of docs/performance.md "Running the GPU measurements": ComfyUI 0.26.0's
# code without its tests, tokenizer data, blueprints and API nodes (about 9 MB), and the wheels (Python 3.12,
# x86-64) that its imports need beyond the device image (PyAV, SQLAlchemy, alembic, comfy-kitchen 0.2.12 as ComfyUI
# pins it, pydantic, torchsde, ...). Needs the shared ComfyUI: COMFYUI_PATH, or ../shared/comfyui/setup.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
comfyui=${COMFYUI_PATH:-$HOME/.cache/ltx2-comfyui/ComfyUI}
[[ -f $comfyui/main.py ]] || { echo "no ComfyUI at $comfyui: run ../shared/comfyui/setup.sh and set COMFYUI_PATH" >&2; exit 2; }
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
rm -rf .gpu && mkdir -p .gpu/whl
tar -C "$(dirname "$comfyui")" -cf - --exclude=.git --exclude='__pycache__' \
  --exclude="$(basename "$comfyui")"/{tests,tests-unit,blueprints,comfy_api_nodes,models,custom_nodes,input,output,user,temp} \
  --exclude="$(basename "$comfyui")/comfy/text_encoders/*_tokenizer" --exclude="$(basename "$comfyui")/comfy/sd1_tokenizer" \
  "$(basename "$comfyui")" | tar -C .gpu -xf -
[[ $(basename "$comfyui") == ComfyUI ]] || mv ".gpu/$(basename "$comfyui")" .gpu/ComfyUI
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
           manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$tag")
done
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .gpu/whl av alembic mako sqlalchemy blake3 comfy-aimdo==0.4.10 comfy-kitchen==0.2.12 pydantic pydantic-core \
  annotated-types typing-inspection torchsde trampoline truststore simpleeval
du -sh .gpu/ComfyUI .gpu/whl .gpu
