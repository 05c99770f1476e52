"""``perceive --detail/--detail-noise`` refusals and ``build-prompts --span`` end to end on hand-made files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.core.records import Perception, QARecord
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

# ---------------------------------------------------------------------------------------------------
# perceive: every wrong detail option is refused before any work
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    (["--backend", "oracle", "--detail", "pixels"], "choose one of words, bearings, map, relations, facts"),
    (["--backend", "oracle", "--detail", "map", "--detail-noise=-0.5"], "finite number >= 0"),
    (["--backend", "oracle", "--detail", "map", "--detail-noise", "nan"], "finite number >= 0"),
    (["--backend", "oracle", "--detail", "bearings", "--detail-noise", "inf"], "finite number >= 0"),
    (["--backend", "oracle", "--detail-noise", "0.1"], "--oracle-noise"),
    (["--backend", "oracle", "--detail", "words", "--detail-noise", "0.1"], "bearings, map, relations"),
    (["--backend", "openai", "--detail", "map", "--model", "m", "--base-url", "http://x/v1"],
     "detail levels are the oracle's"),
    (["--backend", "openai", "--detail-noise", "0.5", "--model", "m", "--base-url", "http://x/v1"],
     "detail levels are the oracle's"),
    (["--backend", "transformers", "--detail", "relations", "--model", "m"], "detail levels are the oracle's"),
])
def test_perceive_refuses_bad_detail_options_before_any_work(tmp_path, capsys, options, message):
    out = tmp_path / "perception.jsonl"
    # The questions file does not even exist: the refusal comes before anything is read or written.
    code = main(["perceive", "--qa", str(tmp_path / "missing.jsonl"), "--keyframes", str(tmp_path),
                 "--out", str(out), *options])
    assert code == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not out.exists() and not (tmp_path / "perception.jsonl.cache").exists()


def test_detail_words_with_no_noise_is_allowed_for_a_vlm(tmp_path, capsys):
    code = main(["perceive", "--qa", str(tmp_path / "missing.jsonl"), "--keyframes", str(tmp_path),
                 "--out", str(tmp_path / "p.jsonl"), "--backend", "openai", "--detail", "words",
                 "--detail-noise", "0"])
    assert code == 2 and "needs --model" in capsys.readouterr().err  # the next check, not the detail one


def test_backend_options_carry_the_detail_only_above_words(tmp_path):
    from embodied_r.cli.main import build_parser
    from embodied_r.cli.perceive import _backend_options

    def options(*extra):
        args = build_parser().parse_args(["perceive", "--qa", "q.jsonl", "--keyframes", "kf", "--out", "o.jsonl",
                                          "--backend", "oracle", *extra])
        return _backend_options(args, tmp_path)

    assert options() == {"dataset_dir": tmp_path, "noise": None, "seed": 0}
    assert options("--detail", "words") == {"dataset_dir": tmp_path, "noise": None, "seed": 0}
    assert options("--detail", "map", "--detail-noise", "0.25") == {
        "dataset_dir": tmp_path, "noise": None, "seed": 0, "detail": "map", "detail_noise": 0.25}


# ---------------------------------------------------------------------------------------------------
# build-prompts --span on hand-made questions and oracle perception
# ---------------------------------------------------------------------------------------------------

# question id -> (labels each of three key frames shows, labels the question needs); expected span after #
CASES = {
    "one": ([["chair_0", "table_1"], [], ["wall_0"]], ["chair_0", "table_1"]),  # 1
    "none_needed": ([[], [], []], []),  # 1 (e.g. the last action)
    "two": ([["chair_0"], ["wall_0"], ["table_1"]], ["chair_0", "table_1"]),  # 2
    "three": ([["a_0"], ["b_1"], ["c_2"]], ["a_0", "b_1", "c_2"]),  # 3
    "unseen": ([["chair_0"], [], []], ["chair_0", "door_4"]),  # None: door_4 is in no key frame
}
SPANS = {"one": 1, "none_needed": 1, "two": 2, "three": 3, "unseen": None}


def _write(folder: Path, detail: str | None = "map", labels: bool = True, overrides: dict | None = None):
    questions, perceptions = [], []
    for qid, (seen, needs) in {**CASES, "no_perception": ([], [])}.items():
        questions.append(QARecord(id=qid, source="synthetic-world", task="object_rel_direction",
                                  video=f"videos/{qid}.mp4", question=f"Where is the table ({qid})?",
                                  options=["A. left", "B. right", "C. back"], answer="B"))
        if qid == "no_perception":
            continue
        frames = [{"timestamp": float(i), "action": None if i == 0 else "Move forward",
                   "delta": f"A room, frame {i} of {qid}.", "q_related": "The table is ahead.", "raw": f"raw {i}"}
                  for i in range(3)]
        meta = {"leaked": False, "detail": (overrides or {}).get(qid, detail)}
        if labels:
            meta.update(seen=seen, needs=needs)
        perceptions.append(Perception(qa_id=qid, video=f"videos/{qid}.mp4", backend="oracle", model="simulator",
                                      prompt_version="official-v1", frames=frames, meta=meta))
    qa, perception = folder / "questions.jsonl", folder / "perception.jsonl"
    qa.write_text("".join(json.dumps(q.to_dict()) + "\n" for q in questions))
    perception.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in perceptions))
    return qa, perception, {q.id: q for q in questions}, {p.qa_id: p for p in perceptions}


def _build(qa: Path, perception: Path, out: Path, *extra: str) -> int:
    return main(["build-prompts", "--qa", str(qa), "--perception", str(perception), "--out", str(out), *extra])


def _said(capsys) -> str:
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())  # the console wraps long lines


def test_without_span_every_row_is_kept_with_its_prompt_unchanged(tmp_path, capsys):
    qa, perception, questions, perceptions = _write(tmp_path)
    out = tmp_path / "rows.jsonl"
    assert _build(qa, perception, out) == 0
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == list(CASES)  # no_perception is reported, the rest kept
    assert "--span" not in _said(capsys)
    for row in rows:
        qa_record = questions[row["id"]]
        assert row["prompt"] == build_reasoner_messages(perceptions[row["id"]].frames, qa_record.question,
                                                        qa_record.options, version="official-v1")
        assert row["meta"]["detail"] == "map" and row["meta"]["span"] == SPANS[row["id"]]
        assert row["meta"]["perception"] == {"backend": "oracle", "model": "simulator",
                                             "prompt_version": "official-v1", "leaked": False, "runaway": []}


@pytest.mark.parametrize(("span", "kept", "other"), [
    ("1", ["one", "none_needed"], 2),
    ("2", ["two"], 3),
    ("any", ["one", "none_needed", "two", "three"], 0),
])
def test_span_keeps_its_rows_and_counts_the_two_kinds_of_drop(tmp_path, capsys, span, kept, other):
    qa, perception, _, _ = _write(tmp_path)
    everything, out = tmp_path / "all.jsonl", tmp_path / f"span{span}.jsonl"
    assert _build(qa, perception, everything) == 0
    capsys.readouterr()
    assert _build(qa, perception, out, "--span", span) == 0
    said = _said(capsys)
    assert f"wrote {len(kept)} prompt row(s)" in said
    assert (f"--span {span}: dropped 1 question(s) needing an object shown in no key frame and {other} of "
            "another span") in said
    assert "skipped 1 question(s) without perception: no_perception" in said
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == kept
    by_id = {r["id"]: r for r in read_jsonl(everything)}
    assert all(row == by_id[row["id"]] for row in rows)  # the same rows, only fewer


def test_span_refusals(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    vlm = tmp_path / "vlm"
    vlm.mkdir()
    qa, perception, _, _ = _write(vlm, detail=None, labels=False)  # as a VLM's perception: no labels
    assert _build(qa, perception, out, "--span", "1") == 2
    assert "--span needs oracle perception made by this version" in _said(capsys)
    assert not out.exists()
    assert _build(qa, perception, out) == 0  # without --span such perception is fine
    out.unlink()

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    qa, perception, _, _ = _write(mixed, detail="map", overrides={"two": "words"})
    for extra in ([], ["--span", "any"]):
        assert _build(qa, perception, out, *extra) == 2
        said = _said(capsys)
        assert "mixes detail levels 'map'" in said and "'words'" in said and "one level" in said
        assert not out.exists()

    none_kept = tmp_path / "none_kept"
    none_kept.mkdir()
    qa, perception, _, _ = _write(none_kept)
    lines = [line for line in perception.read_text().splitlines() if '"qa_id": "unseen"' in line]
    perception.write_text("\n".join(lines) + "\n")
    assert _build(qa, perception, out, "--span", "any") == 2
    assert "--span any kept no question: 1 need an object shown in no key frame" in _said(capsys)


# ---------------------------------------------------------------------------------------------------
# End to end on a tiny rendered world: synth world -> keyframes -> perceive --detail -> build-prompts --span
# ---------------------------------------------------------------------------------------------------


def test_rendered_world_through_perceive_detail_and_build_prompts_span(tmp_path, capsys):
    pytest.importorskip("mujoco")
    from embodied_r.methods.embodied_r.perception.prompt_rows import question_span

    world, keyframes = tmp_path / "world", tmp_path / "kf"
    assert main(["synth", "world", "--out", str(world), "--scenes", "1", "--seed", "0", "--resolution", "160x120",
                 "--fps", "5", "--seconds", "6", "--per-task", "1"]) == 0
    assert main(["keyframes", str(world / "videos"), "--out", str(keyframes), "--max-frames", "6"]) == 0
    qa = world / "questions.jsonl"
    perceptions = {}
    for detail in ("words", "map"):
        perceptions[detail] = tmp_path / f"{detail}.jsonl"
        assert main(["perceive", "--qa", str(qa), "--keyframes", str(keyframes), "--backend", "oracle",
                     "--detail", detail, "--out", str(perceptions[detail])]) == 0
    capsys.readouterr()

    words, mapped = read_jsonl(perceptions["words"]), read_jsonl(perceptions["map"])
    assert len(words) == len(mapped) == len(read_jsonl(qa)) > 0
    assert all(r["meta"]["settings"] == {"noise": None, "seed": 0} for r in words)  # cache keys as before
    assert all(r["meta"]["settings"]["detail"] == "map" for r in mapped)
    for record in words + mapped:
        assert record["meta"]["detail"] in ("words", "map")
        assert len(record["meta"]["seen"]) == len(record["frames"]) and isinstance(record["meta"]["needs"], list)
        assert all(set(frame) == {"timestamp", "action", "delta", "q_related", "raw"} for frame in record["frames"])

    rows_path = tmp_path / "rows.jsonl"
    assert main(["build-prompts", "--qa", str(qa), "--perception", str(perceptions["map"]),
                 "--out", str(rows_path)]) == 0
    rows = read_jsonl(rows_path)
    spans = {r["id"]: r["meta"]["span"] for r in rows}
    assert {r["meta"]["detail"] for r in rows} == {"map"}
    assert spans == {r["qa_id"]: question_span(r["meta"]["seen"], r["meta"]["needs"]) for r in mapped}
    assert all(span is None or (isinstance(span, int) and span >= 1) for span in spans.values())
    capsys.readouterr()
    assert main(["build-prompts", "--qa", str(qa), "--perception", str(perceptions["map"]),
                 "--out", str(tmp_path / "any.jsonl"), "--span", "any"]) == 0
    uncovered = sum(span is None for span in spans.values())
    assert f"dropped {uncovered} question(s) needing an object shown in no key frame and 0 of another span" in \
        _said(capsys)
    assert [r["id"] for r in read_jsonl(tmp_path / "any.jsonl")] == [i for i, s in spans.items() if s is not None]

    both = tmp_path / "both.jsonl"
    both.write_text(perceptions["words"].read_text() + perceptions["map"].read_text().split("\n", 1)[0] + "\n")
    assert main(["build-prompts", "--qa", str(qa), "--perception", str(both), "--out", str(tmp_path / "x")]) == 2
    assert "mixes detail levels 'map'" in _said(capsys)
