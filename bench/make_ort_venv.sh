#!/usr/bin/env bash
# ONNX Runtime, OpenVINO (with NNCF) and the Hugging Face PyTorch reference
# for `bench.serving` run in a venv of their own: none of them is a dependency
# of this library.
#   bash bench/make_ort_venv.sh [DIR]   (default: bench/.venv_ort)
# PyTorch must be the CPU build: torch==2.13.0+cpu, from a local wheel folder
# (TORCH_FIND_LINKS, default /opt/wheels when it exists) or PyTorch's CPU index
# (TORCH_INDEX, default https://download.pytorch.org/whl/cpu). The exact "+cpu"
# pin never falls back to PyPI's CUDA build (which pulls the nvidia-* wheels).
set -euo pipefail
DIR=${1:-$(dirname "$0")/.venv_ort}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
TORCH_FIND_LINKS=${TORCH_FIND_LINKS:-/opt/wheels}
TORCH_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
"$PYTHON" -m venv "$DIR"
"$DIR/bin/pip" install -q --upgrade pip
if [ -d "$TORCH_FIND_LINKS" ]; then
  TORCH_SOURCE=(--find-links "$TORCH_FIND_LINKS")
else
  TORCH_SOURCE=(--extra-index-url "$TORCH_INDEX")
fi
"$DIR/bin/pip" install -q "${TORCH_SOURCE[@]}" "torch==2.13.0+cpu"
"$DIR/bin/pip" install -q "${TORCH_SOURCE[@]}" "torch==2.13.0+cpu" \
    "onnx==1.23.2" "onnxruntime==1.32.0" "onnxscript==0.7.2" "onnx-ir==1.1.0" \
    "transformers==5.23.0" "tokenizers==0.23.3" "safetensors==0.8.0" \
    "numpy==2.4.6" "openvino==2026.4.1" "nncf==3.4.0"
"$DIR/bin/python" - <<'EOF'
import importlib.metadata as md
import onnxruntime, torch
assert torch.__version__ == "2.13.0+cpu", torch.__version__
cuda = [d.metadata["Name"] for d in md.distributions()
        if d.metadata["Name"].lower().startswith(("nvidia", "triton"))]
assert not cuda, f"CUDA packages installed: {cuda}"
print(" ".join(f"{n}=={md.version(n)}" for n in (
    "torch", "onnx", "onnxruntime", "onnxscript", "onnx-ir", "transformers",
    "tokenizers", "safetensors", "numpy", "openvino", "nncf")),
    "providers", onnxruntime.get_available_providers())
EOF
