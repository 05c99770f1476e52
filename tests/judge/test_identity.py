"""The evaluation judge is probed, and a circular or self-judged consistency rate is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from probe_rows import probe_rows, quick_eval_argv

from embodied_r.cli.main import main
from embodied_r.core.io import write_jsonl
from embodied_r.judge.identity import judge_flags, training_judge
from embodied_r.judge.probe import KINDS


def _training_run(root: Path, start_model: Path, judge_model="policy", old_spelling: bool = False) -> Path:
    run = root / "run"
    (run / "final").mkdir(parents=True)
    (run / "final" / "config.json").write_text("{}")
    recipe = {
        "model": str(start_model),
        "rewards": ["format", "accuracy", "consistency"],
        **({"reference_model": judge_model} if old_spelling else {"judge": {"model": judge_model}}),
    }
    (run / "resolved_recipe.yaml").write_text(yaml.safe_dump(recipe))
    (run / "grpo_config.json").write_text(json.dumps({"model_path": str(start_model)}))
    return run


def test_the_training_reward_judge_is_found_and_flagged(tmp_path: Path, tiny_lm_dir: Path) -> None:
    run = _training_run(tmp_path, tiny_lm_dir)
    trained = str(run / "final")
    assert training_judge(trained)["model"] == str(tiny_lm_dir.resolve())
    (circular,) = judge_flags(str(tiny_lm_dir), str(tiny_lm_dir), trained)
    assert circular.startswith("circular") and str(run) in circular
    assert judge_flags("other-model", "other-model", trained) == []  # an independent judge
    assert judge_flags("policy", trained, trained)[0].startswith("self-judged")
    assert training_judge(str(tiny_lm_dir)) is None  # not a training output


def test_a_judge_model_of_either_spelling_is_found(tmp_path: Path, tiny_lm_dir: Path) -> None:
    new = _training_run(tmp_path / "new", tiny_lm_dir, judge_model=str(tiny_lm_dir))
    # A run recorded before the recipe section ``judge`` names its judge reference_model.
    old = _training_run(tmp_path / "old", tiny_lm_dir, judge_model=str(tiny_lm_dir), old_spelling=True)
    for run in (new, old):
        assert training_judge(str(run / "final"))["model"] == str(tiny_lm_dir.resolve())


def test_eval_reports_the_judge_probe_beside_the_rate(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(20))
    out = tmp_path / "eval"
    assert main(quick_eval_argv(data, tiny_lm_dir, out, "--judge", str(tiny_lm_dir))) == 0
    consistency = json.loads((out / "metrics.json").read_text())["consistency"]
    assert consistency["status"] == "ok" and consistency["sees_letters"] is False
    probe = consistency["probe"]
    assert probe["cases"] == len(KINDS) * 64 and probe["judge"] == str(tiny_lm_dir)
    assert (out / "judge_probe.json").is_file()
    assert any(flag.startswith("self-judged") for flag in consistency["flags"])
    if not probe["passed"]:
        assert any(flag.startswith("weak judge") for flag in consistency["flags"])
    html = (out / "report.html").read_text()
    assert "judge probe" in html and "self-judged" in html


def test_the_judge_probe_size_is_an_option(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(20))
    out = tmp_path / "eval"
    argv = quick_eval_argv(data, tiny_lm_dir, out, "--judge", str(tiny_lm_dir), "--judge-probe-cases", "16")
    assert main(argv) == 0
    probe = json.loads((out / "metrics.json").read_text())["consistency"]["probe"]
    assert probe["cases"] == len(KINDS) * 16 and probe["fingerprint"]["cases"] == 16
    # Below the probe's minimum, or without a judge to probe: a clear error before anything is loaded.
    assert main(quick_eval_argv(data, tiny_lm_dir, tmp_path / "e2", "--judge", str(tiny_lm_dir),
                                "--judge-probe-cases", "8")) == 2
    assert main(quick_eval_argv(data, tiny_lm_dir, tmp_path / "e3", "--judge-probe-cases", "16")) == 2
    assert not (tmp_path / "e2").exists() and not (tmp_path / "e3").exists()
