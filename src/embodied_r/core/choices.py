"""Choice lists in a new order: the question's ``A. ...`` lines rewritten where they stand, and the map
from each new letter back to the letter its option had before. Shared by the shuffled-options judge
(judge/shuffled_options.py) and the option rotations of GRPO training (training/option_rotations.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from embodied_r.core.parsing import option_letters, option_texts


def reordered_choices(question: str, options: list[str], order: Sequence[int]) -> tuple[str, list[str], dict[str, str]]:
    """The question with letter ``k`` now naming the option text that stood at ``order[k]``, the new option
    list, and new letter -> original letter. The choice lines are rewritten where they stand (or appended
    when the question lacks them); the letters keep their order.

    >>> options = ["A. left", "B. right", "C. up"]
    >>> q, opts, back = reordered_choices("Which?\\nA. left\\nB. right\\nC. up", options, [1, 2, 0])
    >>> q, opts, back
    ('Which?\\nA. right\\nB. up\\nC. left', ['A. right', 'B. up', 'C. left'], {'A': 'B', 'B': 'C', 'C': 'A'})
    """
    if sorted(order) != list(range(len(options))):
        raise ValueError(f"order {list(order)} is not a permutation of the {len(options)} options")
    letters = option_letters(options)
    texts = list(option_texts(options).values())
    new = [f"{letters[k]}. {texts[order[k]]}" for k in range(len(options))]
    slot = {str(o).strip(): new[k] for k, o in enumerate(options)}
    found = [o for o in slot if o in question]
    if len(found) == len(slot):
        # One pass over all choice lines at once, longest first, so a line is never rewritten twice.
        pattern = "|".join(re.escape(o) for o in sorted(slot, key=len, reverse=True))
        rewritten = re.sub(pattern, lambda m: slot[m.group(0)], question)
    else:
        rewritten = question.rstrip() + "\nChoices:\n" + "\n".join(new)
    return rewritten, new, {letters[k]: letters[order[k]] for k in range(len(options))}
