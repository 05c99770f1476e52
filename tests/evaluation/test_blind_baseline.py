"""The blind baseline's rows, and ``eval --baselines blind,text-rule`` end to end with a tiny model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from embodied_r.core.records import PromptRow
from embodied_r.evaluation.baselines import blind_rows
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

FRAMES = [{"action": None, "delta": "I see a blue sofa ahead-left, about 2.0 m away."},
          {"action": "Rotate left", "delta": "Newly visible: a red chair to the left, about 1.1 m away."},
          {"action": "Rotate right", "delta": "No new objects came into view."}]
OPTIONS = ["A. Rotate right", "B. Rotate left", "C. Move forward", "D. Move backward"]
QUESTION = "Which action did I take just before reaching my current position at the end of the video?"


def _frame_line(line: str) -> bool:
    return re.match(r"Frame \d+: ", line) is not None


def _rows(version: str, n: int = 1) -> list[PromptRow]:
    prompt = build_reasoner_messages(FRAMES, QUESTION, OPTIONS, version)
    return [PromptRow(id=f"q{i}", task="last_action", prompt=prompt, answer="A", options=OPTIONS,
                      meta={"prompt_version": version}) for i in range(n)]


@pytest.mark.parametrize("version", ["official-v1", "compact-v1", "official", "structured-v1"])
def test_blind_rows_drop_exactly_the_frame_lines(version: str) -> None:
    row = _rows(version)[0]
    blind = blind_rows([row])[0]
    before, after = row.prompt[-1]["content"], blind.prompt[-1]["content"]
    assert after.split("\n") == [line for line in before.split("\n") if not _frame_line(line)]
    assert "Frame" not in after and "sofa" not in after
    assert after.endswith(before[before.index("Question:"):])  # the question and its options, unchanged
    assert blind.prompt[0] == row.prompt[0]  # the system prompt, unchanged
    assert (blind.id, blind.answer, blind.options, blind.task) == (row.id, row.answer, row.options, row.task)
    assert blind.meta["blind_removed_frames"] == 3 and blind.meta["baseline"] == "blind"
    assert row.prompt[-1]["content"] == before  # the model's own rows are not touched


def test_blind_rows_of_official_processed_data() -> None:
    from shared_paths import shared_data

    from embodied_r.evaluation.inputs import load_inputs

    rows, _ = load_inputs(shared_data("embodied_r_processed/urban_original_test.json"))
    for row, blind in zip(rows, blind_rows(rows)):
        before, after = row.prompt[-1]["content"], blind.prompt[-1]["content"]
        assert after.split("\n") == [line for line in before.split("\n") if not _frame_line(line)]
        assert blind.meta["blind_removed_frames"] == before.count("\nFrame ") > 0
        assert after.endswith(before[before.index("Question:"):])


def test_rows_without_frames_or_with_images() -> None:
    plain = PromptRow("p", "t", [{"role": "user", "content": "Question: where?\nChoices:\nA. l\nB. r"}], "A", "choice",
                      ["A. l", "B. r"])
    image = PromptRow("i", "t", [{"role": "user", "content": [{"type": "image", "image": "a.png"},
                                                              {"type": "text", "text": "Frame 0: Observe: x"}]}],
                      "A", "choice", ["A. l", "B. r"])
    spaced = PromptRow("s", "t", [{"role": "user", "content": "Video content:\nFrame 0: Observe: 1. a sofa\n2. a door"
                                                              "\n\nQuestion: where?"}], "A", "choice", ["A. l"])
    assert blind_rows([spaced])[0].prompt[0]["content"] == "Video content:\n\nQuestion: where?"  # a frame's own lines
    blind_plain, blind_image = blind_rows([plain, image])
    assert blind_plain.prompt == plain.prompt and blind_plain.meta["blind_removed_frames"] == 0
    assert blind_image is image  # left alone: the baseline refuses image rows


def test_eval_with_blind_and_text_rule(tmp_path: Path, tiny_lm_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from embodied_r.cli.main import main
    from embodied_r.evaluation import predict

    rows = _rows("official-v1", 3) + [PromptRow("bare", "t", [{"role": "user", "content": "Question: where?"}], "A",
                                                "choice", ["A. l", "B. r"])]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    calls: list[tuple[list[str], int, str]] = []
    original = predict.evaluate_rows

    def spy(model, tokenizer, batch, **kwargs):
        calls.append(([r.prompt[-1]["content"] for r in batch], kwargs["max_new_tokens"], kwargs["completion_prefix"]))
        return original(model, tokenizer, batch, **kwargs)

    monkeypatch.setattr(predict, "evaluate_rows", spy)
    out = tmp_path / "out"
    assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(out), "--max-new-tokens",
                 "5", "--completion-prefix", "<think>", "--dtype", "float32", "--baselines", "blind,text-rule"]) == 0
    printed = capsys.readouterr().out
    # The model's pass and the blind pass: same budget and prefix (not the direct baseline's short budget).
    model_call, blind_call = calls
    assert model_call[1:] == blind_call[1:] == (5, "<think>")
    assert any("Frame 0" in text for text in model_call[0]) and not any("Frame" in text for text in blind_call[0])
    blind = [json.loads(line) for line in (out / "baselines" / "blind.jsonl").read_text().splitlines()]
    assert sorted(p["id"] for p in blind) == ["bare", "q0", "q1", "q2"]
    assert all(p["completion"].startswith("<think>") for p in blind)
    metrics = json.loads((out / "metrics.json").read_text())
    table = metrics["baselines"]["blind"]
    assert (table["status"], table["max_new_tokens"], table["n_no_video_text"]) == ("ok", 5, 1)
    assert table["overall"]["n"] == 4 and "had no video text" in table["reason"]
    rule = metrics["baselines"]["text-rule"]
    assert rule["tasks"]["last_action"]["n_applies"] == 3 and rule["tasks"]["last_action"]["ceiling"] == 1.0
    assert rule["tasks"]["t"]["rule"] == "none" and rule["tasks"]["t"]["ceiling"] is None
    assert (out / "baselines" / "text-rule.jsonl").is_file()
    assert "text-rule" in printed and "answerable ceiling" in printed and "blind" in printed
    report = (out / "report.html").read_text()
    assert "Baselines per task" in report and "answerable ceiling" in report


def test_a_bad_baseline_name_is_a_clear_cli_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from embodied_r.cli.main import main

    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(_rows("official-v1")[0].to_dict()) + "\n")
    assert main(["eval", "--data", str(data), "--out", str(tmp_path / "o"), "--baselines", "blind,blnd"]) == 2
    err = capsys.readouterr().err
    assert "unknown ['blnd']" in err and "'text-rule'" in err and "'blind'" in err


def test_blind_is_not_run_on_image_rows(tmp_path: Path) -> None:
    from embodied_r.evaluation.analysis import run_baselines

    image = PromptRow("i", "t", [{"role": "user", "content": [{"type": "image", "image": "a.png"},
                                                              {"type": "text", "text": "Question: where?"}]}],
                      "A", "choice", ["A. l", "B. r"])

    def no_engine() -> None:
        raise AssertionError("no model may be loaded for image rows")

    tables = run_baselines(["blind", "text-rule"], [image], tmp_path, no_engine, 1, 16, max_new_tokens=8)
    assert tables["blind"]["status"] == "not run" and "image row" in tables["blind"]["reason"]
    assert tables["text-rule"]["status"] == "ok" and tables["text-rule"]["overall"]["micro"] == 0.5
