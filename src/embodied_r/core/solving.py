"""What an exact solver returns for one prompt row: the answer its text determines, or why it determines none.

A solver is a baseline that reads only a row's prompt text and answers by exact computation (a method
names its solver, ``Method.solver``). It never guesses: where the text does not determine the answer,
``answer`` is None and ``reason`` says why, and evaluation counts the row as not applicable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Solved:
    """``answer``: an option letter or a number, None when not applicable; ``reason``: why not applicable;
    ``copy``: the text states the answer outright at this detail level (a copy, not a computation).

    >>> Solved("B").applicable, Solved(reason="the sofa is in no frame").applicable
    (True, False)
    """

    answer: Any = None
    reason: str | None = None
    copy: bool = False

    @property
    def applicable(self) -> bool:
        return self.answer is not None
