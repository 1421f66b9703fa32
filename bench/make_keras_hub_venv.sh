#!/usr/bin/env bash
# KerasHub runs on Keras 3, which must never share a venv with this library's
# tf_keras: it gets a venv of its own (TensorFlow backend, same TF version).
#   bash bench/make_keras_hub_venv.sh [DIR]   (default: bench/.venv_keras_hub)
set -euo pipefail
DIR=${1:-$(dirname "$0")/.venv_keras_hub}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -m venv "$DIR"
"$DIR/bin/pip" install -q --upgrade pip
"$DIR/bin/pip" install -q "tensorflow==2.20.0" "keras==3.15.1" "keras-hub==0.32.0"
"$DIR/bin/python" -c "import keras, keras_hub; print('keras', keras.__version__, 'keras_hub', keras_hub.__version__)"
