"""How a result is kept on a COMPLETED record, the same for every store.

A result over the cap is kept as its SHA-256 and size, and one the codec cannot round-trip as
the reason only, so completion never fails because of the result.
"""

from __future__ import annotations

from typing import Any

from exactly_once.stores import codec

# DynamoDB items are at most 400 KB, and the rest of the record needs room too. The PostgreSQL
# store keeps the same cap, so a result means the same on both.
MAX_RESULT_CAP_BYTES = 350 * 1024


class StoredResult:
    """What a store writes for a result: its text, or its digest and size, or why neither.

    A plain class, not a dataclass: each frozen dataclass compiles six generated methods at
    import (about 0.8 ms of every cold start), and nothing compares, hashes or copies these.
    """

    __slots__ = ("omitted", "sha256", "size", "text")

    def __init__(
        self,
        text: str | None = None,  # the codec's JSON, when it fits
        sha256: str | None = None,  # over the cap: its digest and size instead
        size: int | None = None,
        omitted: str | None = None,  # why the text is not kept
    ) -> None:
        self.text = text
        self.sha256 = sha256
        self.size = size
        self.omitted = omitted

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

    def without_text(self, why: str) -> StoredResult:
        """This result kept as its digest and size only (`why` it is not kept whole)."""
        if self.text is None:
            return self
        size = len(self.text.encode("utf-8"))
        return StoredResult(
            sha256=codec.sha256_hex(self.text), size=size, omitted=f"{size} bytes: {why}"
        )
