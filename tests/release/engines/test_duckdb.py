"""The DuckDB engine and Ctrl-C: a SIGINT while DuckDB works is a ``KeyboardInterrupt``.

DuckDB's Python client turns a SIGINT during a query into its own error (``RuntimeError:
Query interrupted``, which the engine reported as an unreadable source) or drops it when the
query is ending (issue #28: ``dpgauss reproduce`` went on and exited 0).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

duckdb = pytest.importorskip("duckdb")

from dpgauss.release.engines.duckdb import _interruptible  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")

#: A query of many seconds (unless it is interrupted).
_LONG = "SELECT sum(a * b) FROM range(20000000000) t(a), range(1) u(b)"


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(autouse=True)
def _python_default_sigint() -> Iterator[None]:
    """These tests are about Python's default SIGINT handler; a Spark session of an earlier
    test (the ``spark`` fixture lives for the whole run) installs its own, which
    ``_interruptible`` rightly leaves alone.  Each test runs with the default, then the
    handler it found is put back."""
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_during_a_query_stops_it_as_a_keyboard_interrupt() -> None:
    con = duckdb.connect()
    timer = threading.Timer(0.3, _ctrl_c)
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt), _interruptible(con):
            con.execute(_LONG).fetchall()
    finally:
        timer.cancel()
    assert time.monotonic() - start < 30  # stopped, not run to its end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert con.execute("SELECT 42").fetchall() == [(42,)]  # the connection still works


@pytest.mark.parametrize("then", ["dropped", "an error of its own"])
def test_a_ctrl_c_that_duckdb_drops_or_converts_still_ends_in_keyboard_interrupt(
    then: str,
) -> None:
    con = duckdb.connect()
    with pytest.raises(KeyboardInterrupt), _interruptible(con):
        try:
            _ctrl_c()
            time.sleep(5)  # the handler raises here
        except KeyboardInterrupt:  # what DuckDB does with it
            if then != "dropped":
                raise RuntimeError("Query interrupted") from None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_ctrl_c_nothing_changes() -> None:
    con = duckdb.connect()
    with _interruptible(con):
        assert con.execute("SELECT 1").fetchall() == [(1,)]
    with pytest.raises(duckdb.Error), _interruptible(con):
        con.execute("SELECT * FROM nowhere")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_callers_own_handler_is_left_alone() -> None:
    con = duckdb.connect()
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    try:
        with _interruptible(con):
            _ctrl_c()
            time.sleep(0.2)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)
