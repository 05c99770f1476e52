"""``embodied-r eval``: evaluate a reasoner on prompt rows, official processed JSON, or any benchmark loader."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embodied_r.evaluation.settings import EvalSettings

HELP = "evaluate a reasoning model: batched greedy generation, per-task accuracy, resumable"
DESCRIPTION = ("Evaluate a reasoning model on prompt rows (.jsonl from build-prompts), an official Embodied-R "
               "processed JSON file, or a benchmark loader spec with its perception. Predictions are written as "
               "they finish; rerunning the same command resumes. Writes metrics.json and report.html.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from embodied_r.cli.common import add_generation_arguments, add_method_argument
    from embodied_r.core.scoring import ACCURACY_RULES, DEFAULT_ACCURACY_RULE
    from embodied_r.methods import EMBODIED_R

    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="prompt-row .jsonl, official processed .json, or NAME:PATH with NAME one of urbanvideo, "
                        "vsibench, vsibench-merged, egoschema, mvbench (DIR#task1,task2), synthetic, qa, or "
                        "MODULE:FUNCTION:PATH for a loader of your own package (e.g. my_pkg.loaders:load_mine:DIR)")
    add_method_argument(parser)
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="built-in name, local folder or Hugging Face id (default: %(default)s)")
    parser.add_argument("--out", required=True, help="output folder (predictions.jsonl, metrics.json)")
    add_generation_arguments(parser, "evaluate only the first N questions")
    parser.add_argument("--shard", default=None, metavar="I/N",
                        help="evaluate every N-th question from the I-th (0-based) into OUT/shard-I-of-N, e.g. one "
                        "process per GPU; a later run without --shard on the same OUT merges the shards' predictions "
                        "and writes the metrics of all")
    parser.add_argument("--input", default="auto", choices=["auto", "image", "text"],
                        help="which prompt rows --data holds: image rows (Robot-R1 prompts_vl.jsonl, answered by "
                        "a vision-language --model, local or an http(s):// endpoint) or text rows "
                        "(prompts.jsonl); auto = what the rows hold, image or text to insist (default: %(default)s)")
    parser.add_argument("--engine", default="auto", choices=["auto", "transformers", "vllm"],
                        help="generation engine; auto = vLLM when installed with a GPU (default: %(default)s)")
    parser.add_argument("--prompt-version", default=None, choices=sorted(EMBODIED_R.prompt_versions),
                        help="reasoner prompt template: for loader specs (default official-v1) and the system "
                             "prompt of an official processed .json (default official: the official bytes)")
    parser.add_argument("--completion-prefix", default="", metavar="TEXT",
                        help="prefill the reasoner's assistant turn with TEXT (e.g. '<think>'); use the "
                        "completion_prefix of the training recipe so a trained model is evaluated as it "
                        "was trained (default: none, the paper's prompt)")
    parser.add_argument("--accuracy-rule", default=DEFAULT_ACCURACY_RULE, choices=ACCURACY_RULES,
                        help="how a choice answer is read: last-answer (only the last <answer> block; the project's "
                        "rule) or official (Embodied-R's released accuracy reward: a letter read from the whole "
                        "completion, reasoning included). Stored predictions are rescored, nothing is generated "
                        "again (default: %(default)s)")
    perception = parser.add_argument_group("perception (for loader specs: the reasoner reads frame descriptions)")
    perception.add_argument("--perception", default=None, metavar="FILE", help="Perception .jsonl from `perceive`")
    perception.add_argument("--perception-backend", default=None, choices=["oracle", "openai", "transformers"],
                            help="run perception now over --keyframes (written to OUT/perception.jsonl); with "
                            "--perception FILE it serves only the vlm_only baseline")
    perception.add_argument("--keyframes", default=None, metavar="DIR", help="key frames from `embodied-r keyframes`")
    perception.add_argument("--perception-model", default=None, help="VLM name (openai) or id/path (transformers)")
    perception.add_argument("--base-url", default=None, help="OpenAI-compatible VLM endpoint (openai backend)")
    perception.add_argument("--dataset-dir", default=None, help="synthetic dataset folder (oracle backend)")
    extra = parser.add_argument_group("baselines and logical consistency")
    extra.add_argument("--baselines", default="random,prior,answer-prior",
                       help="comma list of random, prior (the task's most frequent letter), answer-prior (the "
                       "option whose text is most often the task's answer), direct, vlm_only, blind (the model "
                       "without the frame descriptions, same budget and prefix), text-rule (a deterministic rule "
                       "per task over the frame descriptions, no model), solver (each row's method's exact solver over "
                       "the prompt text: the share the text determines and the share of those it gets right, no "
                       "model), or 'none' (default: %(default)s)")
    extra.add_argument("--prior-from", default=None, metavar="FILE",
                       help="fit the letter- and answer-prior baselines on these prompt rows (e.g. the training split, "
                       "prompts.jsonl of `synth robot`) instead of leave-one-out on the evaluated questions")
    extra.add_argument("--judge", default=None,
                       help="measure logical consistency with this judge: a model name/path or an http(s):// "
                       "OpenAI-compatible endpoint, best another model than the training reward's judge (the "
                       "report flags a circular or self-judged rate); 'policy' = the evaluated model itself. "
                       "The judge is probed first and the probe is reported beside the rate")
    extra.add_argument("--judge-model", default=None, help="model name served at an endpoint --judge")
    extra.add_argument("--judge-sees-letters", action="store_true",
                       help="let the judge read option letters in the reasoning (the official rule); default: "
                       "letters are masked, so only reasoning whose content leads to the answer counts")
    extra.add_argument("--judge-scoring", choices=("option-text", "letter"), default=None,
                       help="how a local judge answers: option-text (each option's text scored after the "
                       "reasoning, calibrated; default) or letter (next-token option letter, the official rule)")
    extra.add_argument("--judge-probe-cases", type=int, default=None, metavar="N",
                       help="content cases of the judge's probe (as many again with the letter named and "
                       "with a contradicting one; default 64, at least 16): fewer make it faster and its "
                       "verdict coarser")
    extra.add_argument("--no-report", action="store_true", help="skip report.html and plots")
    parser.add_argument("--recipe", default=None, metavar="FILE",
                        help="evaluate as this training recipe asks: its eval_max_new_tokens, completion_prefix, "
                        "context_rule, max_prompt_tokens and prompt_version become the defaults (flags given "
                        "here still win); e.g. the paper recipe's 3,096-token budget and 6,144-token prompts")
    # Unset unless given, so that a recipe can supply them (fallbacks in RECIPE_SETTINGS).
    parser.set_defaults(max_new_tokens=None, context_rule=None, max_prompt_tokens=None, completion_prefix=None)


# eval flag <- recipe key, and the value without either.
RECIPE_SETTINGS = {"max_new_tokens": ("eval_max_new_tokens", 256), "completion_prefix": ("completion_prefix", ""),
                   "context_rule": ("context_rule", "drop-frames"), "max_prompt_tokens": ("max_prompt_tokens", None),
                   "prompt_version": ("prompt_version", None)}


def apply_recipe(args: argparse.Namespace) -> dict[str, Any]:
    """Fill the unset generation flags from ``--recipe`` (or their defaults); returns what the recipe set."""
    from embodied_r.cli.common import CLIError
    from embodied_r.training.recipe import RecipeError, load_recipe

    recipe = None
    if args.recipe:
        try:
            recipe = load_recipe(args.recipe)
        except (RecipeError, OSError) as exc:
            raise CLIError(f"--recipe {args.recipe}: {exc}") from None
    taken = {}
    for flag, (key, fallback) in RECIPE_SETTINGS.items():
        if getattr(args, flag) is not None:
            continue
        value = getattr(recipe, key) if recipe is not None else None
        if value is not None and value != "":
            taken[flag] = value
        setattr(args, flag, fallback if value is None else value)
    return taken


def perception_source(args: argparse.Namespace) -> Any:
    from embodied_r.cli.common import CLIError
    from embodied_r.evaluation.inputs import PerceptionSource

    options: dict[str, Any] = {}
    if args.perception_backend == "oracle":
        if not args.dataset_dir:
            raise CLIError("--perception-backend oracle needs --dataset-dir (the synthetic dataset folder)")
        options["dataset_dir"] = args.dataset_dir
    elif args.perception_backend == "openai":
        if not (args.base_url and args.perception_model):
            raise CLIError("--perception-backend openai needs --base-url and --perception-model")
        options.update(base_url=args.base_url, model=args.perception_model)
    elif args.perception_backend == "transformers":
        if not args.perception_model:
            raise CLIError("--perception-backend transformers needs --perception-model")
        options["model"] = args.perception_model
    return PerceptionSource(file=args.perception, backend=args.perception_backend, keyframes=args.keyframes,
                            options=options)


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from embodied_r.cli.common import CLIError, check_generation_arguments, console, method_from_args
    from embodied_r.evaluation.runner import run_eval

    method_from_args(args)  # registered before any row is read
    from_recipe = apply_recipe(args)
    check_generation_arguments(args)
    from embodied_r.evaluation.analysis import BASELINES

    baselines = [] if args.baselines.strip() == "none" else [b.strip() for b in args.baselines.split(",") if b.strip()]
    unknown = sorted(set(baselines) - set(BASELINES))
    if unknown:
        raise CLIError(f"--baselines: unknown {unknown}; choose from {list(BASELINES)} or 'none'")
    if args.judge_probe_cases is not None and args.judge_probe_cases < 16:
        raise CLIError(f"--judge-probe-cases must be at least 16, got {args.judge_probe_cases}")
    if args.judge_probe_cases is not None and not args.judge:
        raise CLIError("--judge-probe-cases sets the probe of the consistency judge: give --judge too")
    settings = eval_settings(args, tuple(baselines), from_recipe)
    if from_recipe:
        console().print(f"from recipe {args.recipe}: " + ", ".join(f"{k} {v!r}" for k, v in from_recipe.items()),
                        markup=False)
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console(), transient=False) as bar:
        task = bar.add_task("evaluating", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        metrics = run_eval(args.data, args.model, args.out, settings, progress=progress)
    print_metrics(metrics)
    return 0


def eval_settings(args: argparse.Namespace, baselines: tuple[str, ...], from_recipe: dict[str, Any]) -> EvalSettings:
    """The ``EvalSettings`` the flags describe (after ``apply_recipe``); a value it refuses is a CLIError."""
    from embodied_r.cli.common import CLIError, context_policy
    from embodied_r.evaluation.settings import (
        BaselineSettings,
        EvalSettings,
        EvalSettingsError,
        GenerationSettings,
        JudgeSettings,
    )

    perception = perception_source(args)
    shard = parse_shard(args.shard)
    try:
        return EvalSettings(
            limit=args.limit, shard=shard, prompt_input=args.input,
            perception=perception, accuracy_rule=args.accuracy_rule, report=not args.no_report,
            generation=GenerationSettings(
                batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, dtype=args.dtype,
                engine=args.engine, prompt_version=args.prompt_version, completion_prefix=args.completion_prefix,
                context=context_policy(args),
                from_recipe={"recipe": str(args.recipe), **from_recipe} if args.recipe else None),
            baselines=BaselineSettings(names=baselines, prior_data=args.prior_from),
            judge=JudgeSettings(spec=args.judge, model=args.judge_model, sees_letters=args.judge_sees_letters,
                                scoring=args.judge_scoring, probe_cases=args.judge_probe_cases))
    except EvalSettingsError as exc:
        raise CLIError(str(exc)) from None


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"1/4"`` -> ``(1, 4)``; a malformed value is a CLIError."""
    from embodied_r.cli.common import CLIError

    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.strip().isdigit() and count.strip().isdigit()) or not 0 <= int(index) < int(count):
        raise CLIError(f"--shard {text!r}: expected I/N with 0 <= I < N, e.g. 0/2")
    return int(index), int(count)


def baseline_note(table: dict[str, Any]) -> str:
    """The note column of a baseline: why it did not run, or what it says beyond its score."""
    if table.get("name") == "text-rule" and table.get("status") == "ok":
        o = table["overall"]
        ceiling = "n/a" if o.get("ceiling") is None else f"{o['ceiling']:.1%}"
        return (f"applies to {o['n_applies']} of {o['n']}; answerable ceiling {ceiling} of the {o['n_with_rule']} "
                "question(s) of tasks with a rule")
    if table.get("name") == "solver" and table.get("status") == "ok":
        o = table["overall"]
        ceiling = "n/a" if o.get("ceiling") is None else f"{o['ceiling']:.1%}"
        return (f"applicable to {o['n_applicable']} of {o['n']}; ceiling {ceiling} of those ({o['n_copy']} stated "
                "outright in the text)")
    return str(table.get("reason") or "")


def _copy_word(flag: Any) -> str:
    return {True: "yes", False: "no", "mixed": "mixed"}.get(flag, "–")


def print_solver_table(metrics: dict[str, Any]) -> None:
    """The solver baseline per task, when it ran (``eval`` and ``score``)."""
    from embodied_r.cli.common import print_table

    solver = (metrics.get("baselines") or {}).get("solver") or {}
    if solver.get("status") != "ok":
        return
    rows = []
    for task, t in solver["tasks"].items():
        reasons = t.get("not_applicable") or {}
        top = next(iter(reasons), None)
        rows.append([task, t["n"], t["applicable"], t["n_applicable"], "–" if t["ceiling"] is None else t["ceiling"],
                     _copy_word(t["copy"]), ", ".join(f"{k} {v}" for k, v in t["detail"].items()),
                     f"{top} ({reasons[top]})" if top else ""])
    print_table("solver baseline per task: applicable share, ceiling (share right of applicable), copy",
                ["task", "n", "applicable", "n applicable", "ceiling", "copy", "detail", "most frequent reason n/a"],
                rows)


def print_metrics(metrics: dict[str, Any]) -> None:
    from embodied_r.cli.common import console, print_table, print_task_scores

    print_task_scores(metrics)
    overall = metrics["overall"]
    out = console()
    out.print(f"unparsed rate {overall['unparsed_rate']:.1%}; {metrics['resumed']} predictions resumed, "
              f"{metrics['generated_this_run']} generated this run; wall time {metrics['wall_time_s']} s")
    generation = metrics.get("generation") or {}
    if generation:
        source = (generation.get("from_recipe") or {}).get("recipe")
        out.print(f"greedy decoding, at most {generation['max_new_tokens']} new tokens, prompt version "
                  f"{generation.get('prompt_version')}, {generation.get('input', 'text')} input"
                  + (f" (settings from recipe {source})" if source else ""), markup=False)
    from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE

    accuracy_rule = metrics.get("accuracy_rule")
    if accuracy_rule not in (None, DEFAULT_ACCURACY_RULE):
        out.print(f"choices scored with accuracy rule {accuracy_rule} (the letter Embodied-R's released reward "
                  "reads from the whole completion), the model's answers and the direct and blind baselines alike",
                  markup=False)
    if metrics.get("duplicate_predictions_ignored"):
        out.print(f"{metrics['duplicate_predictions_ignored']} duplicate prediction(s) in predictions.jsonl were "
                  "ignored (each question counts once, with its first prediction)")
    context = metrics.get("context") or {}
    if context.get("affected"):
        skipped = context["actions"].get("skipped", 0)
        note = f"; the {skipped} skipped row(s) count as unanswered" if skipped else ""
        out.print(f"context policy {context['policy']['rule']}: {context['affected']} prompt(s) did not fit the model "
                  f"({context['actions']}){note} (see context in metrics.json):", markup=False)
        for row in context.get("rows", [])[:10]:
            out.print(f"  {row['id']}: {row['action']}, {row['prompt_tokens']} tokens, limit {row['limit']}"
                      + (f", kept {row['kept_tokens']}" if row["kept_tokens"] else ""), markup=False)
    if overall.get("empty_completions"):
        out.print(f"{overall['empty_completions']} completion(s) were empty (counted as unparsed, scored 0)")
    if metrics.get("n_skipped"):
        out.print(f"{metrics['n_skipped']} question(s) skipped as unusable (see skipped in metrics.json):")
        for item in metrics["skipped"][:10]:
            out.print(f"  {item['id']}: {item['reason']}", markup=False)
    baselines = [[name, b.get("status"), (b.get("overall") or {}).get("micro"), baseline_note(b)]
                 for name, b in metrics.get("baselines", {}).items()]
    if baselines:
        print_table("baselines", ["baseline", "status", "micro", "note"], baselines)
    rule = (metrics.get("baselines") or {}).get("text-rule") or {}
    if rule.get("status") == "ok":
        print_table("text-rule baseline per task (ceiling: share the rule answers exactly)",
                    ["task", "rule", "n", "applies", "score", "ceiling"],
                    [[task, t["rule"], t["n"], t["n_applies"], t["score"], "none" if t["ceiling"] is None
                      else t["ceiling"]] for task, t in rule["tasks"].items()])
    print_solver_table(metrics)
    from embodied_r.evaluation.reference_names import reference_note, reference_rows

    reference = reference_rows(metrics)
    if reference:
        print_table("under the reference harness's names (lmms-eval), %",
                    ["benchmark", "metric", "score %"],
                    [[b, k, "–" if v is None else f"{v:.1f}"] for b, k, v in reference])
        note = reference_note(metrics)
        if note:
            out.print(note, markup=False)
    bias = (metrics.get("position_bias") or {}).get("overall")
    if bias and bias.get("max_excess") is not None:
        out.print(f"position bias: most predicted letter {bias['most_predicted']}, largest excess over the gold share "
                  f"{bias['max_excess']:+.1%} (predicted {bias['predicted']} vs gold {bias['true']})", markup=False)
    consistency = metrics.get("consistency") or {}
    if consistency.get("status") == "ok":
        o = consistency["overall"]
        rate = "n/a" if o["rate"] is None else f"{o['rate']:.1%}"
        out.print(f"logical consistency ({consistency['judge']}): {rate} of {o['judged']} judged answers", markup=False)
        probe = consistency.get("probe") or {}
        out.print(f"  judge probe: {probe.get('message', 'not run')}", markup=False)
        for flag in consistency.get("flags", []):
            out.print(f"  warning: {flag}", markup=False)
    elif consistency.get("status") == "failed":
        out.print(f"logical consistency not measured: {consistency['reason']}", markup=False)
