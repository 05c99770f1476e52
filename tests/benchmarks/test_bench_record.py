"""benchmarks/bench_record.py: a benchmark's ``--record`` file is written atomically, holds every field the
docs test reads (benchmark, date, command, machine, settings, results), and names no absolute path of the
machine that measured it (the record is checked in)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_record() -> ModuleType:
    return load_benchmark("bench_record")


def test_the_record_holds_every_field(bench_record: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "records" / "bench_x.json"
    written = bench_record.write_record(path, "answer_parse", ["--repeats", "1"], {"repeats": 1, "tags": [2000]},
                                        {"new_ms": 1.234567, "ratio": 2596.4375, "n": 100_000, "exact": True,
                                         "old_ms": None})
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record == written
    assert list(record) == ["benchmark", "date", "command", "machine", "settings", "results"]
    assert record["benchmark"] == "answer_parse"
    assert record["date"] == dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert record["command"] == "python benchmarks/answer_parse.py --repeats 1"
    assert {"cpu", "cores", "load_1min"} <= set(record["machine"])
    assert record["settings"] == {"repeats": 1, "tags": [2000]}
    # Floats to 4 significant digits; ints, bools and None as measured.
    assert record["results"] == {"new_ms": 1.235, "ratio": 2596.0, "n": 100_000, "exact": True, "old_ms": None}


def test_the_command_names_no_absolute_path(bench_record: ModuleType, tmp_path: Path) -> None:
    argv = ["--data", str(ROOT / "runs" / "learning" / "train.jsonl"), f"--model={tmp_path / 'warmup' / 'model'}",
            "--record", str(tmp_path / "bench_sampling.json"), "--shapes", "2x4,4x8", "--note", "two words"]
    record = bench_record.write_record(tmp_path / "bench_sampling.json", "sampling", argv,
                                       {"data": str(tmp_path / "train.jsonl"), "shapes": ["2x4"]}, {"n": 1})
    words = shlex.split(record["command"])
    assert words == ["python", "benchmarks/sampling.py", "--data", "runs/learning/train.jsonl", "--model=.../model",
                     "--record", ".../bench_sampling.json", "--shapes", "2x4,4x8", "--note", "two words"]
    assert not any(os.path.isabs(word.partition("=")[2] or word) for word in words)
    assert record["settings"]["data"] == ".../train.jsonl"
    text = json.dumps(record)
    assert str(ROOT) not in text and str(tmp_path) not in text


def test_the_record_replaces_the_old_one_whole_or_not_at_all(bench_record: ModuleType, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bench_x.json"
    path.write_text('{"old": true}\n', encoding="utf-8")
    replaced = []
    real_replace = os.replace

    def watched_replace(source: str, target: str) -> None:
        # At the moment of the swap the old record is still whole and the new one is complete beside it.
        assert Path(target) == path and json.loads(path.read_text(encoding="utf-8")) == {"old": True}
        assert Path(source).parent == path.parent and json.loads(Path(source).read_text(encoding="utf-8"))["results"]
        replaced.append(source)
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", watched_replace)
    bench_record.write_record(path, "x", [], {}, {"n": 1})
    assert len(replaced) == 1 and json.loads(path.read_text(encoding="utf-8"))["results"] == {"n": 1}
    with pytest.raises(TypeError):  # a result that is not JSON: the old record stays, no temporary file is left
        bench_record.write_record(path, "x", [], {}, {"n": object()})
    assert json.loads(path.read_text(encoding="utf-8"))["results"] == {"n": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["bench_x.json"]


def test_significant_digits(bench_record: ModuleType) -> None:
    assert [bench_record.significant(v) for v in (108.2876, 0.0016123, 3575.9, 177747.6, 0.0, -2.34567)] == [
        108.3, 0.001612, 3576.0, 177700.0, 0.0, -2.346]
