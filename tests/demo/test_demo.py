from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.demo import DemoSize, plan, run_demo


def test_sizes_follow_the_time_budget() -> None:
    short, full = DemoSize.for_minutes(5), DemoSize.for_minutes(15)
    assert short.scenes < full.scenes and short.train_steps < full.train_steps
    with pytest.raises(ValueError, match="at least 3 minutes"):
        DemoSize.for_minutes(1)


def test_plan_chains_each_stage_into_the_next(tmp_path: Path) -> None:
    stages = plan(tmp_path, DemoSize.for_minutes(15))
    names = [s.name for s in stages]
    assert names == ["world", "keyframes", "perception", "split", "prompts-train", "prompts-test", "eval-before",
                     "train", "eval-after", "report"]
    by_name = {s.name: s for s in stages}
    assert str(tmp_path / "perception.jsonl") in by_name["prompts-test"].argv  # perception feeds the prompts
    assert str(tmp_path / "train" / "final") in by_name["eval-after"].argv       # the trained model is evaluated
    assert all(s.command.startswith("embodied-r ") for s in stages)


@pytest.mark.slow
def test_demo_end_to_end_with_a_tiny_model(tmp_path: Path, tiny_lm_dir: Path) -> None:
    size = DemoSize(scenes=2, seconds=6, per_task=1, train_steps=2, eval_limit=4, max_new_tokens=8)
    seen: list[tuple[str, str]] = []
    summary = run_demo(tmp_path / "demo", model=str(tiny_lm_dir), workers=1, size=size,
                       on_stage=lambda stage, i, n, status: seen.append((stage.name, status)))
    assert [name for name, _ in seen][-1] == "report"
    demo = tmp_path / "demo"
    assert (demo / "report" / "report.html").is_file()
    assert (demo / "train" / "final" / "config.json").is_file()
    for name in ("eval_before", "eval_after"):
        metrics = summary[name]
        assert metrics["overall"]["n"] == 4
    state = json.loads((demo / "demo_state.json").read_text())
    assert set(state) == {name for name, _ in seen}
    # A second run resumes: every stage is skipped, nothing is recomputed.
    seen.clear()
    run_demo(tmp_path / "demo", model=str(tiny_lm_dir), workers=1, size=size,
             on_stage=lambda stage, i, n, status: seen.append((stage.name, status)))
    assert all(status.startswith("skipped") for _, status in seen)
