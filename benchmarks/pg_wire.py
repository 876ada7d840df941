"""Just enough of the PostgreSQL wire protocol (v3) to count and name round trips.

A round trip is one client flight: the messages a client sends before it waits for the
server. In the protocol that wait ends with ReadyForQuery ('Z'), the server's answer to each
Sync ('S', closing an extended-protocol exchange: Parse/Bind/Describe/Execute) or Query ('Q',
a simple query such as psycopg's BEGIN and COMMIT). So a flight opens with the client's first
byte while nothing is outstanding and closes when every Sync or Query sent in it has had its
'Z'; a Terminate ('X') alone is a flight with no reply and is no round trip. Flights before
the first 'Z' are the connection's start-up (authentication), counted apart.

Each flight is named by the statement it runs, so a count can say *which* round trips a record
costs: the SQL comes from its Parse or Query message, or for a Bind of a prepared statement
from the Parse that prepared it earlier on the same connection (psycopg prepares a statement
after a few executions; that Parse-only flight is named "prepare ...").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
STARTUP = "start-up"
TERMINATE = "terminate"


def statement_label(sql: str) -> str:
    """A short name for one of the store's statements (or the first keyword of another)."""
    text = " ".join(sql.split())
    if text.startswith("SET LOCAL statement_timeout"):  # the completion's own bound, then it
        text = text.split(";", 1)[-1].strip()
    for prefix, label in (
        ("WITH acquired", "acquire"),
        ("WITH written", "fenced write"),
        (
            "WITH done AS (UPDATE exactly_once.records SET status = 'COMPLETED'",
            "completion + COMMIT",
        ),
        ("INSERT INTO exactly_once.ledger", "effect INSERT"),
    ):
        if text.startswith(prefix):
            return label
    return text.split(" ", 1)[0].rstrip(";").upper() if text else "empty"  # "BEGIN; SET LOCAL …"


def _cstring(body: bytes, start: int) -> tuple[str, int]:
    end = body.index(b"\0", start)
    return body[start:end].decode("utf-8", "replace"), end + 1


@dataclass
class Flight:
    """One client flight: the statements it ran, and how many replies it waits for."""

    statements: list[str] = field(default_factory=list)
    prepared: list[str] = field(default_factory=list)  # Parse of a named statement, no Bind
    outstanding: int = 0
    executes: bool = False
    terminates: bool = False

    @property
    def label(self) -> str:
        if self.statements:
            return " + ".join(self.statements)
        if self.prepared:
            return "prepare " + " + ".join(self.prepared)
        return TERMINATE if self.terminates else "other"


class ClientStream:
    """Parses what a client sends: start-up messages first, then typed messages into flights."""

    def __init__(self) -> None:
        self._buffer = b""
        self._started = False  # the StartupMessage went by: typed messages from now on
        self.ssl_answer_pending = False  # the server answers SSLRequest with one untyped byte
        self._named: dict[str, str] = {}  # prepared statement name -> its label
        self._unnamed = ""  # the label of the last unnamed Parse

    def feed(self, data: bytes, flight: Flight) -> None:
        self._buffer += data
        while True:
            if not self._started:
                if len(self._buffer) < 8:
                    return
                length, code = struct.unpack("!ii", self._buffer[:8])
                if len(self._buffer) < length:
                    return
                self._buffer = self._buffer[length:]
                if code in (SSL_REQUEST, GSSENC_REQUEST):
                    self.ssl_answer_pending = True
                elif code != CANCEL_REQUEST:
                    self._started = True
                    flight.outstanding += 1  # answered by the first ReadyForQuery
                continue
            if len(self._buffer) < 5:
                return
            kind = self._buffer[:1]
            (length,) = struct.unpack("!i", self._buffer[1:5])
            if len(self._buffer) < 1 + length:
                return
            body = self._buffer[5 : 1 + length]
            self._buffer = self._buffer[1 + length :]
            self._message(kind, body, flight)

    def _message(self, kind: bytes, body: bytes, flight: Flight) -> None:
        if kind == b"Q":
            sql, _ = _cstring(body, 0)
            flight.statements.append(statement_label(sql))
            flight.outstanding += 1
        elif kind == b"P":
            name, at = _cstring(body, 0)
            sql, _ = _cstring(body, at)
            label = statement_label(sql)
            if name:
                self._named[name] = label
                flight.prepared.append(label)
            else:
                self._unnamed = label
        elif kind == b"B":
            _, at = _cstring(body, 0)
            name, _ = _cstring(body, at)
            flight.statements.append(self._named.get(name, "?") if name else self._unnamed)
            flight.executes = True
        elif kind == b"S":
            flight.outstanding += 1
        elif kind == b"X":
            flight.terminates = True


class ServerStream:
    """Counts the ReadyForQuery messages in what the server sends."""

    def __init__(self, client: ClientStream) -> None:
        self._client = client
        self._buffer = b""

    def feed(self, data: bytes) -> int:
        """How many ReadyForQuery messages `data` completed."""
        self._buffer += data
        ready = 0
        while True:
            if self._client.ssl_answer_pending:
                if not self._buffer:
                    return ready
                self._buffer = self._buffer[1:]  # 'N' (or 'S', 'G': then it is encrypted)
                self._client.ssl_answer_pending = False
                continue
            if len(self._buffer) < 5:
                return ready
            (length,) = struct.unpack("!i", self._buffer[1:5])
            if len(self._buffer) < 1 + length:
                return ready
            ready += self._buffer[:1] == b"Z"
            self._buffer = self._buffer[1 + length :]
