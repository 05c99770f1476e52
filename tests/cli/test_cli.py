from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from embodied_r.cli.main import build_parser, main
from embodied_r.core.records import PromptRow


def test_help_lists_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in ("eval", "synth"):
        assert name in out


def test_every_command_module_is_listed_and_complete() -> None:
    # The command list is explicit (it fixes the order of --help); a module with a run() left out of it
    # would be a command nobody can call.
    import pkgutil

    import embodied_r.cli as package
    from embodied_r.cli.main import COMMANDS, _command_module

    modules = {info.name.replace("_", "-") for info in pkgutil.iter_modules(package.__path__)
               if not info.name.startswith("_") and info.name not in ("main", "common")}
    assert set(COMMANDS) == modules
    for name in COMMANDS:
        module = _command_module(name)
        assert module.HELP and module.DESCRIPTION, name
        assert callable(module.add_arguments) and callable(module.run), name
    subcommands = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(subcommands.choices) == list(COMMANDS)


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: embodied-r" in capsys.readouterr().out


def test_every_subcommand_help_is_instant() -> None:
    # Heavy libraries must be imported inside run(): a fresh interpreter answers --help quickly and
    # without importing torch.
    parser = build_parser()
    commands = sorted(parser._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse has no public API
    code = (
        "import sys, time; t=time.perf_counter(); from embodied_r.cli.main import main\n"
        f"for c in {commands!r}:\n"
        "    try: main([c, '--help'])\n"
        "    except SystemExit: pass\n"
        "assert 'torch' not in sys.modules, 'torch imported by --help'\n"
        "print(time.perf_counter()-t)"
    )
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert time.perf_counter() - started < 20  # generous: a torch import alone costs several seconds here


def test_eval_end_to_end(tmp_path: Path, tiny_lm_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [PromptRow(id=f"q{i}", task="t", prompt=[{"role": "user", "content": "where?"}], answer="B",
                      options=["A. left", "B. right"]) for i in range(3)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    code = main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(tmp_path / "out"),
                 "--max-new-tokens", "4", "--dtype", "float32"])
    assert code == 0
    assert "overall (micro" in capsys.readouterr().out
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 3
    assert len((tmp_path / "out" / "predictions.jsonl").read_text().splitlines()) == 3


def test_eval_of_a_lora_checkpoint(tmp_path: Path, tiny_lm_dir: Path) -> None:
    # What training with `lora:` saves (checkpoint-N/, final/) is an adapter folder, evaluated as is.
    from tests.tiny_models import build_tiny_lora_checkpoint

    rows = [PromptRow(id=f"q{i}", task="t", prompt=[{"role": "user", "content": "where?"}], answer="B",
                      options=["A. left", "B. right"]) for i in range(2)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    adapter = build_tiny_lora_checkpoint(tiny_lm_dir, tmp_path / "final")
    assert main(["eval", "--data", str(data), "--model", str(adapter), "--out", str(tmp_path / "out"),
                 "--max-new-tokens", "4", "--dtype", "float32", "--no-report"]) == 0
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["overall"]["n"] == 2


def test_eval_bad_input_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--data", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")]) == 2
    assert "missing.json: file not found" in capsys.readouterr().err
    assert main(["eval", "--data", "x.json", "--out", "o", "--limit", "0"]) == 2
