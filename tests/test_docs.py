"""The README and docs/ against the code: the front door's size, the modules and files the docs name, the
demo's facts (read from the code, never written here a second time), and the links between pages.

A failure names every problem at once, so a module moved or renamed shows each page that still names it.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "embodied_r"
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 150
MAX_LINE_CHARS = 200  # outside fenced code blocks


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


# ---------------------------------------------------------------------------------------------------------
# (a) The README is a front door: short, and readable without scrolling sideways
# ---------------------------------------------------------------------------------------------------------


def test_readme_is_short_and_its_lines_fit() -> None:
    text = README.read_text(encoding="utf-8")
    problems = [f"README.md has {len(text.splitlines())} lines (at most {README_MAX_LINES})"] * (
        len(text.splitlines()) > README_MAX_LINES)
    problems += [f"README.md:{n}: {len(line)} characters (at most {MAX_LINE_CHARS} outside code blocks)"
                 for n, line in prose_lines(text) if len(line) > MAX_LINE_CHARS]
    assert not problems, "\n".join(problems)


def test_readme_opens_with_the_two_commands() -> None:
    """``make demo`` and ``make test`` are the set-up commands: the first code block, and nothing else in it."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```\w*\n(.*?)```", text, re.DOTALL)
    assert block is not None, "README.md has no code block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"], f"the README's first code block runs {commands}"
    assert text.index("```") < text.index("\n## "), "the two commands come before the first section"


# ---------------------------------------------------------------------------------------------------------
# (b) Every module, script, recipe and test a page names exists
# ---------------------------------------------------------------------------------------------------------

# Files of other projects that the docs cite by their path there (not files of this repository).
OTHER_PROJECTS = {
    "tasks/vsibench/utils.py": "lmms-eval's VSI-Bench task",
    "tasks/mvbench/utils.py": "lmms-eval's MVBench task",
    "integrations/ggml.py": "transformers' GGUF integration",
}
FILE_SUFFIXES = {"md", "py", "yaml", "yml", "json", "jsonl", "html", "png", "txt", "sh", "mp4", "parquet", "whl"}
# A relative path with a code or config suffix: benchmarks/x.py, recipes/a/b.yaml, training/warmup.py.
PATH = re.compile(r"(?<![\w./-])([a-z_][\w.-]*(?:/[\w.-]+)+\.(?:py|ya?ml|sh))\b")
# A module path and one of its names: inference/judges.zero3_switched_off.
PATH_NAME = re.compile(r"(?<![\w./-])((?:[a-z_]\w*/)+[a-z_]\w*)\.([A-Za-z_]\w*)\b")
DOTTED = re.compile(r"(?<![\w./-])embodied_r((?:\.\w+)+)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# `core.scoring.score_completion` in a code span is read relative to the package when it starts with one of
# its subpackages, or with one the package once had (before perception and reasoning moved into methods/
# and inference/), so a page still naming an old home fails.
FORMER_SUBPACKAGES = ("perception", "reasoning")
SUBPACKAGES = (*sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()), *FORMER_SUBPACKAGES)


def check_path(path: str) -> str | None:
    """None when the file exists, from the repository root or from ``src/embodied_r``."""
    if path in OTHER_PROJECTS or (ROOT / path).exists() or (PACKAGE / path).exists():
        return None
    return f"{path}: no such file"


def package_names(init: Path) -> set[str]:
    """The names a package's ``__init__.py`` binds at its top level (definitions, assignments, imports): its
    docstring may name a submodule that has since moved, which a word search would take for a name."""
    names: set[str] = set()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def check_module(parts: list[str]) -> str | None:
    """A dotted name under ``embodied_r``: the longest module prefix must exist, and the first name after
    it must occur in that module's source (a function, class, constant or re-export); after a package, it
    must be a name its ``__init__.py`` binds (a submodule that moved away is no such name)."""
    base, module, rest = PACKAGE, None, []
    for index, part in enumerate(parts):
        if (base / part / "__init__.py").is_file():
            base = base / part
        elif (base / f"{part}.py").is_file():
            module, rest = base / f"{part}.py", parts[index + 1:]
            break
        elif index == 0:
            return f"embodied_r.{'.'.join(parts)}: no module embodied_r.{part}"
        else:
            module, rest = base / "__init__.py", parts[index:]
            break
    dotted = "embodied_r." + ".".join(parts)
    if module is None or not rest:
        return None
    if module.name == "__init__.py" and rest[0] not in package_names(module):
        return f"{dotted}: no module or name {rest[0]!r} in embodied_r.{'.'.join(parts[:len(parts) - len(rest)])}"
    if not re.search(rf"\b{re.escape(rest[0])}\b", module.read_text(encoding="utf-8")):
        return f"{dotted}: {rest[0]!r} is not in {module.relative_to(ROOT).as_posix()}"
    return None


def recipe_section_key(parts: list[str]) -> bool:
    """Whether a dotted code span is a key of the recipe section ``judge`` (`judge.model`,
    `judge.probe.min_agreement`), spelt like a module of the subpackage ``judge`` but not one."""
    import dataclasses

    from embodied_r.judge.settings import PROBE_KEYS, JudgeSection

    if parts[0] != "judge" or parts[1] not in {f.name for f in dataclasses.fields(JudgeSection)}:
        return False
    return len(parts) == 2 or (parts[1] == "probe" and len(parts) == 3 and parts[2] in PROBE_KEYS)


def named_modules(text: str) -> list[tuple[str, str | None]]:
    """(what the page says, the problem or None) for every path and module name in it."""
    found: list[tuple[str, str | None]] = []
    for match in PATH.finditer(text):
        found.append((match.group(1), check_path(match.group(1))))
    for match in PATH_NAME.finditer(text):
        path, attr = match.groups()
        if attr in FILE_SUFFIXES or not (PACKAGE / f"{path}.py").is_file() and path.split("/")[0] not in SUBPACKAGES:
            continue  # a data file (runs/x.json) or a path that is not the package's
        if not (PACKAGE / f"{path}.py").is_file() and not (PACKAGE / path / "__init__.py").is_file():
            found.append((match.group(0), f"{path}.py: no such module"))
            continue
        found.append((match.group(0), check_module([*path.split("/"), attr])))
    for match in DOTTED.finditer(text):
        parts = match.group(1).strip(".").split(".")
        if parts[-1] not in FILE_SUFFIXES:
            found.append((match.group(0), check_module(parts)))
    for match in CODE_SPAN.finditer(text):  # core.scoring.score_completion: relative to the package
        span = match.group(1)
        if re.fullmatch(r"[a-z_]\w*(?:\.\w+)+", span) and span.split(".")[0] in SUBPACKAGES:
            if not recipe_section_key(span.split(".")):
                found.append((span, check_module(span.split("."))))
    return found


def test_the_pattern_finds_paths_modules_and_names() -> None:
    """The checker itself: what it finds in a made-up page, and what it reports missing."""
    page = ("See `core.scoring.score_completion`, `core.scoring.no_such_name`, `embodied_r.no_such_module`, "
            "training/warmup.py, benchmarks/no_such_script.py, `judge/judges.zero3_switched_off`, "
            "`inference/no_such_module.some_name`, `embodied_r.inference.no_such_module.some_name`, "
            "recipes/embodied_r/cpu_smollm2.yaml, `OUT/state.json` and `metrics.json`; the recipe keys "
            "`judge.model` and `judge.probe.min_agreement` are no modules.")
    problems = {said: problem for said, problem in named_modules(page)}
    assert problems == {
        "core.scoring.score_completion": None,
        "core.scoring.no_such_name": "embodied_r.core.scoring.no_such_name: 'no_such_name' is not in "
                                     "src/embodied_r/core/scoring.py",
        "embodied_r.no_such_module": "embodied_r.no_such_module: no module embodied_r.no_such_module",
        "training/warmup.py": None,
        "benchmarks/no_such_script.py": "benchmarks/no_such_script.py: no such file",
        "judge/judges.zero3_switched_off": None,
        "inference/no_such_module.some_name": "inference/no_such_module.py: no such module",
        "embodied_r.inference.no_such_module.some_name": "embodied_r.inference.no_such_module.some_name: no module "
                                                         "or name 'no_such_module' in embodied_r.inference",
        "recipes/embodied_r/cpu_smollm2.yaml": None,
    }


def test_every_named_module_and_file_exists() -> None:
    problems = sorted({f"{name(page)}: {problem}" for page in pages()
                       for _, problem in named_modules(page.read_text(encoding="utf-8")) if problem})
    assert not problems, f"{len(problems)} names in the docs point nowhere:\n" + "\n".join(problems)


# An absolute path under a machine's top-level working folders (a home, root, a mounted volume; /tmp in a
# command is scratch space anywhere), or a citation of the research notes, which are not in the repository.
MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:home|root|work|mnt)/\w|shared/research")


def test_no_page_names_this_machine_or_the_research_notes() -> None:
    assert MACHINE_PATH.search("see " + "/ho" + "me/alice/runs") and not MACHINE_PATH.search("runs/demo/report")
    problems = [f"{name(page)}:{n}" for page in pages()
                for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
                if MACHINE_PATH.search(line)]
    assert not problems, "absolute paths of this machine or citations of the research notes:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------------------
# (c) The README says what the demo does, as the code defines it
# ---------------------------------------------------------------------------------------------------------


def demo_facts() -> dict[str, object]:
    """The demo at its defaults, read from the code: the CLI's defaults, the size they choose, the plan
    and the training recipe, and the output folder the Makefile passes."""
    from embodied_r import demo
    from embodied_r.cli import demo as demo_cli

    parser = argparse.ArgumentParser()
    demo_cli.add_arguments(parser)
    defaults = parser.parse_args([])
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    out = re.search(r"^DEMO_OUT \?= (\S+)$", makefile, re.MULTILINE)
    assert out is not None and "embodied-r demo --out $(DEMO_OUT)" in makefile, "the Makefile's demo target moved"
    size = demo.DemoSize.for_minutes(defaults.minutes)
    stages = demo.plan(Path(out.group(1)), size, defaults.model)
    recipe = demo.training_recipe(Path(out.group(1)), size, defaults.model)
    keyframes = next(s.argv for s in stages if s.name == "keyframes")
    assert size.tasks is not None and len(size.tasks) == 1, "the README describes a demo of one task type"
    return {
        "out": out.group(1), "defaults": defaults, "size": size, "recipe": recipe,
        "stages": [s.name for s in stages], "min_grpo_steps": demo.MIN_GRPO_STEPS,
        "max_frames": keyframes[keyframes.index("--max-frames") + 1],
        # --span any keeps the questions whose objects the key frames show: the held-out count is measured,
        # read from the demo's record (tests/test_docs_records.py checks the rest of that record's numbers).
        "held_out": json.loads((DOCS / "records" / "demo.json").read_text(encoding="utf-8"))["n"],
    }


def demo_phrases(facts: dict[str, object]) -> list[str]:
    """What a page describing the demo must say, in these words, with the code's values."""
    size, recipe, defaults = facts["size"], facts["recipe"], facts["defaults"]
    weights = " : ".join(f"{w:g}" for w in recipe["reward_weights"])
    generations = recipe["num_generations"]
    return [
        f"`make demo` runs `embodied-r demo --out {facts['out']}`",
        f"{size.scenes} procedural rooms",
        f"at most {facts['max_frames']} key frames",
        f"{facts['held_out']} held out",
        f"`{defaults.model}`",
        f"{size.sft_steps} supervised steps",
        f"{' and '.join(recipe['rewards'])} rewards ({weights})",
        f"{recipe['per_device_train_batch_size'] // generations} prompts × {generations} completions",
        f"up to {size.train_steps} GRPO steps",
        f"at least {facts['min_grpo_steps']} on the slowest",
        f"`--minutes M` (default {defaults.minutes:g})",
        f"`--dtype` (default `{defaults.dtype}`)",
        f"{facts['out']}/report/report.html",
    ]


DEMO_PAGES = [README, DOCS / "getting-started.md"]


@pytest.mark.parametrize("page", DEMO_PAGES, ids=name)
def test_the_demo_page_states_the_codes_values(page: Path) -> None:
    facts = demo_facts()
    text = " ".join(page.read_text(encoding="utf-8").split())  # a phrase may wrap across lines
    problems = [f"does not say {phrase!r}" for phrase in demo_phrases(facts) if phrase not in text]
    size = facts["size"]
    counts = ((r"(\d+) supervised steps", size.sft_steps), (r"up to (\d+) GRPO steps", size.train_steps))
    for pattern, value in counts:
        problems += [f"says {m.group(0)!r}; the demo runs {value}" for m in re.finditer(pattern, text)
                     if int(m.group(1)) != value]
    assert not problems, f"{name(page)} against src/embodied_r/demo.py:\n" + "\n".join(problems)


def test_the_readme_lists_the_demos_stages_in_order() -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    listed = re.search(r"The stages, in order: (.*?)\.", text)
    assert listed is not None, "README.md has no sentence 'The stages, in order: ...'"
    assert re.findall(r"`([\w-]+)`", listed.group(1)) == demo_facts()["stages"]


def test_getting_started_explains_every_stage_in_order() -> None:
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    explained = re.findall(r"^\d+\. \*\*`([\w-]+)`\*\*", text, re.MULTILINE)
    assert explained == demo_facts()["stages"]


def test_the_demos_warmup_in_training_md_is_the_demos() -> None:
    """docs/training.md quotes the demo's ``format_warmup``; every key it gives has the recipe's value."""
    text = " ".join((DOCS / "training.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"`format_warmup: (\{[^}]*\})` \(the demo's", text)
    assert quoted is not None, "docs/training.md no longer quotes the demo's format_warmup"
    warmup = demo_facts()["recipe"]["format_warmup"]
    differing = {k: (v, warmup.get(k)) for k, v in yaml.safe_load(quoted.group(1)).items() if warmup.get(k) != v}
    assert not differing, f"docs/training.md: key: (says, the demo's): {differing}"


# ---------------------------------------------------------------------------------------------------------
# (d) Every page can be reached: docs/*.md from the README's index, docs/notes/*.md from some page
# ---------------------------------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)(?:#[^)]*)?\)")


def links(page: Path) -> set[Path]:
    """The local files a page links to, resolved."""
    return {(page.parent / target).resolve() for target in LINK.findall(page.read_text(encoding="utf-8"))
            if not re.match(r"[a-z]+:", target)}


def test_every_link_points_to_a_file() -> None:
    broken = [f"{name(page)} -> {target}" for page in pages() for target in links(page) if not target.exists()]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_readme_index_links_every_doc() -> None:
    text = README.read_text(encoding="utf-8")
    index = text[text.index("\n## Docs"):] if "\n## Docs" in text else ""
    linked = {(ROOT / target).resolve() for target in LINK.findall(index)}
    missing = [name(p) for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert index and not missing, f"not in the README's '## Docs' index: {missing}"


def test_every_note_is_linked_from_a_page() -> None:
    notes = sorted((DOCS / "notes").glob("*.md"))
    linked = set().union(*(links(page) for page in pages()))
    orphans = [name(note) for note in notes if note.resolve() not in linked]
    assert not orphans, f"notes no page links to: {orphans}"


# ---------------------------------------------------------------------------------------------------------
# (e) The consistency judge's keys are spelt as the recipe section ``judge`` spells them
# ---------------------------------------------------------------------------------------------------------

# Where a former top-level judge key (``judge.settings.MOVED_KEYS``) may still be named, each for its reason.
# Whitespace in a pattern matches any whitespace, so a context may wrap across lines. Command-line flags need
# no entry: they are spelt with hyphens (`eval --judge-scoring`, `--judge-sees-letters`, `--judge-probe-cases`,
# `judge-probe --consistency-rule`, `robot-bench --allow-weak-judge`), which the key pattern never matches.
OLD_JUDGE_KEY_CONTEXTS = {
    # judge_probe.json (a run's probe record), cli/judge_probe.py (the judge-probe command)
    "a file name": r"\b(?:{keys})\.(?:json|py)\b",
    # bench_metrics.json (`judge_probe`, `scores_trusted`): a field of a metrics file
    "a field of a metrics file": r"`\w+\.json` \(`judge_probe`",
    # build_consistency_reward(reference_model=..., consistency_rule=...): the Python builder's arguments
    "the consistency reward builder's arguments": r"build_consistency_reward\([^)]*\)",
    # {consistency: {reference_model: NAME}}: a reward entry's options (the builder's arguments)
    "a consistency reward entry's options": r"\{consistency: \{[^{}]*\}\}",
    "the refused reward option": r"entry option `consistency_rule` is refused",
    # the migration note: "top-level recipe keys before (`reference_model`, ...)"
    "the list of the keys the section replaced": r"top-level (?:recipe|judge) keys? (?:of )?before[^(]*\([^)]*\)",
}


def old_judge_keys() -> list[str]:
    from embodied_r.judge.settings import MOVED_KEYS

    return sorted(MOVED_KEYS)


def old_judge_key_mentions(text: str, keys: list[str]) -> list[tuple[int, str]]:
    """(line number, key) for every former top-level judge key that no allowed context covers."""
    alternatives = "|".join(map(re.escape, keys))
    allowed: list[tuple[int, int]] = []
    for pattern in OLD_JUDGE_KEY_CONTEXTS.values():
        flexible = re.sub(r"\\? ", r"\\s+", pattern.replace("{keys}", alternatives))
        allowed += [m.span() for m in re.finditer(flexible, text)]
    found = []
    for match in re.finditer(rf"(?<![\w.-])({alternatives})(?![\w-])", text):
        if not any(start <= match.start() and match.end() <= end for start, end in allowed):
            found.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return found


def test_the_old_judge_key_check_itself() -> None:
    """What counts as naming a former key as a recipe key in a made-up page, and what is allowed."""
    keys = old_judge_keys()
    page = ("Set `reference_model: policy`.\n"                                          # 1: a recipe key
            "judge_probe: {cases: 32}\n"                                                # 2: a recipe key
            "`--set allow_weak_judge=true` and `judge_scoring`.\n"                       # 3: twice
            "Written to `judge_probe.json` by cli/judge_probe.py; `eval --judge-scoring letter`,\n"
            "`judge-probe --consistency-rule shuffled-options`, `--judge-sees-letters`.\n"
            "`bench_metrics.json` (`judge_probe`, `scores_trusted`).\n"
            "`build_consistency_reward(reference_model=...,\n    consistency_rule=...)` and\n"
            "`{consistency: {reference_model: NAME}}`; an entry option\n`consistency_rule` is refused.\n"
            "These were top-level recipe keys before (`judge_sees_letters`, `consistency_rule`).\n"
            "Now `judge.model`, `judge.probe.cases`, `judge.allow_weak`.\n")
    assert old_judge_key_mentions(page, keys) == [
        (1, "reference_model"), (2, "judge_probe"), (3, "allow_weak_judge"), (3, "judge_scoring")]


def test_no_page_names_an_old_judge_key_as_a_recipe_key() -> None:
    """The six top-level judge keys moved into the section ``judge`` (``judge.model``, ...); a recipe that
    still has one is refused. Dated records under docs/notes/ describe the runs of their time and keep them."""
    from embodied_r.judge.settings import MOVED_KEYS

    problems = [f"{name(page)}:{n}: {key} (now {MOVED_KEYS[key]})"
                for page in pages() if DOCS / "notes" not in page.parents
                for n, key in old_judge_key_mentions(page.read_text(encoding="utf-8"), old_judge_keys())]
    assert not problems, "former top-level judge keys, now in the recipe section judge:\n" + "\n".join(problems)


def test_training_md_lists_every_key_of_the_judge_section() -> None:
    import dataclasses

    from embodied_r.judge.settings import JudgeSection

    text = (DOCS / "training.md").read_text(encoding="utf-8")
    table = text[text.index("| `judge.` key |"):] if "| `judge.` key |" in text else ""
    rows = re.findall(r"^\| `(\w+)` \|", table.split("\n\n")[0], re.MULTILINE)
    assert rows == [f.name for f in dataclasses.fields(JudgeSection)], f"docs/training.md's judge table: {rows}"


def test_no_code_or_recipe_cites_the_research_notes() -> None:
    """The research notes are not part of the repository: code and recipes state the fact or cite the paper."""
    cites = re.compile(r"research/\w+\.md")
    assert cites.search("(" + "research/" + "embodied_r.md §7)")
    problems = [f"{path.relative_to(ROOT)}:{n}" for folder in ("src", "benchmarks", "recipes")
                for path in sorted((ROOT / folder).rglob("*")) if path.suffix in (".py", ".yaml", ".sh")
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                if cites.search(line)]
    assert not problems, "citations of the research notes:\n" + "\n".join(problems)
