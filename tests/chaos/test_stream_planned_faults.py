"""The Kinesis poller's lost replies: drawn at the run's rate, plus one planned per process, so
a run's verdict that replies were lost holds by plan (at 2 % of a few hundred requests the
draws alone miss about one run in 400)."""

from __future__ import annotations

from fault_injection.stream_worker import LOST_EACH_PROCESS, lost_replies
from tests.chaos.scripted_random import Scripted


def test_the_planned_reply_is_lost_whatever_the_draw() -> None:
    draws = Scripted([0.99] * 10)
    lose = lost_replies(1e-9, draws)

    lost = [n for n in range(1, 11) if lose("PutItem")]

    assert lost == [LOST_EACH_PROCESS]
    assert draws.draws == []  # every request took its draw, the planned one included


def test_the_draws_lose_replies_at_the_rate_around_the_plan() -> None:
    lose = lost_replies(0.5, Scripted([0.1, 0.9, 0.1, 0.9, 0.9, 0.9]))

    assert [lose("UpdateItem") for _ in range(6)] == [True, False, True, False, True, False]
