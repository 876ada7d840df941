"""The demo workload's options, shared by `run` and `workload` so the two stay the same."""

from __future__ import annotations

from typing import Annotated

import typer

Orders = Annotated[int, typer.Option(min=0, help="Messages to the orders (standard) queue.")]
Payments = Annotated[int, typer.Option(min=0, help="Messages to the payments (FIFO) queue.")]
Sales = Annotated[
    int, typer.Option(min=0, help="Messages published to the Sales topic (0: no topic part).")
]
Redeliveries = Annotated[
    int,
    typer.Option(
        min=0,
        help="Published messages delivered a second time (same SNS MessageId) to each subscriber.",
    ),
]
Duplicates = Annotated[
    float, typer.Option(min=0.0, max=0.9, help="Share of messages repeating a business id.")
]
Poison = Annotated[int, typer.Option(min=0, help="Poison messages per queue.")]
Transient = Annotated[
    float, typer.Option(min=0.0, max=1.0, help="Share that fail once, then succeed.")
]
WorkMs = Annotated[int, typer.Option(min=0, help="Simulated I/O per record (ms).")]
Seed = Annotated[int, typer.Option(help="Seed for the workload.")]
