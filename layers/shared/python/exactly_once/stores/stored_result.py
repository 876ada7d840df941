"""How a result is kept on a COMPLETED record, the same for every store.

A result over the cap is kept as its SHA-256 and size, and one the codec cannot round-trip as
the reason only, so completion never fails because of the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exactly_once.stores import codec

# DynamoDB items are at most 400 KB, and the rest of the record needs room too. The PostgreSQL
# store keeps the same cap, so a result means the same on both.
MAX_RESULT_CAP_BYTES = 350 * 1024


@dataclass(frozen=True)
class StoredResult:
    text: str | None = None  # the codec's JSON, when it fits
    sha256: str | None = None  # over the cap: its digest and size instead
    size: int | None = None
    omitted: str | None = None  # why the text is not kept

    @classmethod
    def of(cls, result: Any, cap_bytes: int) -> StoredResult:
        try:
            encoded = codec.dumps(result)
        except Exception as exc:  # whatever the codec refuses, completion must still happen
            return cls(omitted=f"not storable: {type(exc).__name__}: {exc}"[:512])
        size = len(encoded.encode("utf-8"))
        if size <= cap_bytes:
            return cls(text=encoded)
        return cls(
            sha256=codec.sha256_hex(encoded),
            size=size,
            omitted=f"{size} bytes, over the {cap_bytes}-byte cap",
        )
