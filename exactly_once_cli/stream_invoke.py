"""What `invoke` knows of stream events (Kinesis, DynamoDB Streams, Kafka): which one an event
is, what Lambda's event source mapping would never send, and where a batch response makes the
mapping resume.

A stream event is told by its source, as the library's reader tells it: Kinesis and DynamoDB
Streams records carry `eventSource` "aws:kinesis" / "aws:dynamodb" in a `Records` list; a Kafka
event (MSK "aws:kafka", or "SelfManagedKafka") has its records in a `records` map by
topic-partition.
"""

from __future__ import annotations

from typing import Any

from exactly_once_cli.common import CliError

KINESIS, DYNAMODB, KAFKA = "Kinesis", "DynamoDB Streams", "Kafka"
RECORD_SOURCES = {"aws:kinesis": KINESIS, "aws:dynamodb": DYNAMODB}
KAFKA_SOURCES = ("aws:kafka", "SelfManagedKafka")
# The field holding a record's position, by source: (record field, position field).
POSITIONS = {KINESIS: ("kinesis", "sequenceNumber"), DYNAMODB: ("dynamodb", "SequenceNumber")}


def stream_event_kind(event: Any) -> str | None:
    """KINESIS, DYNAMODB or KAFKA for a stream event (by its first record's source, with its
    source's section: `kinesis` or `dynamodb`); None for anything else, which `invoke` then
    checks as an SQS event (an SQS record claiming another source is refused as such)."""
    if not isinstance(event, dict):
        return None
    if event.get("eventSource") in KAFKA_SOURCES and isinstance(event.get("records"), dict):
        return KAFKA
    records = event.get("Records")
    first = records[0] if isinstance(records, list) and records else None
    if not isinstance(first, dict):
        return None
    kind = RECORD_SOURCES.get(str(first.get("eventSource")))
    if kind is None or not isinstance(first.get(POSITIONS[kind][0]), dict):
        return None
    return kind


def check_stream_event(event: dict[str, Any], kind: str, source: str) -> None:
    """Refuse what the mapping would never send: records of another source beside the first's,
    a record without its position, an empty Kafka batch. The handler would answer them (a
    record without a position fails the batch whole), and the run would prove nothing."""
    if kind == KAFKA:
        batches = event["records"]
        if not batches or not all(isinstance(found, list) and found for found in batches.values()):
            raise CliError(f"{source}: a Kafka event needs records: a list per topic-partition")
        for name, records in batches.items():
            for index, record in enumerate(records):
                fields = record if isinstance(record, dict) else {}
                if not (
                    isinstance(fields.get("topic"), str)
                    and _is_int(fields.get("partition"))
                    and _is_int(fields.get("offset"))
                ):
                    raise CliError(
                        f"{source}: records[{name!r}][{index}] needs a topic, a partition and "
                        "an offset"
                    )
        return
    wanted = next(origin for origin, name in RECORD_SOURCES.items() if name == kind)
    field, position = POSITIONS[kind]
    for index, record in enumerate(event["Records"]):
        fields = record if isinstance(record, dict) else {}
        origin = fields.get("eventSource")
        if origin != wanted:
            raise CliError(f"{source}: Records[{index}] comes from {origin}, not {wanted}")
        inner = fields.get(field)
        if not isinstance(inner, dict) or not isinstance(inner.get(position), str):
            raise CliError(f"{source}: Records[{index}].{field} has no {position}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def resume_positions(response: Any) -> list[str]:
    """Where the response makes the mapping resume, one per shard or partition: a sequence
    number, or Kafka's "<topic>-<partition> offset <n>". An item naming nothing ("" or null)
    is what Lambda takes as the whole batch failed; no list (or no response) as none failed."""
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    if not isinstance(failures, list):
        return []
    found = []
    for item in failures:
        named = item.get("itemIdentifier") if isinstance(item, dict) else None
        if isinstance(named, dict):
            found.append(f"{named.get('partition')} offset {named.get('offset')}")
        else:
            found.append(str(named) if named else "the whole batch")
    return found
