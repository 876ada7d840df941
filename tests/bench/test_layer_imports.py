"""The built layer's import rows: the queue consumer against the consumer plus the other rooms,
and the check that keeps the consumer's figure honest. Module counts and room checks only: the
times are `make bench`'s to judge, never this test's.

Everything imports from the layer `layer_build` made (built here if stale), with the target's
interpreter, as benchmarks/imports.py measures it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import imports
from benchmarks.fresh_python import ROOT
from benchmarks.imports import (
    LAYER_ALL_ROOMS,
    LAYER_COMPILED,
    LAYER_SOURCE,
    LayerImportResult,
    check_rooms,
    layer_files,
    measure_layer,
)
from exactly_once_cdk.bytecode import find_interpreter
from exactly_once_cdk.layer_build import build_layer, layer_dir
from exactly_once_cdk.runtime_target import DEFAULT_TARGET
from tests.layer_bytecode import bytecode_tag

PYC = f".{bytecode_tag(DEFAULT_TARGET.python_version)}.pyc"  # the target's, or the stand-in's


@pytest.fixture(scope="module")
def python() -> str:
    return find_interpreter(DEFAULT_TARGET.python_version)


@pytest.fixture(scope="module")
def site() -> Path:
    return build_layer(ROOT / layer_dir(bytecode=True), bytecode=True) / "python"


@pytest.fixture(scope="module")
def measured() -> LayerImportResult:
    return measure_layer(1, (LAYER_COMPILED, LAYER_ALL_ROOMS))


def test_the_consumer_and_the_all_rooms_import_are_measured_side_by_side(
    measured: LayerImportResult,
) -> None:
    assert list(measured.cpu) == list(measured.wall) == [LAYER_COMPILED, LAYER_ALL_ROOMS]
    assert all(len(samples) == 1 for samples in [*measured.cpu.values(), *measured.wall.values()])
    consumer, all_rooms = measured.files[LAYER_COMPILED], measured.files[LAYER_ALL_ROOMS]
    assert measured.modules == {LAYER_COMPILED: len(consumer), LAYER_ALL_ROOMS: len(all_rooms)}
    assert all(f.endswith(PYC) for f in [*consumer, *all_rooms])
    # The consumer loads the SQS room and the DynamoDB store, and nothing from a lazy room.
    assert any(f.startswith("exactly_once/sqs/") for f in consumer)
    assert any(f.startswith("exactly_once/stores/dynamodb/") for f in consumer)
    assert measured.room_modules(LAYER_COMPILED) == {}
    # The all-rooms import loads everything the consumer does, plus the SNS and HTTP rooms;
    # the saving is exactly the modules those rooms brought.
    assert set(consumer) < set(all_rooms)
    rooms = measured.room_modules(LAYER_ALL_ROOMS)
    assert set(rooms) == {"exactly_once/http/", "exactly_once/sns/"}
    assert measured.rooms_saving_modules == len(set(all_rooms) - set(consumer)) > 0
    assert sum(rooms.values()) <= measured.rooms_saving_modules


@pytest.mark.parametrize(
    "room", ["exactly_once.http.api", "exactly_once.sns.subscriber", "exactly_once.stores.postgres"]
)
def test_a_consumer_that_loads_a_lazy_room_stops_the_benchmark(
    room: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the consumer to import a room eagerly, no lean figure is reported: measure_layer
    raises before timing anything. (The PostgreSQL room is its package alone: its store needs
    psycopg, which this layer does not carry.)"""
    monkeypatch.setitem(imports.LAYER_CODE, LAYER_COMPILED, f"import layer_orders\nimport {room}")
    with pytest.raises(RuntimeError, match="should import lazily"):
        measure_layer(1, (LAYER_COMPILED,))


def test_the_check_reads_the_rooms_from_the_layers_own_listing(python: str, site: Path) -> None:
    consumer = layer_files(python, site, True, imports.LAYER_CODE[LAYER_COMPILED])
    check_rooms(LAYER_COMPILED, consumer)  # the consumer as it is: lean
    eager = layer_files(python, site, True, "import layer_orders\nimport exactly_once.http.api")
    with pytest.raises(RuntimeError, match="exactly_once/http/"):
        check_rooms(LAYER_COMPILED, eager)
    with pytest.raises(RuntimeError, match="should import lazily"):
        check_rooms(LAYER_SOURCE, eager)  # the source-only row is held to the same rule


def test_the_all_rooms_case_must_load_the_rooms_it_names(python: str, site: Path) -> None:
    """Otherwise its row would be a second consumer row, and the saving would read as none."""
    consumer = layer_files(python, site, True, imports.LAYER_CODE[LAYER_COMPILED])
    with pytest.raises(RuntimeError, match="loaded nothing from"):
        check_rooms(LAYER_ALL_ROOMS, consumer)
    sns_only = layer_files(python, site, True, "import exactly_once.sns.subscriber")
    with pytest.raises(RuntimeError, match="exactly_once/http/"):
        check_rooms(LAYER_ALL_ROOMS, sns_only)
