"""The consumers a chaos run can put under test, by name."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Library(StrEnum):
    LAYER = "layer"
    POWERTOOLS = "powertools"


@dataclass(frozen=True)
class ConsumerKind:
    name: str
    handler: str  # "module:attribute", imported inside each worker process
    library: Library  # decides the idempotency table's schema and how to read it
    title: str


CONSUMERS: dict[str, ConsumerKind] = {
    kind.name: kind
    for kind in (
        ConsumerKind(
            "layer",
            "fault_injection.consumer_layer:handle_fenced",
            Library.LAYER,
            "layer, fenced effect",
        ),
        ConsumerKind(
            "layer-unfenced",
            "fault_injection.consumer_layer:handle_unfenced",
            Library.LAYER,
            "layer, plain effect",
        ),
        ConsumerKind(
            "powertools",
            "fault_injection.consumer_powertools:handle",
            Library.POWERTOOLS,
            "Powertools 3.37",
        ),
    )
}


def by_names(names: list[str]) -> list[ConsumerKind]:
    unknown = [n for n in names if n not in CONSUMERS]
    if unknown:
        raise ValueError(f"unknown consumer(s) {unknown}; known: {sorted(CONSUMERS)}")
    return [CONSUMERS[n] for n in names]
