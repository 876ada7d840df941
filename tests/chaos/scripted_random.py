"""A `random.Random` whose draws the test gives, for the fault plans' unit tests."""

from __future__ import annotations

import random


class Scripted(random.Random):
    """A Random whose draws are given, in order (0.0 injects the fault, 0.99 lets it pass)."""

    def __init__(self, draws: list[float]) -> None:
        super().__init__(0)
        self.draws = draws

    def random(self) -> float:
        return self.draws.pop(0)
