"""docs/benchmarks.md: the measured medians and ratios, how they were measured, and the targets."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks import imports
from benchmarks.api import BARE, ApiCase, Clock
from benchmarks.api_handlers import POWERTOOLS_API_KEY
from benchmarks.calls import Case
from benchmarks.cpu import ONE_THREAD
from benchmarks.harness import Results
from benchmarks.memory import BASELINE
from benchmarks.rig import Variant
from benchmarks.stores import BACKENDS, Backend, StoreCase, StoreResults
from benchmarks.targets import CLOSE, Target
from benchmarks.throughput import Arm, ThroughputResult
from benchmarks.walltime import LIMIT_ROUND_TRIPS

# The published figure the throughput row is set against (DBOS, "Benchmarking workflow
# execution scalability on Postgres"): one PostgreSQL server, AWS RDS db.m7i.24xlarge.
DBOS_WORKFLOWS_PER_S = 43_000
DBOS_VCPUS = 96

LAYER, POWERTOOLS = Variant.LAYER, Variant.POWERTOOLS


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _calls(results: Results) -> str:
    by = {(c.variant, c.case): c for c in results.calls}
    rows = []
    for case in Case:
        layer, powertools = by[(LAYER, case)], by[(POWERTOOLS, case)]
        rows.append(
            [
                f"{layer.records} {case} records",
                f"**{layer.per_batch('dynamodb')}**",
                layer.batch_breakdown(),
                f"**{powertools.per_batch('dynamodb')}**",
                powertools.batch_breakdown(),
            ]
        )
    header = ["One batch of", "Layer: DynamoDB", "Layer: all requests", "Powertools: DynamoDB"]
    return _table([*header, "Powertools: all requests"], rows)


def _limit(results: Results) -> str:
    io10 = results.wall_result(10, io_bound=True)
    s, trip = results.settings, results.round_trip_s
    return (
        "The layer's I/O-bound batch of 10 is also held against its limit: the slowest of its "
        f"records' business functions (each run timed, median over the batches: "
        f"{_ms(io10.limit(0.0))} ms) plus {LIMIT_ROUND_TRIPS} round trips, one to acquire the "
        f"batch's keys and one to complete them. A round trip is the injected {s.latency_ms:g} ms "
        f"plus DynamoDB Local's time for such a request sent bare, without the injected latency: "
        f"the mean of the medians of a `BatchExecuteStatement` of 10 `INSERT`s of new records and "
        f"of one of 10 fenced `UPDATE`s completing them, measured at the start of this run "
        f"({_ms(results.batch_round_trip_s)} ms; a warm `GetItem` alone takes "
        f"{_ms(results.dynamodb_round_trip_s)} ms: DynamoDB Local runs a batch's statements one "
        f"after another), so {_ms(trip)} ms. Limit: "
        f"{_ms(io10.limit(trip))} ms; the layer's median batch: {_ms(io10.median(LAYER))} ms, "
        f"**{io10.over_limit(trip):.2f}x** the limit. The speed-up over Powertools has a ceiling "
        f"here for the same reason: Powertools' median batch over the limit is "
        f"{io10.median(POWERTOOLS) / io10.limit(trip):.2f}x, the most any client making these two "
        f"requests could reach on this server."
    )


def _wall(results: Results) -> str:
    rows = [
        [
            w.scenario.label,
            str(len(w.samples[LAYER])),
            _ms(w.median(LAYER)),
            _ms(w.median(POWERTOOLS)),
            f"**{w.speedup:.2f}x**",
            f"{min(w.paired_speedups):.2f}x to {max(w.paired_speedups):.2f}x",
        ]
        for w in results.wall
    ]
    header = ["Batch", "Repetitions", "Layer (ms)", "Powertools (ms)", "Speed-up"]
    header.append("Spread (each repetition's pair)")
    return _table(header, rows)


def _cpu(results: Results) -> str:
    labels = {LAYER.value: LAYER.label, POWERTOOLS.value: POWERTOOLS.label}
    labels[ONE_THREAD] = "layer with concurrency=1 (diagnostic)"
    rows = []
    for cpu in (results.cpu, results.cpu_no_latency):
        if cpu is None:
            continue
        condition = "with the injected latency" if cpu.latency else "no injected latency"
        for arm, samples in cpu.samples.items():
            rows.append(
                [
                    condition,
                    labels[arm],
                    f"{cpu.median(arm) * 1e6:.0f}",
                    ", ".join(f"{s * 1e6:.0f}" for s in samples),
                    "" if arm == POWERTOOLS else f"**{cpu.ratio_of(arm):.2f}**",
                ]
            )
    header = ["Rig", "Consumer", "CPU per record (us, median)", "Samples (us)", "vs Powertools"]
    return _table(header, rows)


def _throughput_table(result: ThroughputResult) -> str:
    rows = []
    for row in result.rows:
        per_cpu = row.per_cpu_second
        share = f"{row.client_cpu_s / row.machine_cpu_s:.0%}" if row.machine_cpu_s else "n/a"
        rows.append(
            [
                str(row.arm),
                f"{row.records:,}",
                str(row.processes),
                f"{row.seconds:.1f}",
                f"**{row.rate:,.0f}**",
                f"{row.rate / result.cores:,.0f}",
                "n/a" if per_cpu is None else f"{per_cpu:,.0f}",
                share,
            ]
        )
    header = ["Consumer and store", "Records", "Processes", "Seconds", "Records/s"]
    header += ["Records/s per core", "Records per busy CPU-second", "Clients' share of the CPU"]
    return _table(header, rows)


def _throughput(results: Results) -> str:
    result = results.throughput
    if result is None:
        return ""
    processes = result.rows[0].processes if result.rows else 0
    records = result.rows[0].records if result.rows else 0
    dbos_per_vcpu = DBOS_WORKFLOWS_PER_S / DBOS_VCPUS
    layer_rows = [r for r in result.rows if r.arm is not Arm.POWERTOOLS]
    best = max(layer_rows, key=lambda r: r.rate) if layer_rows else None
    comparison = ""
    if best is not None:
        per_core = best.rate / result.cores
        comparison = (
            f"Here the best of the layer's rows, {best.arm}, ran {best.rate:,.0f} records/s on "
            f"{result.cores} cores: {per_core:,.0f} per core, "
            f"{per_core / dbos_per_vcpu:.1f}x their figure per vCPU."
        )
    return f"""
## Throughput at saturation

{processes} worker processes at once ({processes / result.cores:g} per core; each a separate
"execution environment" with its own consumer, `benchmarks/throughput_worker.py`) run batches
of 10 new, CPU-trivial records back to back until {records:,} records are done, each row on
its own, without the injected latency: nothing waits but the machine. Each worker
builds its consumer and runs 3 warm-up batches first; then all start together, and the time
runs until the last is done. The layer on PostgreSQL talks to the server directly (no counting
proxy). Busy CPU is the whole machine's over that window (`/proc/stat`: the workers, DynamoDB
Local or PostgreSQL, and anything else that ran), the clients' share is the workers' own CPU
time in it. Every record is checked: its business function ran once, and no record failed.

{_throughput_table(result)}

How this compares with a Postgres-backed durable-execution engine: DBOS reports about
{DBOS_WORKFLOWS_PER_S:,} workflows/s on one PostgreSQL server with {DBOS_VCPUS} vCPUs (AWS RDS
db.m7i.24xlarge), about {dbos_per_vcpu:,.0f} workflows/s per database vCPU. {comparison} The two
are not like for like. The work differs: a DBOS workflow writes its input, its outcome and each
step's outcome, while a record here is one acquire and one completion, batched ten keys to a
request. The setting differs: their server is durable (fsync on, provisioned io2 storage) and
serves clients on other machines, so its vCPUs are the database's alone; here the servers are
local (DynamoDB Local keeps its tables in memory, PostgreSQL runs with fsync off, over
loopback) and share this machine's {result.cores} cores with the client processes, which use
the share of the CPU shown above. The hardware differs too. Read it as an order of magnitude
only.
"""


def _api_calls(results: Results) -> str:
    rows = []
    for case in ApiCase:
        layer = results.api.counts(LAYER, case)
        powertools = results.api.counts(POWERTOOLS, case)
        rows.append(
            [
                str(case),
                f"**{layer.per_request():g}**",
                layer.breakdown(),
                f"**{powertools.per_request():g}**",
                powertools.breakdown(),
            ]
        )
    header = ["Request is", "Layer: DynamoDB", "Layer: all calls", "Powertools: DynamoDB"]
    return _table([*header, "Powertools: all calls"], rows)


def _api_timings(results: Results) -> str:
    t = results.api.timings
    units = {Clock.CPU: ("CPU (us)", 1e6, "{:.0f}"), Clock.WALL: ("wall (ms)", 1e3, "{:.2f}")}

    def show(clock: Clock, seconds: float) -> str:
        _, scale, fmt = units[clock]
        return fmt.format(seconds * scale)

    rows = []
    for case in ApiCase:
        for clock in Clock:
            layer = t.overheads(clock, case, LAYER)
            powertools = t.overheads(clock, case, POWERTOOLS)
            paired = [a / b for a, b in zip(layer, powertools, strict=True)]
            rows.append(
                [
                    str(case),
                    units[clock][0],
                    show(clock, t.median(clock, case, BARE)),
                    show(clock, t.overhead(clock, case, LAYER)),
                    show(clock, t.overhead(clock, case, POWERTOOLS)),
                    f"**{t.ratio(clock, case):.2f}**",
                    f"{min(paired):.2f} to {max(paired):.2f}",
                ]
            )
    header = ["Request", "Clock", "Handler alone", "Layer overhead", "Powertools overhead"]
    header += ["Layer / Powertools", "Spread (each sample's ratio)"]
    return _table(header, rows)


def _store_trips(stores: StoreResults) -> str:
    rows = []
    for case in StoreCase:
        dynamodb = stores.trips(Backend.DYNAMODB, case)
        postgres = stores.trips(Backend.POSTGRES, case)
        rows.append(
            [
                f"{dynamodb.records} records, {case}",
                f"**{dynamodb.per_batch()}**",
                dynamodb.batch_breakdown(),
                f"**{postgres.per_batch()}**",
                postgres.batch_breakdown(),
            ]
        )
    header = ["One batch of", "DynamoDB: round trips", "DynamoDB: API calls"]
    return _table([*header, "PostgreSQL: round trips", "PostgreSQL: statements"], rows)


def _store_latency(stores: StoreResults) -> str:
    rows = []
    for case in StoreCase:
        cells = [str(case)]
        for backend in BACKENDS:
            samples = stores.latency[(backend, case)]
            cells.append(
                f"{_ms(stores.median(backend, case))} ({_ms(min(samples))} to {_ms(max(samples))})"
            )
        ratio = stores.median(Backend.POSTGRES, case) / stores.median(Backend.DYNAMODB, case)
        cells.append(f"**{ratio:.2f}**")
        rows.append(cells)
    header = ["Record is", "DynamoDB (ms, median; range)", "PostgreSQL (ms, median; range)"]
    return _table([*header, "PostgreSQL / DynamoDB"], rows)


def _stores(results: Results) -> str:
    stores = results.stores
    if stores is None:
        return ""
    s = results.settings
    opened = (
        "no connection was opened"
        if not stores.connections_opened
        else f"{stores.connections_opened} connection(s) were opened"
    )
    return f"""
## The store: DynamoDB or PostgreSQL

The layer's consumer, `@sqs_consumer(key="orderId")`, on each of its stores: `table_name=`
(DynamoDB Local) or `dsn=` (a local PostgreSQL server), the same business function, side by
side in one run. A new key is acquired and completed; a duplicate is the same batch delivered
again; "new key + effect" also writes one ledger entry with `exactly_once.ledger.record_effect`:
on DynamoDB a `TransactWriteItems` fenced on the lock, on PostgreSQL an `INSERT` in
`ctx.transaction`, which commits with the fenced completion. Each path is checked: the business
function runs once per new key and never for a duplicate, and no record fails; and the effect
ledger is counted before and after the effect batch, which must leave one committed entry per
record (a target).

Round trips: for DynamoDB, API calls (the botocore hook above; each is one HTTP request). For
PostgreSQL, client flights on the wire, counted by a loopback TCP proxy in front of the server
(`benchmarks/pg_proxy.py`): a flight opens with the client's first byte while nothing is
outstanding and closes when the server has answered each of its Syncs and Queries with
ReadyForQuery, and is named by the statements it carries. So it also counts what the driver
sends on its own: psycopg's `BEGIN` before the first statement of a transaction, and a
statement it prepares. Connection start-ups are not counted (nor are DynamoDB's TCP
connections). Before counting, the PostgreSQL consumers ran until a whole round opened no
connection and prepared no statement ({stores.warmup_rounds} rounds); while counting and
timing, {opened}. One batch of {stores.records} records per row.

{_store_trips(stores)}

Latency: one record per invocation (a batch of 1), wall time of the whole invocation, both
stores interleaved case by case with the one that goes first alternating,
{stores.repetitions} repetitions per case. Each round trip pays the same injected
{s.latency_ms:g} ms on both: the botocore `before-send` sleep for DynamoDB, a sleep in the
proxy once per flight for PostgreSQL. The rest is each local server's own time per round trip
(see Setup: they differ, and neither is what a deployment in a region would see) and the
layer's own work.

{_store_latency(stores)}

{_effect_cost(stores)}
"""


def _effect_cost(stores: StoreResults) -> str:
    extra = {
        b: stores.trips(b, StoreCase.EFFECT).per_batch()
        - stores.trips(b, StoreCase.NEW).per_batch()
        for b in BACKENDS
    }
    records = stores.trips(Backend.DYNAMODB, StoreCase.EFFECT).records
    return (
        f"The effect adds {extra[Backend.DYNAMODB]} round trip(s) to a batch of {records} on "
        f"DynamoDB and {extra[Backend.POSTGRES]} on PostgreSQL. On DynamoDB it is each record's "
        "`TransactWriteItems` (the completions stay in the batch's one request); on PostgreSQL "
        "each record's `BEGIN` (psycopg sends it for the transaction) and `INSERT`, and its "
        "completion, which leaves the batch: an `UPDATE` inside the record's own transaction, "
        "sent with its `COMMIT` in one round trip, so the effect commits with it."
    )


def _imports(results: Results) -> str:
    r = results.imports
    rows = [
        [
            case,
            _ms(r.median_cpu(case)),
            f"{r.cpu_over_bare(case) * 1000:+.1f}",
            _ms(r.median_wall(case)),
            f"{r.wall_over_bare(case) * 1000:+.1f}",
            _ms(r.fastest_wall(case)),
            f"{(r.fastest_wall(case) - r.fastest_wall(imports.BARE)) * 1000:+.1f}",
        ]
        for case in r.cases
    ]
    header = ["What is imported", "CPU (ms)", "vs bare boto3", "Wall (ms)", "vs bare boto3"]
    header += ["Fastest wall (ms)", "vs bare boto3"]
    return _table(header, rows)


def _compiled(results: Results) -> str:
    counts = results.imports.compiled
    return ", ".join(f"{n} for {case.split(':', 1)[-1].strip()}" for case, n in counts.items())


def _room(path: str) -> str:
    """exactly_once/stores/postgres/ -> stores/postgres"""
    return path.removeprefix("exactly_once/").rstrip("/")


def _layer_table(layer: imports.LayerImportResult, cases: Sequence[str]) -> str:
    rows = []
    for case in cases:
        rooms = layer.room_modules(case)
        rows.append(
            [
                case,
                str(layer.modules[case]),
                ", ".join(f"{_room(room)} {n}" for room, n in rooms.items()) or "none",
                _ms(layer.median_cpu(case)),
                _ms(layer.median_wall(case)),
            ]
        )
    header = ["What is imported", "Layer modules", "Of which from a lazy room"]
    return _table([*header, "CPU (ms)", "Wall (ms)"], rows)


def _layer_imports(results: Results) -> str:
    layer = results.imports.layer
    if layer is None:
        return "The built layers were not measured in this run (its settings leave them out)."
    cases = [c for c in (imports.LAYER_SOURCE, imports.LAYER_COMPILED) if c in layer.cpu]
    table = _layer_table(layer, cases)
    if len(cases) < 2:
        return table
    return (
        f"{table}\n\nThe compiled layer saves {_ms(layer.saving_cpu)} ms of CPU "
        f"({_ms(layer.saving_wall)} ms wall) per cold start: compiled / source only = "
        f"{layer.ratio:.2f} (CPU)."
    )


def _lazy_rooms(results: Results) -> str:
    layer = results.imports.layer
    if layer is None or not layer.has_rooms:
        return "The lazy rooms were not measured in this run (its settings leave them out)."
    table = _layer_table(layer, [imports.LAYER_COMPILED, imports.LAYER_ALL_ROOMS])
    return (
        f"{table}\n\nThe lazy rooms save a queue consumer {layer.rooms_saving_modules} layer "
        f"modules and {_ms(layer.rooms_saving_cpu)} ms of CPU ({_ms(layer.rooms_saving_wall)} ms "
        f"wall) per cold start: consumer / consumer + the SNS and HTTP rooms = "
        f"{layer.rooms_ratio:.2f} (CPU)."
    )


def _memory(results: Results) -> str:
    m = results.memory
    labels = {BASELINE: "baseline: boto3 + DynamoDB client + one call"}
    labels |= {v.value: v.label for v in (LAYER, POWERTOOLS)}
    rows = [
        [labels[name], f"{m.median(name):.1f}", f"{m.over_baseline(name):+.1f}"]
        for name in m.samples
    ]
    return _table(["Process", "Peak RSS (MiB)", "vs baseline (MiB)"], rows)


def _targets(targets: list[Target]) -> str:
    rows = [
        [
            t.name,
            t.goal,
            t.measured,
            ("pass" if t.passed else "**MISSED**") + (" (close)" if t.close else ""),
        ]
        for t in targets
    ]
    table = _table(["Target", "Goal", "Measured", "Result"], rows)
    if any(t.close for t in targets):
        table += (
            f"\n\n(close): within {CLOSE:.0%} of the threshold. Such a result is within this "
            "machine's run-to-run variation and can flip on the next run."
        )
    return table


LOADED = """
> **Measured on a loaded machine** (1-minute load average above 1 at the start or the end, see
> Setup): written beside the committed report instead of over it. Run `make bench` again when
> the machine is quiet.
"""


def render(
    results: Results, targets: list[Target], chart_name: str, *, loaded: bool = False
) -> str:
    s = results.settings
    env = _table(["", ""], [[k, v] for k, v in results.environment.items()])
    verdict = "All targets met." if all(t.passed for t in targets) else "**Targets missed.**"
    return f"""# Benchmarks: this layer vs Powertools
{LOADED if loaded else ""}
Generated by `make bench` (`python -m benchmarks.run --full`); do not edit by hand. The same SQS
batches go through two consumers in one process, interleaved (layer, Powertools, layer, ...),
against the same DynamoDB Local:

- **layer**: `@sqs_consumer(key="orderId")` with its defaults (10 records at a time);
- **Powertools**: `BatchProcessor(event_type=EventType.SQS)` + `process_partial_response`, the
  record handler wrapped in `idempotent_function`, with `DynamoDBPersistenceLayer` on its own
  table (partition key `id`, TTL `expiration`) and the same business id as its key:
  `event_key_jmespath="powertools_json(body).orderId"`.

The HTTP API section compares `@idempotent_api` with Powertools' `@idempotent` the same way, on
the same API Gateway requests. The store section compares the layer on DynamoDB with the layer
on PostgreSQL: round trips and latency per record.

Both run the same business function, and every DynamoDB (and SQS) request of either is delayed
by the same {s.latency_ms:g} ms sleep in a botocore `before-send` hook, on top of DynamoDB
Local's own time, to model an in-region round trip. Figures are medians.

![Benchmark charts]({chart_name})

## Targets

{_targets(targets)}

{verdict}

## Setup

{env}

## API requests per batch

Counted with a botocore `before-call` hook (one per API call, retries excluded), for one batch
(one invocation) of each kind. New records are fresh business ids; duplicates are the same
batch delivered again; in-progress records are held by other consumer instances, each blocked
inside the business function. Each path is checked, not assumed: the business function runs
once per new record, never for a duplicate, and an in-progress record is reported in
`batchItemFailures` so SQS delivers it again.

{_calls(results)}

The layer's SQS requests for in-progress records (`ChangeMessageVisibility`, one per record)
hide each message until its holder's lease ends, so the redelivery does not come back (and burn
a receive) while the holder still works; the target counts them.

## Wall time per batch

New records only, so every record locks, runs and completes. The I/O-bound business function
sleeps {s.io_ms:g} ms (a downstream call); the CPU-trivial one returns at once.

{_wall(results)}

{_limit(results)}

## CPU per record

`time.process_time()` over {results.cpu.records_per_sample} new records per sample (trivial
business function), the consumers alternating batch by batch, {s.cpu_repetitions} samples
each. It counts every thread of the benchmark process: the layer's worker threads and botocore's
request building, signing and response parsing, which is most of it. It does not count DynamoDB
Local (a separate Java process) nor the injected latency (a sleep). The target is checked on
the rig as specified, with the latency. The other rows are there because the ratio moves with
the conditions. Without the latency nothing waits, so the layer's ten threads are always
runnable and contend for the GIL; that ratio is a target of its own. The layer with
concurrency=1 (a diagnostic, not its default, when measured) shows its per-record work without
the thread pool. botocore's request building, signing and response parsing is most of either
consumer's CPU, so the requests per batch above drive these ratios.

{_cpu(results)}
{_throughput(results)}
## HTTP API: calls and overhead per request

The same API Gateway requests (HTTP API payload 2.0, a `POST` with an `Idempotency-Key` header
and a JSON body, from a caller an IAM authorizer authenticated) go through two handlers that do
the same trivial work (parse the body, run the business function, answer 201 with JSON):

- **layer**: `@idempotent_api(table_name=..., scope=..., dynamodb_client=...)` on
  `handle(request, ctx)`, its defaults otherwise: the key from the header, scoped to the
  caller's IAM ARN, the request fingerprinted (method, path, query, body);
- **Powertools**: `@idempotent` on `handler(event, context)`, `DynamoDBPersistenceLayer` on
  its table, keyed on the same (caller, key) pair:
  `event_key_jmespath='{POWERTOOLS_API_KEY}'`.

A first request carries a key never seen; a replay is the same event again (a client's
retry). Each is checked: the handler runs once per key, and a replay answers 201 with the
first response's body without running it.

{_api_calls(results)}

Overhead is each handler's time per request minus the same handler undecorated's, measured
in the same loop: per key every handler answers its first request, then every handler its
replay, the handler that goes first rotating from key to key;
{results.api.timings.requests_per_sample} keys per sample, {s.api_repetitions} samples, median.
CPU is `time.process_time()` (the handlers run on the calling thread; botocore's request
building, signing and response parsing is most of it). Wall is `time.perf_counter()`: it also
holds the injected {s.latency_ms:g} ms per DynamoDB request and DynamoDB Local's own time for
each, which neither library's code spends. The target is on the CPU ratio.

{_api_timings(results)}

The layer's overhead includes what Powertools does not do by default: it fingerprints the
request (a reused key with another body is answered 422), reads the caller from the
authorizer, logs one structured line and emits one EMF metrics document per request.
{_stores(results)}
## Cold-start imports

Each row is a fresh `python -c` process (interpreter start-up excluded),
{results.imports.runs} interleaved runs, median. Every row reads bytecode, the layer's and
boto3's alike: an untimed first run of each row writes whatever `.pyc` is stale (the layer's
files, run from its source tree, change more often than boto3's installed ones); then
`python -v` checks that every module the row loads, from the layer, site-packages and the
standard library, comes from a `.pyc` ({_compiled(results)}; the benchmark stops otherwise);
the timed runs write none (`PYTHONDONTWRITEBYTECODE=1`). The layer imports boto3 lazily, so
"consumer module" alone hides the cost the first invocation pays; "consumer module + import
boto3" is the honest comparison with a bare `import boto3`. Powertools' module imports boto3 and
creates its DynamoDB client at import, so compare it with "bare boto3 + DynamoDB client" and
with the layer's "... + its DynamoDB client" row. The import target is checked on CPU time:
imports are CPU-bound once files are cached, and CPU time does not swell when other processes
share the machine, while wall time does. Both are shown.

{_imports(results)}

### The built layer: compiled against source only

Lambda mounts a layer read-only at /opt, so a layer without `.pyc` files compiles every module
it imports on every cold start. Each row imports the consumer module with the layer's own
interpreter (Python {results.imports.layer.python if results.imports.layer else "3.13"}) from
the folder `layer_build` produced, with `PYTHONDONTWRITEBYTECODE=1` as on /opt: once built
source only (`layerBytecode=false`), once compiled (the default: `.pyc` files compiled by that
interpreter, `unchecked-hash`). "Layer modules" counts the modules loaded from the layer (all
from `.py` in the first row, all from `.pyc` in the second, checked with `python -v`).
Same interleaving and median as above; standard-library modules come from the interpreter's
own bytecode in both rows, so the difference is the layer's alone.

{_layer_imports(results)}

### The built layer: what the lazy rooms save a queue consumer

The consumer module imports `exactly_once`, which loads the core, the SQS room and the DynamoDB
store; the SNS and HTTP rooms and the PostgreSQL store load only when something uses them. The
second row imports, from the same compiled layer and in the same interleaved runs, the consumer
module plus `{"`, `".join(imports.OTHER_ROOMS)}`: what every cold start would load were those
rooms imported eagerly. The PostgreSQL store is not in it: it imports psycopg when imported,
and this layer (a DynamoDB consumer's) carries none. "Of which from a lazy room" is read from
the same `python -v` listing: every consumer row is checked to load nothing from
exactly_once/http/, exactly_once/sns/ or exactly_once/stores/postgres/ (the benchmark stops
rather than report it if one does), and the second row to load the rooms it imports.

{_lazy_rooms(results)}

## Peak memory

Peak resident set size (VmHWM) of a fresh process that imports the consumer module and runs
{results.memory.batches} batches of 10 new records against DynamoDB Local.
(`ru_maxrss` is not used: on Linux it survives `exec`, so a child reports its parent's peak.)

{_memory(results)}

## Caveats

- Everything runs on one machine: DynamoDB Local (Java) shares the cores with the consumers.
  With ten requests in flight each takes several times longer than alone (see Setup); that
  includes the server's time and the client threads' wait for the GIL. The layer sends ten at a
  time and Powertools one, so the server's share of that slowdown, which a real DynamoDB
  endpoint would not add, falls on the layer's numbers only.
- The SQS call of the layer's in-progress path goes to a local moto server.
- The layer does more than Powertools' defaults: it fingerprints each payload (a reused key
  with a different body is caught), and logs one structured line and emits one EMF metrics
  document per batch. All of that is inside its numbers.
- Powertools' `BatchProcessor` is built with `raise_on_entire_batch_failure=False`. That only
  changes the in-progress probe (an all-failed batch), which would otherwise raise instead of
  returning `batchItemFailures`.
- The batch of 100 runs 10 records at a time in the layer (its default concurrency) and one at
  a time in Powertools' synchronous `BatchProcessor`.
- Wall times depend on the machine and on whatever else runs on it (see the load average
  above); the ratios, measured side by side, are what the targets check.
"""
