"""The consumers a chaos run can put under test, by name, for each store."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fault_injection.settings import StoreKind


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


# On PostgreSQL the layer's consumer only: its effect commits with its completion. (The plain
# effect and Powertools are DynamoDB comparisons; docs/chaos.md has them.)
POSTGRES_CONSUMERS: dict[str, ConsumerKind] = {
    "layer": ConsumerKind(
        "layer",
        "fault_injection.consumer_postgres:handle",
        Library.LAYER,
        "layer on PostgreSQL, effect in the same transaction",
    )
}
DEFAULT_CONSUMERS = {
    StoreKind.DYNAMODB: "layer,layer-unfenced,powertools",
    StoreKind.POSTGRES: "layer",
}


def known(store: StoreKind = StoreKind.DYNAMODB) -> dict[str, ConsumerKind]:
    return POSTGRES_CONSUMERS if store is StoreKind.POSTGRES else CONSUMERS


def by_names(names: list[str], store: StoreKind = StoreKind.DYNAMODB) -> list[ConsumerKind]:
    kinds = known(store)
    unknown = [n for n in names if n not in kinds]
    if unknown:
        raise ValueError(f"unknown consumer(s) {unknown} on {store}; known: {sorted(kinds)}")
    return [kinds[n] for n in names]
