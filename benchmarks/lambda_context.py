"""A Lambda context stand-in: both libraries read the remaining time to size their locks."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field


@dataclass
class BenchContext:
    timeout_ms: int = 60_000
    function_name: str = "bench-consumer"
    aws_request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return int(self.timeout_ms - (time.monotonic() - self.started) * 1000)
