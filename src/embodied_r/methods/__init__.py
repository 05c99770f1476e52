"""The methods as task objects: each one owns how its prompt rows are built, prompted, rewarded and scored.

Training and evaluation take a :class:`Method` and never import one method's modules: what they need
(the row builder, the scorer, the method's own rewards, ...) is named here as a ``"module:attr"`` path and
imported when asked for, so importing this package stays cheap and following one method's rows never
imports another method. A prompt row records the prompt version it was built with
(``meta["prompt_version"]``); the method is looked up from that, so nothing reads prompt text to guess it.
Rows without a recorded version (a user's own prompt file, toy rows) follow the default method; a version no
method writes is an error.

- Embodied-R (Zhao et al., 2025): the reasoner reads frame descriptions and answers with the option's
  bare letter inside ``<answer>``; trained with format, accuracy and consistency in three stages.
- Robot-R1 (Kim et al., 2025): the reasoner reads a robot scene (as text, or the camera image) and
  answers with the option written ``[[X]]``; trained with format and accuracy at constant weights.

Adding a method is a package under ``methods/`` plus one ``Method(...)`` line in ``METHODS`` below; a method
in a user's own package is named by its ``"module:attr"`` path (``--method my_pkg.method:METHOD`` on the
command line, ``method:`` in a recipe), which :func:`load_method` imports, checks and registers
(:func:`register_method`).

>>> method_for_version("robot_r1_mw_v1").answer_text("B")
'[[B]]'
>>> method_for_version("official-v1").answer_text("B")
'B'
>>> ROBOT_R1.rewards, ROBOT_R1.builds_rows, ROBOT_R1.reward_schedule
(('format', 'accuracy'), 'embodied-r synth robot', None)
>>> load_method("robot_r1") is ROBOT_R1, load_method("embodied_r.methods:EMBODIED_R") is EMBODIED_R
(True, True)
>>> load_method("embodied_r.methods:METHODS")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
embodied_r.methods.MethodSpecError: embodied_r.methods:METHODS: is a tuple, not an embodied_r.methods.Method ...
>>> EMBODIED_R.reward_schedule, sorted(EMBODIED_R.own_rewards)
('paper', ['consistency'])
>>> ROBOT_R1.solve(PromptRow("q", "t", [], "A", "choice", ["A. x", "B. y"]))
Solved(answer=None, reason='method robot_r1 has no solver', copy=False)
>>> ROBOT_R1.text_rule(PromptRow("q", "t", [], "A", "choice", ["A. x", "B. y"]))
('none', None, 'method robot_r1 has no text rule')
>>> EMBODIED_R.default_version(), ROBOT_R1.default_version(), ROBOT_R1.has_perception_stage()
('official-v1', 'robot_r1_mw_v1', False)
>>> ROBOT_R1.make_perception_backend("openai")
Traceback (most recent call last):
...
ValueError: method robot_r1 has no perception stage (no perception backend)
>>> method_for_version(None) is DEFAULT_METHOD  # no recorded version: the default method
True
>>> method_for_version("v9")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
embodied_r.core.records.RecordError: prompt version 'v9' is written by no known method (embodied_r: official, ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_r.core.records import PromptRow, RecordError
from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, Scored
from embodied_r.core.solving import Solved

# The one scorer of core.scoring, which reads both built-in methods' answer forms (core.parsing).
CORE_SCORER = "embodied_r.core.scoring:score_completion"
# The rule name of a row without a text rule (its task has none, or its method has no text rules).
NO_TEXT_RULE = "none"


class PathImportError(ValueError):
    """A ``"module:attr"`` path that names nothing; the message says what failed (no such module, the
    module failed to import, no such attribute)."""


def import_object(path: str) -> Any:
    """The object a user's ``"module:attr"`` path names, imported now; a :class:`PathImportError` saying what
    failed otherwise (a module not found is told apart from a module that fails to import).

    >>> import_object("embodied_r.core.scoring:score_answer").__name__
    'score_answer'
    >>> import_object("no_such_pkg_xyz.mod:FN")
    Traceback (most recent call last):
    ...
    embodied_r.methods.PathImportError: module 'no_such_pkg_xyz.mod' not found (No module named 'no_such_pkg_xyz'; \
is the folder that holds it on PYTHONPATH?)
    >>> import_object("embodied_r.core.scoring:nope")
    Traceback (most recent call last):
    ...
    embodied_r.methods.PathImportError: module 'embodied_r.core.scoring' has no attribute 'nope'
    """
    module_name, _, attr = str(path).partition(":")
    if not module_name or not attr:
        raise PathImportError(f"{path!r} is not a 'module:attr' path (e.g. my_pkg.method:METHOD)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # The module itself (or a package above it) is missing, or something it imports is.
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise PathImportError(f"module {module_name!r} not found ({exc}; is the folder that holds it on "
                                  "PYTHONPATH?)") from None
        raise PathImportError(f"importing module {module_name!r} failed: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any error in the user's module is reported as its import failing
        raise PathImportError(f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PathImportError(f"module {module_name!r} has no attribute {attr!r}") from None


def import_path(path: str) -> Any:
    """The object a ``"module:attr"`` path names, imported now.

    >>> import_path("embodied_r.core.scoring:score_answer").__name__
    'score_answer'
    >>> import_path("embodied_r.core.scoring")
    Traceback (most recent call last):
    ...
    ValueError: 'embodied_r.core.scoring' is not a 'module:attr' path (e.g. my_pkg.rewards:my_reward)
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not a 'module:attr' path (e.g. my_pkg.rewards:my_reward)")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{path!r}: module {module_name} has no attribute {attr!r}") from None


@dataclass(frozen=True)
class Method:
    """One method: where its rows come from, the prompt versions they record, the written form of a
    chosen option, its rewards and their paper schedule, its scorer, and its recipe.

    Fields that name code are ``"module:attr"`` paths (:func:`import_path`), imported only when used."""

    name: str
    # The command that writes this method's prompt rows; error messages name it. ``embodied-r build-prompts``
    # (:data:`BUILD_PROMPTS`) means that command calls ``row_builder`` (with ``--method``).
    builds_rows: str
    # Builds this method's prompt rows. For a method built by ``build-prompts`` it is
    # ``fn(questions, perceptions, prompt_version) -> (rows, ids without a row)``: the questions
    # (QARecords), the perception records by question id (empty without ``--perception``) and one of
    # ``prompt_versions``; Robot-R1's (built by ``synth robot``) turns one question into a row.
    row_builder: str
    prompt_versions: tuple[str, ...]  # the prompt templates its builders write (recorded per row)
    choice_form: str  # ``{letter}`` is replaced by the option letter
    # The paper's reward terms, by their names in the reward table (methods.rewards): the ``rewards`` of a
    # recipe that names this method (``method:``) and no rewards.
    rewards: tuple[str, ...]
    # The recipe that follows the paper, relative to the repository root (``embodied-r train --help`` lists
    # the shipped methods'); None: none.
    paper_recipe: str | None = None
    # The paper's reward weights, as a recipe's ``reward_schedule`` writes them: None (constant weights), a
    # schedule name of training.schedule ("paper": Embodied-R's three stages), or a list of stages. The
    # ``reward_schedule`` of a recipe that names this method (``method:``) and no schedule.
    reward_schedule: Any = None
    # This method's own rewards by recipe name (each a reward function or a methods.rewards.RewardFactory);
    # together with the generic ones (format, accuracy) they are the names a recipe can use.
    own_rewards: Mapping[str, str] = field(default_factory=dict)
    # ``fn(completion, answer, answer_type, options, rule=...) -> Scored``: what "correct" means for this
    # method's rows, in the accuracy reward and in evaluation alike.
    scorer: str = CORE_SCORER
    toy_rows: str | None = None  # ``fn(n, seed) -> list[PromptRow]``: smoke-test rows (a recipe's ``toy:N``)
    # ``fn(row, style) -> str``: the quote of its prompt a format warm-up think opens with, for the think
    # styles that quote the prompt (training/warmup.py); None: its prompts have nothing to quote.
    think_quote: str | None = None
    # ``fn(row) -> core.solving.Solved``: an exact solver that reads only the row's prompt text and answers where
    # the text determines the answer (and says why not elsewhere, never guessing): the ``solver`` baseline of
    # evaluation. None: the method has none, and its rows count as not applicable.
    solver: str | None = None
    # ``{task: (rule name, fn(row) -> (answer, reason))}``: a simple deterministic rule per task over the row's
    # prompt text, the ``text-rule`` baseline of evaluation (what the text gives away without reasoning); a rule
    # returns reason None where it applies, and no answer and why not where it does not. None: the method has
    # none, and its rows count as not applicable.
    text_rules: str | None = None
    # ``fn(row) -> (prompt, removed)``: the row's prompt without its video's text, and how many frames that
    # removed (0: the prompt holds none, and is asked as it is): the ``blind`` baseline of evaluation. Rows with
    # images never reach it. None: the method has none, and the blind baseline is not run on its rows.
    blind_prompt: str | None = None
    # ``fn(row) -> prompt``: the row's question asked to be answered at once, without thinking: the ``direct``
    # baseline of evaluation. None: the method has none, and the direct baseline is not run on its rows.
    direct_prompt: str | None = None
    # Its completions are written as Embodied-R's official evaluation script reads them (the option's bare
    # letter in ``<answer>``), so evaluation reports that script's parser beside its own (``reference.embodied_r``
    # of metrics.json, evaluation/reference_names.py); other forms (Robot-R1's ``[[X]]``) it cannot read.
    embodied_r_script_format: bool = False
    # The prompt version of the rows its row builder makes from questions and perception when none is asked
    # for (``eval --data SPEC`` on a benchmark of video questions); None: the first of ``prompt_versions``.
    default_prompt_version: str | None = None
    # ``fn(prompt_version) -> str``: the system message of its prompts of that version, which evaluation adds to
    # a file of ready user prompts (Embodied-R's official processed JSON). None: it reads no such file.
    system_prompt: str | None = None
    # Its perception stage, which evaluation runs to describe a benchmark's videos for the row builder
    # (``eval --perception-backend``) and whose VLM answers the ``vlm_only`` baseline; each None for a method
    # without one. ``perception_backend``: ``fn(name, **options) -> backend``, a perception backend by name (the
    # backend's ``run(requests, on_result)`` answers ``inference.requests.FrameRequest``s).
    perception_backend: str | None = None
    # ``fn(questions, qa_dir, keyframes_dir, backend, out_path, cache_dir) -> summary``: one Perception record per
    # question appended to ``out_path`` (resumable, finished requests kept under ``cache_dir``); the summary has
    # ``done``, ``already_done``, ``failed`` and ``errors``.
    perception_stage: str | None = None
    # ``fn(keyframes_dir, video, max_side) -> (timestamps, images)``: the key frames its key-frame stage chose for
    # ``video`` (found under ``keyframes_dir``), decoded as the perception stage sends them to the VLM.
    keyframe_images: str | None = None

    def __post_init__(self) -> None:
        # Checked here, where the Method is written, rather than when a benchmark is read much later.
        if self.default_prompt_version is not None and self.default_prompt_version not in self.prompt_versions:
            raise ValueError(f"method {self.name}: default_prompt_version {self.default_prompt_version!r} is not "
                             f"one of its prompt_versions {list(self.prompt_versions)}")

    def answer_text(self, letter: str) -> str:
        """How this method's prompts ask a chosen option to be written inside ``<answer>``."""
        return self.choice_form.format(letter=letter)

    def row_builder_function(self) -> Callable[..., Any]:
        """The function ``row_builder`` names (``build-prompts`` calls it for a method it builds)."""
        return import_path(self.row_builder)

    def score_answer(self, completion: str, answer: Any, answer_type: str, options: list[str] | None,
                     rule: str = DEFAULT_ACCURACY_RULE) -> Scored:
        """The parsed answer and score of one completion, by this method's scorer; ``rule`` is the accuracy
        rule for choices (``core.scoring.ACCURACY_RULES``)."""
        return import_path(self.scorer)(completion, answer, answer_type, options, rule=rule)

    def score(self, row: PromptRow, completion: str, rule: str = DEFAULT_ACCURACY_RULE) -> Scored:
        """The parsed answer and score of a completion for ``row``, as evaluation reports it and the
        accuracy reward pays it."""
        return self.score_answer(completion, row.answer, row.answer_type, row.options, rule=rule)

    def solve(self, row: PromptRow) -> Solved:
        """What this method's exact solver makes of ``row``'s text (``solver``); a method without one answers
        not applicable, saying so. A solver that raises is a bug and its exception is not caught here."""
        if self.solver is None:
            return Solved(reason=f"method {self.name} has no solver")
        solved = import_path(self.solver)(row)
        if not isinstance(solved, Solved):
            raise TypeError(f"solver {self.solver} returned {type(solved).__name__} for row {row.id}; "
                            "it must return embodied_r.core.solving.Solved")
        return solved

    def text_rule_names(self) -> dict[str, str]:
        """Task -> the name of this method's text rule for it (``text_rules``; empty without them)."""
        if self.text_rules is None:
            return {}
        return {task: name for task, (name, _) in import_path(self.text_rules).items()}

    def text_rule(self, row: PromptRow) -> tuple[str, Any, str | None]:
        """(rule name, answer, reason): what this method's text rule for ``row``'s task makes of its text,
        reason None where it applies. A task without a rule, or a method without text rules, gives rule
        :data:`NO_TEXT_RULE`, no answer and the reason."""
        if self.text_rules is None:
            return NO_TEXT_RULE, None, f"method {self.name} has no text rule"
        name, rule = import_path(self.text_rules).get(row.task, (NO_TEXT_RULE, None))
        if rule is None:
            return NO_TEXT_RULE, None, f"no rule for task {row.task}"
        answer, reason = rule(row)
        return name, answer, reason

    def blind_messages(self, row: PromptRow) -> tuple[list[dict[str, Any]], int]:
        """``row``'s prompt without its video's text and the number of frames removed (``blind_prompt``)."""
        if self.blind_prompt is None:
            raise ValueError(f"method {self.name} has no blind prompt (row {row.id})")
        return import_path(self.blind_prompt)(row)

    def direct_messages(self, row: PromptRow) -> list[dict[str, Any]]:
        """``row``'s question asked for the answer alone, without thinking (``direct_prompt``)."""
        if self.direct_prompt is None:
            raise ValueError(f"method {self.name} has no direct-answer prompt (row {row.id})")
        return import_path(self.direct_prompt)(row)

    def default_version(self) -> str:
        """The prompt version of its rows when none is asked for (``default_prompt_version``, else the first)."""
        return self.default_prompt_version or self.prompt_versions[0]

    def system_message(self, prompt_version: str) -> str:
        """The system message of its prompts of ``prompt_version`` (``system_prompt``)."""
        if self.system_prompt is None:
            raise ValueError(f"method {self.name} has no system prompt to add to ready prompts")
        return str(import_path(self.system_prompt)(prompt_version))

    def has_perception_stage(self) -> bool:
        """Whether evaluation can run its perception stage: it names both a backend factory and a stage."""
        return self.perception_backend is not None and self.perception_stage is not None

    def make_perception_backend(self, name: str, **options: Any) -> Any:
        """Its perception backend ``name``, built with ``options`` (``perception_backend``)."""
        if self.perception_backend is None:
            raise ValueError(f"method {self.name} has no perception stage (no perception backend)")
        return import_path(self.perception_backend)(name, **options)

    def run_perception_stage(self, questions: Sequence[Any], qa_dir: Path, keyframes_dir: Path, backend: Any,
                             out_path: Path, cache_dir: Path) -> Any:
        """Its perception stage over ``questions``' key frames into ``out_path`` (``perception_stage``)."""
        if self.perception_stage is None:
            raise ValueError(f"method {self.name} has no perception stage")
        return import_path(self.perception_stage)(questions, qa_dir, keyframes_dir, backend, out_path, cache_dir)

    def read_keyframe_images(self, keyframes_dir: Path, video: Path,
                             max_side: int | None) -> tuple[list[float], list[Any]]:
        """(timestamps, images) of ``video``'s key frames as its perception stage sends them (``keyframe_images``)."""
        if self.keyframe_images is None:
            raise ValueError(f"method {self.name} has no key-frame images")
        return import_path(self.keyframe_images)(keyframes_dir, video, max_side)


# The command that calls a method's ``row_builder`` (``Method.builds_rows``).
BUILD_PROMPTS = "embodied-r build-prompts"

EMBODIED_R = Method(
    name="embodied_r",
    builds_rows=BUILD_PROMPTS,
    row_builder="embodied_r.methods.embodied_r.perception.prompt_rows:build_rows",
    prompt_versions=("official", "official-v1", "structured-v1", "compact-v1"),
    choice_form="{letter}",
    rewards=("format", "accuracy", "consistency"),
    paper_recipe="recipes/embodied_r/paper_qwen2.5-3b.yaml",
    reward_schedule="paper",
    own_rewards={"consistency": "embodied_r.methods.embodied_r.consistency:CONSISTENCY_REWARD"},
    toy_rows="embodied_r.methods.embodied_r.toy:toy_prompt_rows",
    think_quote="embodied_r.methods.embodied_r.evidence:think_quote",
    solver="embodied_r.methods.embodied_r.solver:solve_row",
    text_rules="embodied_r.methods.embodied_r.text_rules:TEXT_RULES",
    blind_prompt="embodied_r.methods.embodied_r.baseline_prompts:blind_prompt",
    direct_prompt="embodied_r.methods.embodied_r.baseline_prompts:direct_answer_prompt",
    embodied_r_script_format=True,
    default_prompt_version="official-v1",
    system_prompt="embodied_r.methods.embodied_r.prompts:system_prompt",
    perception_backend="embodied_r.methods.embodied_r.perception.factory:make_backend",
    perception_stage="embodied_r.methods.embodied_r.perception.stage:perceive_questions",
    keyframe_images="embodied_r.methods.embodied_r.perception.stage:keyframe_images",
)
ROBOT_R1 = Method(
    name="robot_r1",
    builds_rows="embodied-r synth robot",
    row_builder="embodied_r.methods.robot_r1.prompts:text_prompt_row",
    prompt_versions=("robot_r1_mw_v1",),
    choice_form="[[{letter}]]",
    rewards=("format", "accuracy"),
    paper_recipe="recipes/robot_r1/paper_qwen2.5-vl-7b.yaml",
    own_rewards={"open_l1": "embodied_r.methods.robot_r1.rewards:open_l1"},
    # No perception stage, key-frame images or ready-prompt files: its rows come from the demonstrations it
    # records (``synth robot``), so evaluation's loader specs and ``vlm_only`` say it has none.
    perception_backend=None,
    perception_stage=None,
    keyframe_images=None,
    system_prompt=None,
)
# The registry: one line per method shipped with the package.
METHODS: tuple[Method, ...] = (EMBODIED_R, ROBOT_R1)
# Rows without a recorded prompt version (a user's own prompt file, the toy set) follow this method's
# conventions, the default of every command.
DEFAULT_METHOD = EMBODIED_R
_REGISTERED: list[Method] = []  # methods added from outside the package (register_method)


def all_methods() -> tuple[Method, ...]:
    """The shipped methods, then those registered with :func:`register_method`."""
    return (*METHODS, *_REGISTERED)


def register_method(method: Method) -> None:
    """Add a method defined outside this package; its name and prompt versions must be new. Registering a
    method that is already known (the same object, or an equal one) does nothing, so that each command of one
    process may register the method it is given."""
    if not isinstance(method, Method):
        raise TypeError(f"register_method takes an embodied_r.methods.Method, got {type(method).__name__}")
    if any(m == method for m in all_methods()):
        return
    taken = {v: m.name for m in all_methods() for v in m.prompt_versions}
    if any(m.name == method.name for m in all_methods()):
        raise ValueError(f"a different method named {method.name!r} is already registered")
    claimed = sorted(v for v in method.prompt_versions if v in taken)
    if claimed:
        raise ValueError(f"method {method.name!r}: prompt version(s) {claimed} already belong to "
                         f"{sorted({taken[v] for v in claimed})}")
    _REGISTERED.append(method)


class MethodSpecError(ValueError):
    """A ``--method`` / recipe ``method:`` value that names no method; the message begins with the value."""


def load_method(spec: str) -> Method:
    """The method ``spec`` names, registered: a known method's name (``robot_r1``), or a ``"module:attr"`` path
    to a :class:`Method` in the user's own package (``my_pkg.method:METHOD``), imported now and registered with
    :func:`register_method` (again: nothing happens). A :class:`MethodSpecError` that begins with ``spec`` and
    says what failed otherwise: the module is not found or fails to import, it has no such attribute, the
    object is not a Method, or another method has its name or one of its prompt versions."""
    if not isinstance(spec, str) or not spec.strip():
        raise MethodSpecError(f"{spec!r}: a method is a known method's name or a 'module:attr' path to a "
                              "Method (e.g. my_pkg.method:METHOD)")
    if ":" not in spec:
        for method in all_methods():
            if method.name == spec:
                return method
        raise MethodSpecError(f"{spec}: no method has this name (known: {', '.join(m.name for m in all_methods())}); "
                              "name your own Method by its 'module:attr' path, e.g. my_pkg.method:METHOD")
    try:
        method = import_object(spec)
    except PathImportError as exc:
        raise MethodSpecError(f"{spec}: {exc}") from None
    if not isinstance(method, Method):
        raise MethodSpecError(f"{spec}: is a {type(method).__name__}, not an embodied_r.methods.Method "
                              "(define it as METHOD = Method(name=..., builds_rows=..., ...))")
    try:
        register_method(method)
    except ValueError as exc:
        raise MethodSpecError(f"{spec}: {exc}") from None
    return method


def unregister_method(name: str) -> None:
    """Remove a method added with :func:`register_method` (shipped methods stay)."""
    _REGISTERED[:] = [m for m in _REGISTERED if m.name != name]


def prompt_versions() -> list[str]:
    """Every prompt version some method's builders write, sorted (command-line choices, recipe checks)."""
    return sorted(v for m in all_methods() for v in m.prompt_versions)


def method_for_version(version: str | None) -> Method:
    """The method whose prompt builders write ``version``; rows without a recorded version (None) follow
    :data:`DEFAULT_METHOD`. A version that no method writes is a RecordError naming the known ones: following
    the default method's conventions there would score another method's rows by the wrong rules, silently."""
    if version is None:
        return DEFAULT_METHOD
    for method in all_methods():
        if version in method.prompt_versions:
            return method
    known = "; ".join(f"{m.name}: {', '.join(m.prompt_versions)}" for m in all_methods())
    raise RecordError(f"prompt version {version!r} is written by no known method ({known}); rebuild the rows "
                      "with one of these, remove meta.prompt_version to follow the default method "
                      f"({DEFAULT_METHOD.name}), or register the method that writes it "
                      "(embodied_r.methods.register_method)")


def method_for_row(meta: Mapping[str, Any] | None) -> Method:
    """The method of a prompt row, from its ``meta["prompt_version"]`` (:func:`method_for_version`)."""
    return method_for_version((meta or {}).get("prompt_version"))


__all__ = ["BUILD_PROMPTS", "DEFAULT_METHOD", "EMBODIED_R", "METHODS", "NO_TEXT_RULE", "Method", "MethodSpecError",
           "PathImportError", "ROBOT_R1", "all_methods", "import_object", "import_path", "load_method",
           "method_for_row", "method_for_version", "prompt_versions", "register_method", "unregister_method"]
