"""Two judges with no parameters, for calibrating the judge probe: a probe either of them passes is
too easy to mean anything.

- ``mentioned-last`` answers the option whose text occurs last in the reasoning (``none`` when no
  option's text occurs): pure string matching, with no idea of what the reasoning argues;
- ``always-a`` answers the first option whatever it reads.

Both are selectable by name wherever a judge is (``embodied-r judge-probe --judge mentioned-last``,
``judge: {model: always-a}``).

>>> MentionedLastJudge().judge(["q"], ['not "left" but "right"'], [["A. left", "B. right"]])
['B']
>>> AlwaysFirstJudge().judge(["q"], ["anything"], [["A. left", "B. right"]])
['A']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from embodied_r.core.parsing import NO_OPTION, option_letters, option_texts


class MentionedLastJudge:
    """The option whose text ends last in the reasoning, read case-blind on word boundaries; on a tie
    (one option's text inside another's, "left" in "back-left") the longer text wins."""

    name = "mentioned-last"
    sees_letters = False
    scoring = "string-match"

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        return [self.pick(think, opts) for think, opts in zip(thinks, options, strict=True)]

    @staticmethod
    def pick(think: str, options: list[str] | None) -> str | None:
        if not options:
            return None
        best: tuple[int, int, str] | None = None  # (end of the last mention, text length, letter)
        for letter, text in option_texts(options).items():
            if not text:
                continue
            ends = [m.end() for m in re.finditer(rf"(?<!\w){re.escape(text)}(?!\w)", think, re.IGNORECASE)]
            if ends and (best is None or (ends[-1], len(text)) > best[:2]):
                best = (ends[-1], len(text), letter)
        return best[2] if best else NO_OPTION


class AlwaysFirstJudge:
    """The first option's letter, whatever the reasoning says."""

    name = "always-a"
    sees_letters = False
    scoring = "constant"

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        return [option_letters(opts)[0] if opts else None for opts in options]


REFERENCE_JUDGES = {"mentioned-last": MentionedLastJudge, "always-a": AlwaysFirstJudge}

__all__ = ["REFERENCE_JUDGES", "AlwaysFirstJudge", "MentionedLastJudge"]
