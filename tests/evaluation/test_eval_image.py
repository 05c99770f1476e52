"""`embodied-r eval` on image prompt rows (Robot-R1's prompts_vl.jsonl form): a tiny Qwen2.5-VL saved to
a folder answers every row through the CLI with the image in its forward pass, an OpenAI-compatible
endpoint gets the images as data URLs, and mismatched inputs or a text-only model are clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl

OPTIONS = ["A. up", "B. down", "C. left", "D. right"]


@pytest.fixture(scope="module")
def vl_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_vl import save_tiny_qwen25_vl

    return save_tiny_qwen25_vl(tmp_path_factory.mktemp("tiny_qwen25_vl"))


def _vl_row(index: int) -> dict:
    content = [{"type": "image", "image": f"images/frame{index}.png"},
               {"type": "text", "text": "Where should the gripper move next?\n"
                                        + "\n".join(f"- [[{o[0]}]] {o[3:]}" for o in OPTIONS)}]
    return {"id": f"q{index}", "task": "movement", "answer": "ABCD"[index % 4], "answer_type": "choice",
            "options": OPTIONS, "meta": {"path": "image", "image": f"images/frame{index}.png"},
            "prompt": [{"role": "system", "content": "Answer as <think> </think><answer> [[X]] </answer>."},
                       {"role": "user", "content": content}]}


@pytest.fixture()
def image_rows(tmp_path: Path) -> Path:
    """prompts_vl.jsonl with three rows and their PNGs under images/, beside the rows (as synth writes)."""
    from PIL import Image

    folder = tmp_path / "robot"
    (folder / "images").mkdir(parents=True)
    rows = [_vl_row(i) for i in range(3)]
    for i in range(3):
        Image.new("RGB", (96, 80), (60 * i, 120, 200 - 60 * i)).save(folder / "images" / f"frame{i}.png")
    (folder / "prompts_vl.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text_rows = [{**r, "prompt": [r["prompt"][0], {"role": "user", "content": r["prompt"][1]["content"][1]["text"]}]}
                 for r in rows]
    (folder / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in text_rows))
    return folder / "prompts_vl.jsonl"


def _eval(data: Path, model: Path | str, out: Path, *extra: str) -> int:
    return main(["eval", "--data", str(data), "--model", str(model), "--out", str(out), "--batch-size", "2",
                 "--max-new-tokens", "3", "--dtype", "float32", "--no-report", *extra])


def test_eval_answers_image_rows_with_a_vision_language_model(image_rows: Path, vl_model_dir: Path,
                                                              tmp_path: Path, monkeypatch) -> None:
    from embodied_r.evaluation.vl_generation import VisionLanguageEngine

    seen: list[tuple[int, int]] = []
    real_inputs = VisionLanguageEngine._inputs

    def spy(self, conversations, prefixes):
        inputs = real_inputs(self, conversations, prefixes)
        image_id = self.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        seen.append((int((inputs["input_ids"] == image_id).sum()), int(inputs["pixel_values"].shape[0])))
        return inputs

    monkeypatch.setattr(VisionLanguageEngine, "_inputs", spy)
    out = tmp_path / "eval"
    assert _eval(image_rows, vl_model_dir, out) == 0
    predictions = read_jsonl(out / "predictions.jsonl")
    assert sorted(p["id"] for p in predictions) == ["q0", "q1", "q2"]
    assert all(isinstance(p["completion"], str) for p in predictions)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["input"] == "image" and metrics["generation"]["input"] == "image"
    assert metrics["generation"]["engine"] == "transformers-vl"
    assert metrics["n_questions"] == 3 and metrics["tasks"]["movement"]["n"] == 3
    # Every processed batch carried its images: image tokens in the ids and pixels for them.
    assert seen and all(tokens > 0 and pixels > 0 for tokens, pixels in seen)
    # A rerun resumes: nothing left to generate.
    assert _eval(image_rows, vl_model_dir, out) == 0
    assert json.loads((out / "metrics.json").read_text())["generated_this_run"] == 0


def test_batched_image_generation_matches_one_by_one(image_rows: Path, vl_model_dir: Path) -> None:
    from embodied_r.evaluation.vl_generation import VisionLanguageEngine, load_vision_model

    rows = read_jsonl(image_rows)
    engine = VisionLanguageEngine(*load_vision_model(str(vl_model_dir), dtype="float32"), image_dir=image_rows.parent)
    batched = engine.generate_chats([r["prompt"] for r in rows], max_new_tokens=4, batch_size=3)
    alone = [engine.generate_chats([r["prompt"]], max_new_tokens=4, batch_size=1)[0] for r in rows]
    assert batched == alone


def test_context_policy_on_image_rows(image_rows: Path, vl_model_dir: Path, tmp_path: Path, capsys) -> None:
    # Cutting tokens would cut image tokens: refused before anything is generated.
    out = tmp_path / "cut"
    assert _eval(image_rows, vl_model_dir, out, "--context-rule", "truncate-left", "--max-prompt-tokens", "10") == 2
    assert "image tokens" in capsys.readouterr().err and not (out / "predictions.jsonl").exists()
    # Skipping is recorded per row and counted, never silent.
    out = tmp_path / "skip"
    assert _eval(image_rows, vl_model_dir, out, "--context-rule", "skip", "--max-prompt-tokens", "10") == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["context"]["actions"] == {"skipped": 3}
    assert all(p["meta"]["context"]["action"] == "skipped" for p in read_jsonl(out / "predictions.jsonl"))


def test_input_flag_mismatches_name_the_file_to_use(image_rows: Path, vl_model_dir: Path, tmp_path: Path,
                                                   capsys) -> None:
    assert _eval(image_rows, vl_model_dir, tmp_path / "a", "--input", "text") == 2
    assert "prompts.jsonl is the text path" in capsys.readouterr().err
    assert _eval(image_rows.parent / "prompts.jsonl", vl_model_dir, tmp_path / "b", "--input", "image") == 2
    assert "prompts_vl.jsonl is the image path" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("model", ["tiny_lm", "smollm2-135m-instruct"])
def test_image_rows_with_a_text_only_model_fail_before_generation(image_rows: Path, tiny_lm_dir: Path,
                                                                 tmp_path: Path, capsys, model: str) -> None:
    out = tmp_path / "eval"
    assert _eval(image_rows, tiny_lm_dir if model == "tiny_lm" else model, out) == 2
    err = capsys.readouterr().err
    assert "text-only model" in err and "prompts.jsonl" in err
    assert not (out / "predictions.jsonl").exists()


def test_eval_image_rows_through_an_endpoint_sends_data_urls(image_rows: Path, tmp_path: Path) -> None:
    from fake_vlm_server import FakeVLMServer

    bodies: list[dict] = []

    def reply(body: dict, fingerprint: str) -> str:
        bodies.append(body)
        return "<think> it moves </think><answer> [[A]] </answer>"

    out = tmp_path / "eval"
    with FakeVLMServer(reply=reply) as server:
        assert _eval(image_rows, server.base_url, out) == 0
    predictions = read_jsonl(out / "predictions.jsonl")
    assert sorted(p["id"] for p in predictions) == ["q0", "q1", "q2"]
    assert all(p["parsed_answer"] == "A" for p in predictions)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["input"] == "image" and metrics["generation"]["engine"] == "openai-vl"
    assert len(bodies) == 3 and {b["model"] for b in bodies} == {"fake-vlm"}
    for body in bodies:
        system, user = body["messages"]
        assert system["role"] == "system" and isinstance(system["content"], str)
        image, text = user["content"]
        assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/jpeg;base64,")
        assert text["type"] == "text" and "[[A]]" in text["text"]
        assert body["temperature"] == 0.0 and body["max_tokens"] == 3


def test_endpoint_failures_keep_the_other_answers(image_rows: Path, tmp_path: Path, capsys) -> None:
    from fake_vlm_server import FakeVLMServer, Fault

    failing: set[str] = set()

    def plan(fingerprint: str, attempt: int) -> Fault:
        if not failing:
            failing.add(fingerprint)
        return Fault("status", 400) if fingerprint in failing else Fault()

    out = tmp_path / "eval"
    with FakeVLMServer(faults=plan, reply=lambda body, fp: "<answer> [[B]] </answer>") as server:
        assert _eval(image_rows, server.base_url, out) == 2
        assert "1 of 3 request(s)" in capsys.readouterr().err
        assert len(read_jsonl(out / "predictions.jsonl")) == 2
        # The rerun retries only the failed row (it still fails here).
        assert _eval(image_rows, server.base_url, out) == 2
        assert "1 of 1 request(s)" in capsys.readouterr().err
