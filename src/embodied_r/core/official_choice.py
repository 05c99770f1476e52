"""The letter rule of Embodied-R's released accuracy reward, for ``accuracy_rule: official``.

The official reward reads a letter out of the *whole* completion (reasoning and answer alike) and out
of the gold answer, and pays 1 when the two letters are the same. The first of these readings that
finds something decides, every pattern ignoring case and its letter upper-cased:

1. the last ``$\\boxed{X}$``;
2. the first "answer" followed by whitespace and a letter (so "answer c" in "to answer carefully" is C);
3. the last letter, standing alone, followed by optional spaces and a full stop ("B.", "c .");
4. the last letter standing alone ("B", "(b)", " a " as in "I see a bed");
5. otherwise no letter (the official code compares the upper-cased text, which never equals a letter
   that steps 3 and 4 would not have found).

"Standing alone" means not preceded by a letter and, in step 4, not followed by one. Matches do not
overlap, as Python's ``re.finditer`` returns them: in "A B" the space is taken by the match of A, so
step 4 sees only A.

The project's own rule (``core.parsing``: the last ``<answer>`` only, upper-case letters, option text)
is the default; this one exists so a user can train exactly as the paper's code did.

>>> official_choice_letter("<think>Option C. is wrong</think><answer>B</answer>")
'C'
>>> official_choice_letter("<think>To answer carefully</think><answer>B</answer>")
'C'
>>> official_choice_letter("<answer>a. bed</answer>"), official_choice_letter("<answer>bed</answer>") is None
('A', True)
"""

from __future__ import annotations

import re

# Each pattern is matched with re.IGNORECASE, as the official reward does.
_BOXED_RE = re.compile(r"\$\\boxed\{([A-H])\}\$", re.IGNORECASE)
_ANSWER_WORD_RE = re.compile(r"answer\s+([A-H])\.?", re.IGNORECASE)
_LETTER_DOT_RE = re.compile(r"(?:^|[^A-Za-z])([A-H])\s*\.", re.IGNORECASE)
_LETTER_ALONE_RE = re.compile(r"(?:^|[^A-Za-z])([A-H])(?:$|[^A-Za-z])", re.IGNORECASE)

# (pattern, take the last match?) in the order the official reward tries them.
_CASCADE: tuple[tuple[re.Pattern[str], bool], ...] = (
    (_BOXED_RE, True),
    (_ANSWER_WORD_RE, False),
    (_LETTER_DOT_RE, True),
    (_LETTER_ALONE_RE, True),
)


def official_choice_letter(text: str) -> str | None:
    """The upper-case letter A-H the official accuracy reward reads from ``text``, or None.

    >>> official_choice_letter("$\\\\boxed{d}$ but answer B"), official_choice_letter("answer B, then C.")
    ('D', 'B')
    >>> official_choice_letter("A or C"), official_choice_letter("no option here") is None
    ('C', True)
    """
    if not isinstance(text, str):
        return None
    text = text.strip()
    for pattern, last in _CASCADE:
        matches = pattern.findall(text)
        if matches:
            return (matches[-1] if last else matches[0]).upper()
    return None


def official_choice_score(completion: str, answer: object) -> float:
    """1.0 when the official rule reads the same letter from the completion as from the gold answer.

    The gold answer goes through the same reading (as in the official reward), so "B" and "B. bed"
    are both B; a gold answer with no letter in it is compared as upper-cased text, which no
    completion's letter equals.

    >>> official_choice_score("<think>.</think><answer>b</answer>", "B")
    1.0
    >>> official_choice_score("<think>A. is near</think><answer>B</answer>", "B")
    0.0
    """
    letter = official_choice_letter(completion)
    gold = official_choice_letter(str(answer)) or str(answer).strip().upper()
    return float(letter is not None and letter == gold)


__all__ = ["official_choice_letter", "official_choice_score"]
