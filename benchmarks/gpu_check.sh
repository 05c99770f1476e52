#!/usr/bin/env bash
# One GPU check for a lent machine with one GPU and no network (issue 20): the paper recipe's shape with a
# random-weight Qwen2.5-3B architecture, printing rollout tokens/s, update s/step and peak GPU memory, with
# and without the shared-prefix update (and vLLM colocate where vLLM imports); then the VL arm: a random-weight
# Qwen2.5-VL-3B on key-frame rows (4 frames of 200,704 pixels = 256 image tokens each), 3 GRPO steps through
# TRL's multi-image path. Under 10 minutes.
#
#   benchmarks/gpu_check.sh --fetch-wheels   # HERE (network): wheels the GPU image lacks, into .whl/
#   benchmarks/gpu_check.sh                  # THERE (carry .whl): install them, run, write $OUT/gpu_check.*
set -euo pipefail
cd "$(dirname "$0")/.."

# What the GPU image lacks for `embodied_r.training` (it has torch, accelerate, peft, pandas, pyarrow,
# rich, pyyaml): TRL and datasets with their small dependencies, and a transformers the package accepts.
WHEELS=(trl==1.16.0 transformers==5.25.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0
        tokenizers==0.23.3 huggingface-hub==2.4.0 hf-xet==1.8.0 fsspec==2026.9.0 safetensors==0.8.0
        httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 accelerate==1.16.0 peft==0.21.2)

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d .whl "${WHEELS[@]}"
    du -sh .whl
    exit 0
fi

OUT="${OUT:-runs/gpu_check}"
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi -L || true
python3 -m pip list 2>/dev/null | grep -iE '^(torch|transformers|trl|accelerate|peft|datasets|pyarrow|vllm) ' || true
# Import the training stack before building a 3B model, so that a missing package fails in seconds.
python3 -c "import torch, transformers, trl, embodied_r.training.grpo; print('torch', torch.__version__, 'cuda', \
torch.version.cuda, 'transformers', transformers.__version__, 'trl', trl.__version__)"
PYTHONUNBUFFERED=1 timeout 540 python3 benchmarks/gpu_check.py --steps 6 --json "$OUT/gpu_check.json" \
    2>&1 | tee "$OUT/gpu_check.log"
