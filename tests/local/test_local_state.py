"""The state folder: one serving process at a time, stale state cleaned, stats summed."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly_once_ops.local_state import (
    STATE_DIR_ENV,
    AlreadyUp,
    StateLock,
    StatePaths,
    UpState,
    UpStats,
    default_state_dir,
)

ROOT = Path(__file__).resolve().parents[2]


def state(pid: int) -> UpState:
    return UpState(
        pid=pid,
        stack="S",
        region="us-east-1",
        endpoint_url="http://localhost:1",
        dynamodb_endpoint_url="http://127.0.0.1:2",
        environment={"AWS_ENDPOINT_URL": "http://localhost:1"},
        outputs={"OrdersQueueUrl": "q"},
        logs={},
        workers=2,
        started_at="2030-01-01T00:00:00+00:00",
    )


def test_the_lock_admits_one_server_and_names_it(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    assert paths.holder() is None
    with StateLock(paths):
        holder = paths.holder()
        assert holder is not None
        assert holder > 0
        with (
            pytest.raises(AlreadyUp, match=rf"already up \(pid {holder}\)"),
            StateLock(paths, retry_s=0.1),
        ):
            pass
        assert paths.running() is None  # locked, but not ready: no state written yet
        paths.write_state(state(holder))
        assert paths.running() == state(holder)
        assert paths.clean_stale() is None  # a live server's state is not stale
        assert paths.state.exists()
    assert paths.holder() is None
    assert paths.running() is None


def test_state_left_by_a_dead_server_is_cleaned(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.write_state(state(999_999))
    paths.write_stats(UpStats(updated_at="now"))
    assert paths.running() is None
    assert paths.clean_stale() == state(999_999)
    assert not paths.state.exists()
    assert not paths.stats.exists()


def test_stats_round_trip_and_sum_over_consumers(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.write_stats(
        UpStats(
            updated_at="t",
            consumers={"Orders": {"processed": 3, "duplicate": 1}, "Payments": {"processed": 2}},
        )
    )
    stats = paths.read_stats()
    assert stats is not None
    assert stats.count("orders", "processed") == 3
    assert stats.count("payments", "duplicate") == 0
    assert stats.totals() == {"processed": 5, "duplicate": 1}


def test_the_state_folder_is_the_variable_or_the_checkouts_dot_local(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    assert default_state_dir() == tmp_path
    monkeypatch.delenv(STATE_DIR_ENV)
    assert default_state_dir() == ROOT / ".local"


def test_a_dead_servers_assemblies_go_with_its_state(tmp_path: Path) -> None:
    """The served stack's functions run from its cloud assembly under the state folder; a
    server killed before it could remove it leaves it behind, and the next `down` or `up`
    (clean_stale) removes it. A live server's is kept."""
    paths = StatePaths(tmp_path)
    code = paths.assemblies / "cdk.out.local-x" / "assembly" / "asset.1" / "handler.py"
    code.parent.mkdir(parents=True)
    code.write_text("def handle(event, context): ...\n")
    with StateLock(paths):
        assert paths.clean_stale() is None
        assert code.exists()  # still served
    paths.write_state(state(999_999))
    assert paths.clean_stale() == state(999_999)
    assert not paths.assemblies.exists()


def test_the_state_folder_is_beside_the_nearest_cdk_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user's own app keeps its local stack's state beside its cdk.json, found from any
    folder below it, as the CDK CLI finds the app; without one it is the checkout's."""
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    app = tmp_path / "svc"
    (app / "functions" / "orders").mkdir(parents=True)
    (app / "cdk.json").write_text('{"app": "python app.py"}')
    assert default_state_dir(app) == app / ".local"
    assert default_state_dir(app / "functions" / "orders") == app / ".local"
    assert default_state_dir(tmp_path) == ROOT / ".local"
