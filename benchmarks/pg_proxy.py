"""A loopback TCP proxy in front of PostgreSQL that counts round trips and adds network latency.

Why a proxy rather than counting `execute` calls or reading libpq's trace: a round trip is
what crosses the network, and the driver makes some the code never spells out (psycopg sends
BEGIN before the first statement of a transaction, and a Parse of its own when it prepares a
statement). Sitting on the wire, the proxy sees each of them, whoever sends it, on every
connection of the store's pool, without touching the library or the driver.

How it counts (pg_wire.py): a flight opens with the client's first byte while no request is
outstanding and closes when the server has answered each of its Syncs and Queries with
ReadyForQuery; every closed flight is one round trip, named by its statements. Start-up
flights (authentication) are counted apart, as connections opened: the DynamoDB counter does
not count TCP connections either.

Latency: before it forwards the first byte of a flight, the proxy sleeps `latency_s`, once per
round trip, as the botocore hook sleeps once per DynamoDB request; connections overlap their
sleeps as real network waits would. The proxy's own forwarding (a Python thread per direction)
adds a little on top, which the report states.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from benchmarks.pg_wire import STARTUP, TERMINATE, ClientStream, Flight, ServerStream

CHUNK = 65536


@dataclass
class RoundTripCounter:
    """Round trips by flight label, over every connection through one proxy."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counts: Counter[str] = field(default_factory=Counter)

    def add(self, label: str) -> None:
        with self._lock:
            self._counts[label] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, int]:
        """Round trips by label; STARTUP counts connections opened, TERMINATE closed."""
        with self._lock:
            return dict(self._counts)


class _Connection:
    """One client connection and its upstream, pumped by two threads."""

    def __init__(
        self, client: socket.socket, upstream: socket.socket, proxy: RoundTripProxy
    ) -> None:
        self.client, self.upstream, self.proxy = client, upstream, proxy
        self.lock = threading.Lock()
        self.client_stream = ClientStream()
        self.server_stream = ServerStream(self.client_stream)
        self.flight: Flight | None = None
        self.started = False  # the first ReadyForQuery went by: start-up is over

    def start(self) -> None:
        for target in (self._upward, self._downward):
            threading.Thread(target=target, daemon=True, name="pg-proxy").start()

    def _upward(self) -> None:
        try:
            while data := self.client.recv(CHUNK):
                with self.lock:
                    opens = self.flight is None
                    if opens:
                        self.flight = Flight()
                    self.client_stream.feed(data, self.flight)  # type: ignore[arg-type]
                    if self.flight is not None and self.flight.terminates:
                        self._close_flight(TERMINATE)
                if opens and self.proxy.latency_s > 0:
                    time.sleep(self.proxy.latency_s)  # once per round trip
                self.upstream.sendall(data)
        except OSError:
            pass
        finally:
            self._shutdown()

    def _downward(self) -> None:
        try:
            while data := self.upstream.recv(CHUNK):
                with self.lock:
                    ready = self.server_stream.feed(data)
                    if ready and self.flight is not None:
                        self.flight.outstanding -= ready
                        if self.flight.outstanding <= 0:
                            self._close_flight(None if self.started else STARTUP)
                            self.started = True
                self.client.sendall(data)
        except OSError:
            pass
        finally:
            self._shutdown()

    def _close_flight(self, label: str | None) -> None:
        flight, self.flight = self.flight, None
        if flight is not None:
            self.proxy.counter.add(label or flight.label)

    def _shutdown(self) -> None:
        for sock in (self.client, self.upstream):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class RoundTripProxy:
    """`with RoundTripProxy(host, port, latency_s) as proxy:` and connect to `proxy.port`."""

    def __init__(self, host: str, port: int, latency_s: float = 0.0) -> None:
        self.target = (host, port)
        self.latency_s = latency_s
        self.counter = RoundTripCounter()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True, name="pg-proxy")

    def __enter__(self) -> RoundTripProxy:
        self._accepting.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dsn(self, dbname: str, user: str) -> str:
        """A conninfo through the proxy. No TLS or GSS negotiation: the wire stays readable."""
        return (
            f"host=127.0.0.1 port={self.port} dbname={dbname} user={user} "
            "sslmode=disable gssencmode=disable"
        )

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self.target)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, upstream]
            _Connection(client, upstream, self).start()

    def close(self) -> None:
        self._server.close()
        for sock in self._sockets:
            with suppress(OSError):
                sock.close()

    @contextmanager
    def counting(self) -> Iterator[RoundTripCounter]:
        """The counter, reset on entry: what the block's clients send is what it holds."""
        self.counter.reset()
        yield self.counter
