"""benchmarks/eval_shared_video.py on a tiny model: both layouts give the same completions, the grouped one
plans fewer prefill tokens, and the record holds every round."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import load_benchmark

from tests.tiny_models import build_tiny_causal_lm


def test_the_benchmark_compares_both_layouts_and_records_each_round(tmp_path: Path) -> None:
    bench = load_benchmark("eval_shared_video")
    model = build_tiny_causal_lm(tmp_path / "tiny")
    record = tmp_path / "record.json"
    bench.main(["--model", str(model), "--videos", "2", "--questions", "3", "--frames", "4",
                "--max-new-tokens", "4", "--rounds", "2", "--record", str(record)])
    results = json.loads(record.read_text())["results"]
    flat, grouped = results["runners"]
    assert results["completions_identical"] == 6
    assert results["joined_check"] == {"used": True, "checked_rows": 3, "checked_groups": 2, "agreed": True}
    assert grouped["prefill_tokens"] < flat["prefill_tokens"]
    assert len(flat["round_seconds"]) == len(grouped["round_seconds"]) == 2
