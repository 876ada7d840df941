"""Started minus finished: work that took a lock and has no recorded outcome, per idempotency
scope (the locker design's "started minus completed").

The library emits `Started` when it takes a lock and `Finished` when it writes an outcome
(completed or failed), under the dimension `scope=<idempotency scope>`. Their difference summed
over a window counts work that crashed, timed out, or never wrote its completion, whatever the
entry point (queue consumer, HTTP API, SNS subscriber or `once`). The stuck-lock monitor sees the
same work only once its lease has expired; this sees it once the window closes.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

STARTED = "Started"
FINISHED = "Finished"
SCOPE_DIMENSION = "scope"
WINDOW = Duration.minutes(15)
THRESHOLD = 1.0
# FILL: a window in which work started and nothing finished has no `Finished` datapoint, and
# `started - finished` would then be missing (not breaching) exactly when it matters.
EXPRESSION = "FILL(started, 0) - FILL(finished, 0)"
MAX_WINDOW_SECONDS = 86_400  # CloudWatch: period x evaluation periods at most one day


@dataclass(frozen=True)
class UnfinishedWork:
    """The expression for one idempotency scope, and the alarm's window and threshold.

    Work that straddles the end of a window counts as started in one window and finished in
    the next (which then goes negative), so the threshold should stay above the work normally
    in flight at any moment (roughly concurrency x batch size) for scopes under steady load.
    """

    namespace: str
    idempotency_scope: str
    window: Duration = WINDOW
    threshold: float = THRESHOLD

    def __post_init__(self) -> None:
        seconds = self.window.to_seconds()
        if seconds % 60 or not 60 <= seconds <= MAX_WINDOW_SECONDS:
            raise ValueError(
                f"unfinished-work window for {self.idempotency_scope!r}: {seconds:g} s must be "
                f"whole minutes from 60 s to {MAX_WINDOW_SECONDS} s (CloudWatch alarm periods)"
            )
        if self.threshold <= 0:
            raise ValueError(
                f"unfinished-work threshold for {self.idempotency_scope!r}: {self.threshold:g} "
                "must be above 0 (an idle scope sums to 0)"
            )

    def _metric(self, name: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=self.namespace,
            metric_name=name,
            dimensions_map={SCOPE_DIMENSION: self.idempotency_scope},
            statistic="Sum",
            period=self.window,
        )

    def metric(self) -> cloudwatch.MathExpression:
        """`Started - Finished` summed over the window, for alarms and graphs."""
        return cloudwatch.MathExpression(
            expression=EXPRESSION,
            using_metrics={"started": self._metric(STARTED), "finished": self._metric(FINISHED)},
            label=f"{self.idempotency_scope} started - finished",
            period=self.window,
        )

    def description(self, name: str) -> str:
        minutes = int(self.window.to_minutes())
        return (
            f"{name}: work started in scope {self.idempotency_scope!r} without a recorded "
            f"outcome over {minutes} min (crashed, timed out, or its completion never written)"
        )

    def widget(self, title: str) -> cloudwatch.GraphWidget:
        """One graph per scope: two expressions in one graph could not both name `started`."""
        return cloudwatch.GraphWidget(
            title=title,
            left=[self.metric()],
            left_annotations=[cloudwatch.HorizontalAnnotation(value=self.threshold, label="alarm")],
            width=6,
        )
