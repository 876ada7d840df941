"""The consumers a chaos run can put under test, by name, for each store."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fault_injection.settings import StoreKind, Workload


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


# The three-step workload (fault_injection/steps_*.py): `steps` is the one its verdict gates on.
STEPS_CONSUMERS: dict[str, ConsumerKind] = {
    kind.name: kind
    for kind in (
        ConsumerKind(
            "steps",
            "fault_injection.steps_consumers:handle_steps",
            Library.LAYER,
            "layer, three ctx.step",
        ),
        ConsumerKind(
            "steps-plain",
            "fault_injection.steps_consumers:handle_plain",
            Library.LAYER,
            "layer, three plain effects",
        ),
    )
}
STEPS_POSTGRES_CONSUMERS: dict[str, ConsumerKind] = {
    "steps": ConsumerKind(
        "steps",
        "fault_injection.steps_consumer_postgres:handle",
        Library.LAYER,
        "layer on PostgreSQL, three ctx.step (each in its own transaction)",
    )
}
DEFAULT_STEPS_CONSUMERS = {StoreKind.DYNAMODB: "steps,steps-plain", StoreKind.POSTGRES: "steps"}
GATE = {Workload.ORDERS: "layer", Workload.STEPS: "steps"}  # the consumer a run exits 1 on


def known(
    store: StoreKind = StoreKind.DYNAMODB, workload: Workload = Workload.ORDERS
) -> dict[str, ConsumerKind]:
    if workload is Workload.STEPS:
        return STEPS_POSTGRES_CONSUMERS if store is StoreKind.POSTGRES else STEPS_CONSUMERS
    return POSTGRES_CONSUMERS if store is StoreKind.POSTGRES else CONSUMERS


def defaults(store: StoreKind, workload: Workload = Workload.ORDERS) -> str:
    """The consumers a run puts under test when none are named."""
    return (DEFAULT_STEPS_CONSUMERS if workload is Workload.STEPS else DEFAULT_CONSUMERS)[store]


def by_names(
    names: list[str],
    store: StoreKind = StoreKind.DYNAMODB,
    workload: Workload = Workload.ORDERS,
) -> list[ConsumerKind]:
    kinds = known(store, workload)
    unknown = [n for n in names if n not in kinds]
    if unknown:
        raise ValueError(
            f"unknown consumer(s) {unknown} on {store} ({workload} workload); known: "
            f"{sorted(kinds)}"
        )
    return [kinds[n] for n in names]
