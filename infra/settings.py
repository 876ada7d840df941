"""Typed settings from CDK context (cdk.json or `-c key=value`), and per-consumer resolution.

No CDK imports: the stack passes `node.try_get_context`, tests and tools pass `dict.get`.
Values given with `-c` arrive as strings, so every reader also accepts text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from exactly_once_cdk.consumer_rules import (
    MAX_POLLERS_RANGE,
    MIN_POLLERS_RANGE,
    check_consumer,
    check_scaling,
    visibility_timeout_seconds,
)
from exactly_once_cdk.runtime_target import ARCHITECTURES, PYTHON_VERSIONS, RuntimeTarget
from infra.consumers import ConsumerSpec

ContextGetter = Callable[[str], Any]

DEFAULT_STACK_NAME = "ExactlyOnceSqs"
PROD_STAGES = frozenset({"prod", "production"})
# Where the idempotency records live (context `store`): a DynamoDB table, or Aurora PostgreSQL
# behind RDS Proxy (exactly_once_cdk.postgres_store). DynamoDB is the default and the only store
# the local emulator can run.
STORES = ("dynamodb", "postgres")
# A prod stage deploys only where it is told to: `-c account=<12 digits> -c region=<region>`.
ACCOUNT_PATTERN = re.compile(r"\d{12}")
REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
STACK_NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")  # CloudFormation's rule
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827)

# Per-consumer override keys (context `consumers.<Id>.<key>`) -> ConsumerConfig field.
OVERRIDE_KEYS = {
    "functionTimeoutSeconds": "timeout_seconds",
    "memorySize": "memory_mb",
    "batchSize": "batch_size",
    "batchingWindowSeconds": "batching_window_seconds",
    "maxConcurrency": "max_concurrency",
    "maxReceiveCount": "max_receive_count",
    "leaseMarginSeconds": "lease_margin_seconds",
    # Provisioned pollers instead of maxConcurrency (never both): minimum pollers cost money
    # around the clock.
    "minPollers": "min_pollers",
    "maxPollers": "max_pollers",
}


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"context {key!r}: expected true/false, got {value!r}")


def _int(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"context {key!r}: expected an integer, got {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"context {key!r}: expected an integer, got {value!r}") from None
    if not low <= number <= high:
        raise ValueError(f"context {key!r}: {number} is outside {low}..{high}")
    return number


def _choice(value: Any, key: str, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise ValueError(f"context {key!r}: expected one of {', '.join(choices)}, got {value!r}")
    return text


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):  # `-c consumers='{"Orders": {...}}'`
        value = json.loads(value)
    if not isinstance(value, Mapping):
        raise ValueError(f"context {key!r}: expected an object, got {value!r}")
    return value


@dataclass(frozen=True)
class Settings:
    """Stack-wide settings. Consumer tuning here is the default for every consumer."""

    stack_name: str = DEFAULT_STACK_NAME
    stage: str = "dev"
    local_stack: bool = False  # deploying into moto: mappings disabled, no bootstrap needed
    store: str = "dynamodb"  # one of STORES
    xray: bool = False
    alarm_email: str | None = None
    log_retention_days: int = 30
    function_timeout_seconds: int = 30
    memory_mb: int = 256
    batch_size: int = 10
    batching_window_seconds: int = 0
    max_concurrency: int = 5
    max_receive_count: int = 5
    lease_margin_seconds: int = 5
    queue_age_alarm_seconds: int = 600
    dlq_age_alarm_seconds: int = 3 * 86_400  # well inside the DLQ's 14-day retention
    lock_monitor_interval_minutes: int = 5
    # The functions' and the layer's Lambda runtime (`pythonVersion`, `architecture`), and
    # whether the layer ships .pyc files compiled for it (`layerBytecode`; prod requires it).
    python_version: str = "3.13"
    architecture: str = "arm64"
    layer_bytecode: bool = True
    account: str | None = None  # required with a prod stage (`-c account=...`)
    region: str | None = None  # required with a prod stage (`-c region=...`)
    # DynamoDB warm throughput of the idempotency table (None: leave it unset, AWS's default).
    warm_read_units_per_second: int | None = None
    warm_write_units_per_second: int | None = None
    consumer_overrides: Mapping[str, Mapping[str, Any]] | None = None

    @property
    def is_prod(self) -> bool:
        return self.stage.lower() in PROD_STAGES

    @property
    def runtime_target(self) -> RuntimeTarget:
        return RuntimeTarget(self.python_version, self.architecture)

    @property
    def deployed_stack_name(self) -> str:
        """`{stackName}-{stage}` for a prod stage, `stackName` otherwise.

        A prod deploy that forgets `-c stage=prod` then names another stack (the dev one) and
        can never turn the prod stack's retained, protected resources into dev's. Dev keeps the
        bare name, so the local stack, `eonce` and existing dev stacks are unchanged.
        """
        return f"{self.stack_name}-{self.stage}" if self.is_prod else self.stack_name

    @classmethod
    def from_context(cls, get: ContextGetter) -> Settings:
        def read(key: str, default: Any) -> Any:
            value = get(key)
            return default if value is None else value

        d = cls()
        retention = _int(
            read("logRetentionDays", d.log_retention_days), "logRetentionDays", 1, 3653
        )
        if retention not in LOG_RETENTION_DAYS:
            raise ValueError(f"context 'logRetentionDays': {retention} not in {LOG_RETENTION_DAYS}")
        email = read("alarmEmail", None)
        overrides = _mapping(get("consumers"), "consumers")
        for consumer_id, values in overrides.items():
            unknown = set(_mapping(values, f"consumers.{consumer_id}")) - set(OVERRIDE_KEYS)
            if unknown:
                raise ValueError(
                    f"context 'consumers.{consumer_id}': unknown keys {sorted(unknown)}; "
                    f"known: {sorted(OVERRIDE_KEYS)}"
                )
        local_stack = _bool(read("localStack", False), "localStack")
        store = _choice(read("store", d.store), "store", STORES)
        if store == "postgres" and local_stack:
            # Refused here, not skipped: a local deploy that quietly used DynamoDB would test
            # a different store than the one asked for.
            raise ValueError(
                "context 'store': postgres cannot be deployed into the local emulator "
                "(localStack=true; moto has no Aurora or RDS Proxy): use store=dynamodb there"
            )
        stage = str(read("stage", d.stage))
        account, region = _target(get, stage.lower() in PROD_STAGES)
        settings = cls(
            stack_name=str(read("stackName", d.stack_name)),
            stage=stage,
            account=account,
            region=region,
            # At least the base a new on-demand table starts with (warm throughput only rises);
            # no upper bound here: DynamoDB checks the account's limits at deploy.
            warm_read_units_per_second=_optional_int(
                get("warmReadUnitsPerSecond"), "warmReadUnitsPerSecond", 12_000, 2**31 - 1
            ),
            warm_write_units_per_second=_optional_int(
                get("warmWriteUnitsPerSecond"), "warmWriteUnitsPerSecond", 4_000, 2**31 - 1
            ),
            local_stack=local_stack,
            store=store,
            xray=_bool(read("xray", False), "xray"),
            alarm_email=str(email) if email else None,
            log_retention_days=retention,
            function_timeout_seconds=_int(
                read("functionTimeoutSeconds", d.function_timeout_seconds),
                "functionTimeoutSeconds",
                1,
                900,
            ),
            memory_mb=_int(read("memorySize", d.memory_mb), "memorySize", 128, 10_240),
            batch_size=_int(read("batchSize", d.batch_size), "batchSize", 1, 10_000),
            batching_window_seconds=_int(
                read("batchingWindowSeconds", d.batching_window_seconds),
                "batchingWindowSeconds",
                0,
                300,
            ),
            max_concurrency=_int(
                read("maxConcurrency", d.max_concurrency), "maxConcurrency", 2, 1000
            ),
            max_receive_count=_int(
                read("maxReceiveCount", d.max_receive_count), "maxReceiveCount", 1, 1000
            ),
            lease_margin_seconds=_int(
                read("leaseMarginSeconds", d.lease_margin_seconds), "leaseMarginSeconds", 0, 900
            ),
            queue_age_alarm_seconds=_int(
                read("queueAgeAlarmSeconds", d.queue_age_alarm_seconds),
                "queueAgeAlarmSeconds",
                60,
                14 * 86_400,
            ),
            dlq_age_alarm_seconds=_int(
                read("dlqAgeAlarmSeconds", d.dlq_age_alarm_seconds),
                "dlqAgeAlarmSeconds",
                60,
                14 * 86_400,
            ),
            lock_monitor_interval_minutes=_int(
                read("lockMonitorIntervalMinutes", d.lock_monitor_interval_minutes),
                "lockMonitorIntervalMinutes",
                1,
                720,  # its alarms look at two intervals, CloudWatch at one day at most
            ),
            consumer_overrides={k: dict(_mapping(v, k)) for k, v in overrides.items()},
            python_version=_choice(
                read("pythonVersion", d.python_version), "pythonVersion", PYTHON_VERSIONS
            ),
            architecture=_choice(
                read("architecture", d.architecture), "architecture", ARCHITECTURES
            ),
            layer_bytecode=_bool(read("layerBytecode", d.layer_bytecode), "layerBytecode"),
        )
        if settings.is_prod and not settings.layer_bytecode:
            # Source only, every cold start compiles the layer's modules (about twice the import
            # time): acceptable while developing on a machine without the target's Python.
            raise ValueError(
                "context 'layerBytecode': a prod stage ships the compiled layer; install the "
                f"target's Python ({settings.python_version}) instead of layerBytecode=false"
            )
        if not STACK_NAME_PATTERN.fullmatch(settings.deployed_stack_name):
            raise ValueError(
                f"stack name {settings.deployed_stack_name!r} (stackName, and the stage for prod): "
                "letters, digits and hyphens, starting with a letter, at most 128 characters"
            )
        return settings


def _optional_int(value: Any, key: str, low: int, high: int) -> int | None:
    """Unset (None, or "" as `-c key=` passes it) stays None."""
    if value is None or str(value).strip() == "":
        return None
    return _int(value, key, low, high)


def _target(get: ContextGetter, prod: bool) -> tuple[str | None, str | None]:
    """The account and region the stack is bound to: required for prod, optional otherwise.

    Refused rather than defaulted: a prod stack bound to whatever credentials happen to be in
    the shell is how a prod deploy lands in the wrong account.
    """
    account = str(get("account") or "").strip() or None
    region = str(get("region") or "").strip() or None
    if prod and (account is None or region is None):
        raise ValueError(
            "a prod stage needs an explicit target: pass -c account=<12-digit account id> "
            "-c region=<region> (e.g. -c account=123456789012 -c region=eu-west-1)"
        )
    if account is not None and not ACCOUNT_PATTERN.fullmatch(account):
        raise ValueError(f"context 'account': expected 12 digits, got {account!r}")
    if region is not None and not REGION_PATTERN.fullmatch(region):
        raise ValueError(f"context 'region': expected a region such as eu-west-1, got {region!r}")
    return account, region


@dataclass(frozen=True)
class ConsumerConfig:
    """A consumer with every setting resolved and checked against the service limits."""

    spec: ConsumerSpec
    timeout_seconds: int
    memory_mb: int
    batch_size: int
    batching_window_seconds: int
    max_concurrency: int | None  # None with provisioned pollers
    max_receive_count: int
    lease_margin_seconds: int
    min_pollers: int | None = None
    max_pollers: int | None = None

    @property
    def visibility_timeout_seconds(self) -> int:
        return visibility_timeout_seconds(self.timeout_seconds, self.batching_window_seconds)

    def validate(self) -> ConsumerConfig:
        check_consumer(
            self.spec.id,
            fifo=self.spec.fifo,
            batch_size=self.batch_size,
            batching_window_seconds=self.batching_window_seconds,
        )
        check_scaling(
            f"consumers.{self.spec.id}",
            max_concurrency=self.max_concurrency,
            min_pollers=self.min_pollers,
            max_pollers=self.max_pollers,
        )
        return self


def resolve(spec: ConsumerSpec, settings: Settings) -> ConsumerConfig:
    """Per-consumer context > the registry's own value > the stack-wide setting."""
    fields: dict[str, Any] = {
        "timeout_seconds": spec.timeout_seconds or settings.function_timeout_seconds,
        "memory_mb": spec.memory_mb or settings.memory_mb,
        "batch_size": spec.batch_size or settings.batch_size,
        "batching_window_seconds": (
            spec.batching_window_seconds
            if spec.batching_window_seconds is not None
            else (0 if spec.fifo else settings.batching_window_seconds)
        ),
        "max_concurrency": spec.max_concurrency or settings.max_concurrency,
        "max_receive_count": spec.max_receive_count or settings.max_receive_count,
        "lease_margin_seconds": settings.lease_margin_seconds,
    }
    limits = {
        "timeout_seconds": (1, 900),
        "memory_mb": (128, 10_240),
        "batch_size": (1, 10_000),
        "batching_window_seconds": (0, 300),
        "max_concurrency": (2, 1000),
        "max_receive_count": (1, 1000),
        "lease_margin_seconds": (0, 900),
        "min_pollers": MIN_POLLERS_RANGE,
        "max_pollers": MAX_POLLERS_RANGE,
    }
    overrides = (settings.consumer_overrides or {}).get(spec.id, {})
    for key, value in overrides.items():
        field = OVERRIDE_KEYS[key]
        fields[field] = _int(value, f"consumers.{spec.id}.{key}", *limits[field])
    provisioned = "min_pollers" in fields or "max_pollers" in fields
    if provisioned and not (spec.max_concurrency or "maxConcurrency" in overrides):
        # The stack-wide maxConcurrency is every consumer's default, not this one's choice:
        # pollers given for this consumer replace it. Both given for it is an error (validate).
        fields["max_concurrency"] = None
    return ConsumerConfig(spec=spec, **fields).validate()
