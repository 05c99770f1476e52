"""Logical-consistency reward: does the policy's reasoning, on its own, lead to the policy's answer?

Embodied-R (arXiv 2504.12680, the logical-consistency reward) hands a frozen reference model only the
question with its choices and the policy's ``<think>`` text, asks it for an option letter, and pays 1
when that letter is the policy's answer. As in the official code the reward is gated: it is 0 unless
the policy's answer is correct, so it only ever adds to a correct answer its reasoning supports.

Where this differs from the official implementation, on purpose:
- the judge (``embodied_r.judge``, configured by the recipe section ``judge``) is called once per
  training step for every completion that passes the gate, reads letters from logits or a constrained
  endpoint, is letter-blind by default (option letters in the think are masked; ``judge.sees_letters:
  true`` is the official rule)
  and never truncates the question or the instruction;
- a judge must pass a probe before training starts (``embodied_r.judge.probe``);
- a judge may answer "none" (``NO_OPTION``: the reasoning supports no option); that earns 0, like
  reasoning that leads to another option;
- a failing judge is logged and counted and the term is dropped (``None``: TRL leaves it out) instead
  of a 0 that would look like inconsistent reasoning; so is a row the judge could not read;
- ``judge.rule: shuffled-options`` replaces the judge's view by the reader re-reading the think
  with the options shuffled and relabelled (``judge.shuffled_options``, the self-judging form
  published as ACRE): paid when it picks the same option by content;
- the term is dropped for whole GRPO groups only: completions of one prompt are never ranked against
  each other on a term measured for some of them and not others. With several processes the decision
  is taken after a gather, so every rank drops the same groups and raises a judge error together.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r.core.chat import completion_text
from embodied_r.core.columns import column
from embodied_r.core.parsing import extract_think
from embodied_r.core.scoring import score_completion
from embodied_r.judge.judges import NO_OPTION, Judge, JudgeError, build_judge
from embodied_r.judge.rate import judge_completions
from embodied_r.judge.settings import check_consistency_rule
from embodied_r.methods.ranks import gather_flags, groups_to_drop, process_group
from embodied_r.methods.rewards import RewardFactory

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------
# The reward
# ---------------------------------------------------------------------------------------------------


class ConsistencyReward:
    """TRL reward function ``consistency`` (a callable object holding the judge).

    Returns 1.0 when the judge reaches the policy's (correct) answer from the reasoning, 0.0 when it
    reaches another letter or none (``NO_OPTION``), or when the answer is wrong or the think block is
    missing (the official gate), and None for rows it does not apply to (non-choice questions), for
    groups the judge could not read in full, for a step whose judge failed on any process, and for
    steps where the schedule gives it weight 0 (``skip_when_unweighted``: no reference compute is spent).

    ``num_generations`` (set by the trainer: GRPO's group size) defines the groups; 1 treats every
    completion as its own group.
    """

    def __init__(self, judge: Judge, gate: bool = True, skip_when_unweighted: bool = True,
                 max_consecutive_failures: int = 3, num_generations: int = 1) -> None:
        self.__name__ = "consistency"  # TRL names reward columns and metrics after this
        self.judge = judge
        self.gate = gate
        self.skip_when_unweighted = skip_when_unweighted
        self.max_consecutive_failures = int(max_consecutive_failures)
        self.num_generations = int(num_generations)
        self.weight: float | None = None  # set by the stage schedule callback
        self.failures = 0
        self.consecutive_failures = 0
        self.rows_not_judged = 0  # rows whose group was dropped because the judge could not read one

    def set_weight(self, weight: float) -> None:
        self.weight = float(weight)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], log_metric: Any = None, **columns: Any
    ) -> list[float | None]:
        n = len(completions)
        metric = log_metric or (lambda name, value: None)
        # The weight comes from the schedule, a pure function of the step: the same on every rank.
        if self.skip_when_unweighted and self.weight == 0.0:
            metric("consistency/active", 0.0)
            return [None] * n
        metric("consistency/active", 1.0)
        answers = column(columns, "answer", n, required=True)
        answer_types = [t or "choice" for t in column(columns, "answer_type", n)]
        options = column(columns, "options", n)

        rewards: list[float | None] = [None] * n
        to_judge: list[int] = []
        parsed_answers: dict[int, Any] = {}
        no_think = 0
        for i, completion in enumerate(completions):
            if answer_types[i] != "choice":
                continue  # the reference answers with letters only; numbers are out of scope (None)
            text = completion_text(completion)
            parsed, score = score_completion(text, answers[i], "choice", options[i])
            correct = score >= 1.0
            has_think = bool((extract_think(text) or "").strip())
            if parsed is None or (self.gate and not correct) or not has_think:
                # The official gate: no reasoning (or an empty one) supports no answer.
                no_think += int(parsed is not None and (correct or not self.gate) and not has_think)
                rewards[i] = 0.0
                continue
            parsed_answers[i] = parsed
            to_judge.append(i)

        # Judge locally; every process reaches the gathers below, whatever happened here.
        error: Exception | None = None
        letters: list[str | None] = []
        if to_judge:
            try:
                letters = judge_completions(
                    self.judge,
                    [prompts[i] for i in to_judge],
                    [completions[i] for i in to_judge],
                    [options[i] for i in to_judge],
                )
            except JudgeError as exc:
                error = exc
        failed_anywhere = [flag for flags in gather_flags([error is not None]) for flag in flags]
        if any(failed_anywhere):
            return self._failed(error, failed_anywhere, n, metric)
        self.consecutive_failures = 0

        unreadable = [False] * n
        no_option = 0
        for i, letter in zip(to_judge, letters, strict=True):
            if letter is None:
                unreadable[i] = True  # the judge could not read it (too long for its context)
            elif letter == NO_OPTION:
                rewards[i] = 0.0  # a judgement: the reasoning supports no option, so not this answer
                no_option += 1
            else:
                rewards[i] = 1.0 if letter == parsed_answers[i] else 0.0
        rank, _ = process_group()
        all_unreadable = gather_flags(unreadable)
        offset = sum(len(flags) for flags in all_unreadable[:rank])
        drop = groups_to_drop(all_unreadable, self.num_generations)
        dropped_here = 0
        for i in range(n):
            if (offset + i) // max(1, self.num_generations) in drop and answer_types[i] == "choice":
                rewards[i] = None
                dropped_here += 1
        if dropped_here:
            self.rows_not_judged += dropped_here
            logger.warning(
                "consistency reward: the judge could not read %d completion(s); the term is dropped for "
                "their whole group(s) (%d row(s) on this process, %d so far)",
                sum(unreadable),
                dropped_here,
                self.rows_not_judged,
            )
        measured = [rewards[i] for i in to_judge if rewards[i] is not None]
        metric("consistency/judged", float(len(measured)))
        metric("consistency/correct_without_reasoning", float(no_think))
        metric("consistency/not_judged_rows", float(dropped_here))
        metric("consistency/no_option", float(no_option))
        if measured:
            metric("consistency/agreement", sum(measured) / len(measured))
        return rewards

    def _failed(
        self, error: Exception | None, failed_ranks: list[bool], n: int, metric: Any
    ) -> list[float | None]:
        # Every process takes this branch in the same step, so the counts, and the raise, agree.
        self.failures += 1
        self.consecutive_failures += 1
        metric("consistency/judge_failures", float(self.failures))
        where = [rank for rank, failed in enumerate(failed_ranks) if failed]
        reason = str(error) if error is not None else f"the judge failed on process(es) {where}"
        logger.error(
            "consistency reward: judge failed (%d in a row, %d in total); the consistency term is "
            "dropped for this step on every process: %s",
            self.consecutive_failures,
            self.failures,
            reason,
        )
        if self.consecutive_failures >= self.max_consecutive_failures:
            raise JudgeError(
                f"the consistency judge failed {self.consecutive_failures} steps in a row ({reason}); fix the "
                "reference model/endpoint and resume from the last checkpoint"
            ) from error
        # Drop the term for every row of the step, so no completion in a group is ranked against
        # another on a reward that was never measured.
        return [None] * n


# ---------------------------------------------------------------------------------------------------
# The reward's entry in the reward table (Method.own_rewards), built when a run starts
# ---------------------------------------------------------------------------------------------------


def build_consistency_reward(judge: Any = None, reference_model: Any = "policy", policy_model: str | None = None,
                             dtype: str = "auto", sees_letters: bool = False, scoring: str | None = None,
                             attn_implementation: str | None = None, consistency_rule: str = "judge",
                             **options: Any) -> ConsistencyReward:
    """Build the consistency reward; ``judge`` (any object with ``.judge(...)``) wins over a model spec.
    ``consistency_rule: shuffled-options`` has that judge (the reader) re-read each think with the options
    shuffled and relabelled (``judge.shuffled_options``). ``options`` go to :class:`ConsistencyReward`."""
    check_consistency_rule(consistency_rule, "consistency reward", "consistency_rule")  # before any model loads
    if judge is None:
        if policy_model is None and reference_model in (None, "policy"):
            raise ValueError(
                "the consistency reward needs policy_model (the starting policy) or a reference_model"
            )
        judge = build_judge(
            reference_model, policy_model or "", dtype=dtype, sees_letters=sees_letters, scoring=scoring,
            attn_implementation=attn_implementation,
        )
    if consistency_rule == "shuffled-options":
        from embodied_r.judge.shuffled_options import ShuffledOptionsJudge

        judge = ShuffledOptionsJudge(judge)
    return ConsistencyReward(judge, **options)


def _check_options(options: Mapping[str, Any], source: str) -> None:
    """Recipe validation: the rule (the recipe's ``judge.rule``) exists; the judge itself is loaded and probed
    when the run starts."""
    check_consistency_rule(options.get("consistency_rule", "judge"), source)


# Which run settings the reward reads: the model GRPO starts from (the default reference), a caller's judge
# object, and the recipe section ``judge`` that chooses and configures the reference judge.
CONSISTENCY_REWARD = RewardFactory(
    build_consistency_reward,
    settings={"policy_model": "policy_model", "judge": "judge", "reference_model": "judge.model",
              "dtype": "dtype", "sees_letters": "judge.sees_letters", "scoring": "judge.scoring",
              "attn_implementation": "attn_implementation", "consistency_rule": "judge.rule"},
    check=_check_options,
)


__all__ = ["CONSISTENCY_REWARD", "ConsistencyReward", "build_consistency_reward"]
