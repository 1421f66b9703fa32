#!/usr/bin/env bash
# sentence-transformers' ONNX backend for `bench.embedding speed` (st_onnx_fp32,
# st_onnx_int8), in a venv of its own.
#   bash bench/make_st_onnx_venv.sh [DIR]
#   (default: ~/.cache/bert-tf2-bench/venv_st_onnx, outside the repository:
#   tests/bench_separation_test.py reads every .py file under bench/)
# Why its own venv: sentence-transformers[onnx] needs optimum-onnx, whose
# releases (0.1.0 the newest) need transformers < 4.58, while
# sentence-transformers 6.x needs transformers >= 5; so the ONNX backend does
# not install beside the main venv's sentence-transformers 6.2. The newest
# pair that installs together: sentence-transformers 5.1.2 (its last release
# for transformers 4) with transformers 4.57.6 and optimum-onnx 0.1.0.
# PyTorch is the CPU build the main venv has (torch==2.13.0+cpu), from a local
# wheel folder (TORCH_FIND_LINKS, default /opt/wheels when it exists) or
# PyTorch's CPU index.
set -euo pipefail
DIR=${1:-$HOME/.cache/bert-tf2-bench/venv_st_onnx}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
TORCH_FIND_LINKS=${TORCH_FIND_LINKS:-/opt/wheels}
TORCH_INDEX=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
"$PYTHON" -m venv "$DIR"
if [ -d "$TORCH_FIND_LINKS" ]; then
  TORCH_SOURCE=(--find-links "$TORCH_FIND_LINKS")
else
  TORCH_SOURCE=(--extra-index-url "$TORCH_INDEX")
fi
"$DIR/bin/pip" install -q "${TORCH_SOURCE[@]}" "torch==2.13.0+cpu"
"$DIR/bin/pip" install -q "${TORCH_SOURCE[@]}" "torch==2.13.0+cpu" \
    "sentence-transformers==5.1.2" "transformers==4.57.6" \
    "optimum-onnx[onnxruntime]==0.1.0"
"$DIR/bin/python" - <<'EOF'
import importlib.metadata as md
import onnxruntime, torch
from optimum.onnxruntime import ORTModelForFeatureExtraction  # noqa: F401
from sentence_transformers import export_dynamic_quantized_onnx_model  # noqa: F401
assert torch.__version__ == "2.13.0+cpu", torch.__version__
cuda = [d.metadata["Name"] for d in md.distributions()
        if d.metadata["Name"].lower().startswith(("nvidia", "triton"))]
assert not cuda, f"CUDA packages installed: {cuda}"
print(" ".join(f"{n}=={md.version(n)}" for n in (
    "torch", "sentence-transformers", "transformers", "optimum",
    "optimum-onnx", "onnx", "onnxruntime", "numpy")),
    "providers", onnxruntime.get_available_providers())
EOF
