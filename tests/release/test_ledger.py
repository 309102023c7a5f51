"""The budget ledger: exact accounting, atomic charges, concurrency, crashes, foreign files."""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import pytest

from dpgauss.cli.budget import LEDGER_ENV, add_budget_parser
from dpgauss.privacy import gaussian_epsilon, gdp_epsilon, gdp_mu
from dpgauss.privacy._rounding import mu_up_exact
from dpgauss.privacy.accounting import GaussianAccountant, plan_equal
from dpgauss.release import (
    BudgetExceeded,
    BudgetStatus,
    Ledger,
    LedgerError,
    LedgerFormatError,
    UnknownDatasetError,
)
from dpgauss.release import ledger as ledger_module

SRC = Path(__file__).resolve().parents[2] / "src"
EPS, DELTA = 1.0, 1e-6
MU_B = gdp_mu(EPS, DELTA)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "budget.ledger"


@pytest.fixture
def ledger(path: Path):
    with Ledger(path) as led:
        led.create_budget("taxi", EPS, DELTA)
        yield led


def _exact_sum_squares(mus) -> Fraction:
    return sum((Fraction(m) ** 2 for m in mus), Fraction(0))


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def _spawn(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )


# ----------------------------------------------------------------------------- basics


def test_create_charge_remaining(ledger: Ledger):
    status = ledger.remaining("taxi")
    assert isinstance(status, BudgetStatus)
    assert (status.epsilon, status.delta, status.charges) == (EPS, DELTA, 0)
    assert status.mu_budget == MU_B
    assert status.mu_spent == 0.0 and status.epsilon_spent == 0.0
    assert status.mu_remaining == MU_B
    assert status.epsilon_remaining == pytest.approx(EPS, rel=1e-12)

    entry = ledger.charge("taxi", 10.0, 1.0, "counts")
    assert (entry.sigma, entry.sensitivity, entry.mu, entry.label) == (10.0, 1.0, 0.1, "counts")
    entry2 = ledger.charge("taxi", mu=0.05, label="discrete")
    assert (entry2.sigma, entry2.sensitivity, entry2.mu) == (None, None, 0.05)
    assert entry2.id > entry.id

    status = ledger.remaining("taxi")
    assert status.charges == 2
    acc = GaussianAccountant()
    acc.add_mu(0.1)
    acc.add_mu(0.05)
    assert status.mu_spent == acc.mu
    assert status.epsilon_spent == acc.epsilon(DELTA)
    assert status.mu_spent == pytest.approx(math.sqrt(0.0125), rel=1e-14)
    left = Fraction(MU_B) ** 2 - _exact_sum_squares([0.1, 0.05])
    assert Fraction(status.mu_remaining) ** 2 <= left  # rounded down ...
    assert Fraction(math.nextafter(status.mu_remaining, 1.0)) ** 2 > left  # ... by < 1 ulp
    assert status.epsilon_remaining == gdp_epsilon(status.mu_remaining, DELTA)
    assert [e.label for e in ledger.charges("taxi")] == ["counts", "discrete"]
    assert ledger.charges("taxi")[0] == entry
    assert ledger.datasets() == ["taxi"]


def test_persists_across_reopen(path: Path):
    with Ledger(path) as led:
        led.create_budget("a", 2.0, 1e-5)
        led.charge("a", 4.0, 1.0, "x")
    with Ledger(path, create=False) as led:
        status = led.remaining("a")
        assert (status.epsilon, status.delta, status.charges) == (2.0, 1e-5, 1)
        assert status.mu_budget == gdp_mu(2.0, 1e-5)
        led.check()


def test_budgets_are_per_dataset(ledger: Ledger):
    ledger.create_budget("other", 0.5, 1e-8)
    ledger.charge("taxi", mu=MU_B)  # uses all of taxi's budget
    assert ledger.remaining("other").charges == 0
    ledger.charge("other", 100.0, 1.0)
    with pytest.raises(BudgetExceeded):
        ledger.charge("taxi", mu=1e-9)
    assert ledger.datasets() == ["other", "taxi"]


def test_create_budget_refuses_redefinition(ledger: Ledger):
    ledger.charge("taxi", 10.0, 1.0)
    for eps, delta in [(EPS, DELTA), (10.0, DELTA), (EPS, 1e-3)]:
        with pytest.raises(LedgerError, match="already has a budget"):
            ledger.create_budget("taxi", eps, delta)
    status = ledger.remaining("taxi")
    assert (status.epsilon, status.delta, status.charges) == (EPS, DELTA, 1)


def test_unknown_dataset(ledger: Ledger):
    for call in (
        lambda: ledger.remaining("nope"),
        lambda: ledger.charge("nope", 1.0, 1.0),
        lambda: ledger.charges("nope"),
    ):
        with pytest.raises(UnknownDatasetError, match="no budget for dataset 'nope'"):
            call()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"epsilon": 0.0}, ValueError, "epsilon must be in"),
        ({"epsilon": -1.0}, ValueError, "epsilon must be in"),
        ({"epsilon": math.nan}, ValueError, "epsilon must be in"),
        ({"epsilon": math.inf}, ValueError, "epsilon must be in"),
        ({"delta": 0.0}, ValueError, "delta must be in"),
        ({"delta": 1.0}, ValueError, "delta must be in"),
        ({"delta": "0.1"}, TypeError, "delta must be a real number"),
        ({"epsilon": [1.0, 2.0]}, TypeError, "single real number"),
        ({"dataset": ""}, ValueError, "dataset must be a non-empty string"),
        ({"dataset": "   "}, ValueError, "dataset must be a non-empty string"),
        ({"dataset": 3}, TypeError, "dataset must be a non-empty string"),
        ({"dataset": None}, TypeError, "dataset must be a non-empty string"),
    ],
)
def test_create_budget_validation(path: Path, kwargs, error, match):
    args = {"dataset": "d", "epsilon": 1.0, "delta": 1e-6, **kwargs}
    with Ledger(path) as led:
        with pytest.raises(error, match=match):
            led.create_budget(**args)
        assert led.datasets() == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0.0, 1.0), {}, ValueError, "sigma must be in"),
        ((-1.0, 1.0), {}, ValueError, "sigma must be in"),
        ((math.nan, 1.0), {}, ValueError, "sigma must be in"),
        ((1.0, 0.0), {}, ValueError, "sensitivity must be in"),
        ((1.0, math.inf), {}, ValueError, "sensitivity must be in"),
        ((True, 1.0), {}, TypeError, "sigma must be a real number"),
        ((1.0,), {}, TypeError, "both sigma and sensitivity"),
        ((), {}, TypeError, "both sigma and sensitivity"),
        ((1.0, 1.0), {"mu": 0.1}, TypeError, "not both"),
        ((1.0,), {"mu": 0.1}, TypeError, "not both"),
        ((), {"mu": 0.0}, ValueError, "mu must be in"),
        ((), {"mu": math.inf}, ValueError, "mu must be in"),
        ((1.0, 1.0, 5), {}, TypeError, "label must be a string"),
        ((1e-300, 1e300), {}, ValueError, "overflows"),
    ],
)
def test_charge_validation(ledger: Ledger, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        ledger.charge("taxi", *args, **kwargs)
    assert ledger.remaining("taxi").charges == 0


# ------------------------------------------------------------------ exact accounting


def test_budget_exceeded_message_and_nothing_recorded(ledger: Ledger):
    ledger.charge("taxi", 10.0, 1.0, "first")
    with pytest.raises(BudgetExceeded) as info:
        ledger.charge("taxi", 1.0, 1.0, "too much")
    exc = info.value
    assert isinstance(exc, LedgerError) and isinstance(exc, ValueError)
    assert exc.dataset == "taxi" and exc.requested_mu == 1.0
    assert exc.status == ledger.remaining("taxi")
    text = str(exc)
    assert "requested mu=1" in text
    assert "spent mu=0.1" in text
    assert f"remaining mu={exc.status.mu_remaining:.10g}" in text
    assert "epsilon=1" in text and "delta=1e-06" in text
    assert [e.label for e in ledger.charges("taxi")] == ["first"]
    again = pickle.loads(pickle.dumps(exc))  # crosses process boundaries intact
    assert str(again) == text and again.status == exc.status


def test_charges_compose_exactly_not_by_adding_epsilons(ledger: Ledger):
    # Ten releases at plan_equal's sigma: each alone is (0.29, 1e-6)-DP, so adding ε's
    # would allow fewer than four; exact μ-GDP composition fits all ten in ε = 1.
    sigma = plan_equal(EPS, DELTA, 10)
    assert 10 * gaussian_epsilon(sigma, DELTA) > 2.5 * EPS
    for i in range(10):
        ledger.charge("taxi", sigma, 1.0, f"q{i}")
    with pytest.raises(BudgetExceeded):
        ledger.charge("taxi", sigma, 1.0, "q10")
    status = ledger.remaining("taxi")
    assert status.charges == 10
    assert status.epsilon_spent <= EPS * (1 + 1e-12)


@pytest.mark.parametrize("k", [1, 3, 64])
@pytest.mark.parametrize(("eps", "delta", "sens"), [(1.0, 1e-6, 1.0), (0.1, 1e-10, 3.5)])
def test_plan_equal_fits_exactly_k(tmp_path: Path, k, eps, delta, sens):
    sigma = plan_equal(eps, delta, k, sens)
    with Ledger(tmp_path / "l") as led:
        led.create_budget("d", eps, delta)
        for _ in range(k):
            led.charge("d", sigma, sens)
        with pytest.raises(BudgetExceeded):
            led.charge("d", sigma, sens)
        assert led.remaining("d").charges == k


def test_boundary_is_exact_to_the_last_ulp(tmp_path: Path):
    """The largest μ that fits is accepted; the next double is refused (exact arithmetic)."""
    mu1 = 0.6 * MU_B
    left = Fraction(MU_B) ** 2 - Fraction(mu1) ** 2
    mu2 = math.sqrt(float(left))
    while Fraction(mu2) ** 2 > left:
        mu2 = math.nextafter(mu2, 0.0)
    while Fraction(math.nextafter(mu2, 1.0)) ** 2 <= left:
        mu2 = math.nextafter(mu2, 1.0)
    with Ledger(tmp_path / "l") as led:
        led.create_budget("fits", EPS, DELTA)
        led.create_budget("over", EPS, DELTA)
        led.charge("fits", mu=mu1)
        led.charge("over", mu=mu1)
        led.charge("fits", mu=mu2)
        # what is left is below the doubles' resolution of μ_B² (how much depends on μ_B's
        # last bits: 0 when μ₁² + μ₂² hits μ_B² exactly), and nothing above it fits
        rem = led.remaining("fits").mu_remaining
        assert rem <= 1e-8 and led.remaining("fits").epsilon_remaining <= 1e-6
        with pytest.raises(BudgetExceeded):
            led.charge("fits", mu=2.0 * rem + 5e-324)
        # one charge of μ_B itself uses it all up exactly
        led.create_budget("full", EPS, DELTA)
        led.charge("full", mu=MU_B)
        assert led.remaining("full").mu_remaining == 0.0
        assert led.remaining("full").epsilon_remaining == 0.0
        with pytest.raises(BudgetExceeded, match="used up"):
            led.charge("full", mu=5e-324)
        with pytest.raises(BudgetExceeded):
            led.charge("over", mu=math.nextafter(mu2, 1.0))
        assert led.remaining("over").charges == 1
        led.check()


def test_mu_is_rounded_up_only_when_inexact(ledger: Ledger):
    assert ledger.charge("taxi", 8.0, 1.0).mu == 0.125  # exact quotient: no rounding
    e = ledger.charge("taxi", 30.0, 1.0)  # 1/30 is not a double: the next one up
    assert Fraction(e.mu) > Fraction(1, 30)
    assert Fraction(math.nextafter(e.mu, 0.0)) < Fraction(1, 30)


def test_remaining_mu_is_spendable(ledger: Ledger):
    ledger.charge("taxi", 7.0, 1.0)
    ledger.charge("taxi", mu=0.03)
    rest = ledger.remaining("taxi").mu_remaining
    ledger.charge("taxi", mu=rest, label="the rest")
    # What is left is √(rounding error of μ_B²): about 1e-8 μ_B, never negative.
    assert 0.0 <= ledger.remaining("taxi").mu_remaining < 1e-7 * MU_B


def test_failed_output_write_keeps_the_charge(ledger: Ledger, tmp_path: Path):
    """Protocol: charge, then write; if writing fails the budget stays spent."""

    def release_and_write(target: Path) -> None:
        ledger.charge("taxi", 10.0, 1.0, "release to a missing directory")
        target.write_text("noisy output")  # fails: the directory does not exist

    with pytest.raises(FileNotFoundError):
        release_and_write(tmp_path / "missing" / "out.csv")
    status = ledger.remaining("taxi")
    assert status.charges == 1 and status.mu_spent > 0


def test_closed_ledger(path: Path):
    led = Ledger(path)
    led.close()
    led.close()
    with pytest.raises(LedgerError, match="closed"):
        led.datasets()


# ----------------------------------------------------------------------- file safety


def _assert_refused_untouched(path: Path, match: str, create: bool = True) -> None:
    before = path.read_bytes()
    siblings = sorted(p.name for p in path.parent.iterdir())
    with pytest.raises(LedgerFormatError, match=match):
        Ledger(path, create=create)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == siblings


def test_refuses_text_file(path: Path):
    path.write_text("dataset,epsilon\ntaxi,1.0\n" * 20)
    _assert_refused_untouched(path, "not an SQLite database")


def test_refuses_empty_file(path: Path):
    path.write_bytes(b"")
    _assert_refused_untouched(path, "empty file")


def test_refuses_short_file_with_sqlite_magic(path: Path):
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)
    _assert_refused_untouched(path, "not an SQLite database")


def test_refuses_foreign_sqlite(path: Path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE budgets (dataset TEXT, epsilon REAL)")
    conn.execute("INSERT INTO budgets VALUES ('taxi', 1.0)")
    conn.commit()
    conn.close()
    _assert_refused_untouched(path, "another application")


def test_refuses_other_schema_version(path: Path):
    with Ledger(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    _assert_refused_untouched(path, "schema version 99")


def test_refuses_ledger_without_tables(path: Path):
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {ledger_module.APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {ledger_module.SCHEMA_VERSION}")
    conn.execute("CREATE TABLE something (x)")
    conn.commit()
    conn.close()
    _assert_refused_untouched(path, "lacks its tables")


def _ledger_with_charges(path: Path, n: int = 60) -> None:
    with Ledger(path) as led:
        led.create_budget("taxi", EPS, DELTA)
        for i in range(n):
            led.charge("taxi", mu=1e-4, label=f"release number {i} " + "x" * 500)


def test_refuses_corrupted_ledger(path: Path):
    _ledger_with_charges(path)
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 6 * page
    data[3 * page : 4 * page] = b"\xa5" * page  # a b-tree page of the charges table
    path.write_bytes(bytes(data))
    _assert_refused_untouched(path, "corrupted")


def test_refuses_truncated_ledger(path: Path):
    _ledger_with_charges(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _assert_refused_untouched(path, "corrupted")


def test_refuses_directory_and_missing_parent(tmp_path: Path):
    with pytest.raises(LedgerFormatError, match="is a directory"):
        Ledger(tmp_path)
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "no" / "such" / "ledger")
    assert not (tmp_path / "no").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_refuses_fifo_without_blocking(path: Path):
    os.mkfifo(path)
    with pytest.raises(LedgerFormatError, match="not a regular file"):
        Ledger(path)


def test_create_false_does_not_create(path: Path):
    with pytest.raises(LedgerError, match="no ledger at"):
        Ledger(path, create=False)
    assert not path.exists()
    assert list(path.parent.iterdir()) == []


def test_new_ledger_leaves_no_temporary_files(path: Path):
    with Ledger(path) as led:
        assert ledger_module.APPLICATION_ID == int.from_bytes(path.read_bytes()[68:72], "big")
        led.check()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


# ------------------------------------------------------------ processes: races, kills

RACE_WORKER = """
import os, sys, time
from dpgauss.release import BudgetExceeded, Ledger
path, go, sigma = sys.argv[1], sys.argv[2], float(sys.argv[3])
ledger = Ledger(path)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
won = 0
while True:
    try:
        ledger.charge("taxi", sigma, 1.0, label=f"pid {os.getpid()}")
    except BudgetExceeded:
        break
    won += 1
    ledger.remaining("taxi")
print(won, flush=True)
"""


@pytest.mark.slow
def test_eight_processes_race_for_a_budget_of_exactly_ten(path: Path, tmp_path: Path):
    # μ per release just below μ_B/√10: ten fit with a relative slack of 2e-9, eleven do not.
    sigma = math.sqrt(10.0) / MU_B * (1.0 + 1e-9)
    mu_c = mu_up_exact(1.0, sigma)
    assert 10 * Fraction(mu_c) ** 2 <= Fraction(MU_B) ** 2 < 11 * Fraction(mu_c) ** 2
    assert 10 * mu_c**2 > MU_B**2 * (1 - 1e-8)  # the slack is tiny
    with Ledger(path) as led:
        led.create_budget("taxi", EPS, DELTA)
    go = tmp_path / "go"
    procs = [_spawn(RACE_WORKER, str(path), str(go), repr(sigma)) for _ in range(8)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        go.touch()
        wins = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            wins.append(int(out.strip()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    print("wins per process:", wins)
    assert sum(wins) == 10, wins
    with Ledger(path) as led:
        status = led.remaining("taxi")
        assert status.charges == 10
        assert len({e.label for e in led.charges("taxi")}) == sum(1 for w in wins if w)
        led.check()


CREATE_WORKER = """
import os, sys, time
from dpgauss.release import Ledger, LedgerError
path, go = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
try:
    with Ledger(path) as ledger:
        ledger.create_budget("taxi", 1.0, 1e-6)
    print("created", flush=True)
except LedgerError as exc:
    print("refused" if "already has a budget" in str(exc) else f"error {exc}", flush=True)
"""


@pytest.mark.slow
def test_processes_race_to_create_the_same_ledger(path: Path, tmp_path: Path):
    go = tmp_path / "go"
    procs = [_spawn(CREATE_WORKER, str(path), str(go)) for _ in range(4)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        go.touch()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            results.append(out.strip())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert sorted(results) == ["created"] + ["refused"] * 3, results
    with Ledger(path) as led:
        assert led.datasets() == ["taxi"]
        led.check()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")]
    assert leftovers == []


KILL_INSIDE_WORKER = """
import sys, time
from dpgauss.release import Ledger
from dpgauss.release import ledger as module

def hold_the_transaction_open():
    print("inside", flush=True)
    time.sleep(120)

ledger = Ledger(sys.argv[1])
module._before_commit = hold_the_transaction_open
ledger.charge("taxi", 10.0, 1.0, label="killed mid-charge")
print("committed", flush=True)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_sigkill_inside_a_charge_leaves_no_trace(path: Path):
    with Ledger(path) as led:
        led.create_budget("taxi", EPS, DELTA)
        led.charge("taxi", 20.0, 1.0, label="before")
    proc = _spawn(KILL_INSIDE_WORKER, str(path))
    try:
        line = proc.stdout.readline().strip()
        assert line == "inside", proc.stderr.read()
        # The row is inserted but not committed: other connections cannot see it.
        with Ledger(path) as led:
            assert [e.label for e in led.charges("taxi")] == ["before"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert raw.execute("SELECT label FROM charges").fetchall() == [("before",)]
    raw.close()
    with Ledger(path, timeout=5.0) as led:
        led.check()
        assert led.remaining("taxi").charges == 1
        led.charge("taxi", 10.0, 1.0, label="after")  # the write lock was released
        assert [e.label for e in led.charges("taxi")] == ["before", "after"]


KILL_LOOP_WORKER = """
import sys
from dpgauss.release import Ledger
ledger = Ledger(sys.argv[1])
print("ready", flush=True)
i = 0
while True:
    ledger.charge("taxi", mu=1e-4, label=f"loop {i}")
    print(i, flush=True)
    i += 1
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_sigkill_at_random_moments_keeps_the_ledger_consistent(path: Path):
    with Ledger(path) as led:
        led.create_budget("taxi", EPS, DELTA)
    expected = 0
    for delay in (0.05, 0.13, 0.29):
        proc = _spawn(KILL_LOOP_WORKER, str(path))
        try:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
            time.sleep(delay)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            # read through the text buffer: readline() above may have read ahead some of
            # the numbers (under load the child is already printing), and communicate()
            # would read only what is left in the pipe, losing them
            out = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reported = len(out.split())  # commits the child lived to report
        with Ledger(path, timeout=5.0) as led:
            led.check()
            n = led.remaining("taxi").charges
            # Every reported charge is there; at most one more (committed, then killed
            # before printing); never a partial row.
            assert expected + reported <= n <= expected + reported + 1
            entries = led.charges("taxi")
            assert all(e.mu == 1e-4 and e.label.startswith("loop ") for e in entries)
            print(f"killed after {delay}s: {reported} reported, {n - expected} recorded")
            expected = n
    assert expected > 0


# ------------------------------------------------------------------------------- CLI


def _cli(*argv: str) -> str:
    parser = argparse.ArgumentParser(prog="dpgauss")
    sub = parser.add_subparsers(dest="command", required=True)
    add_budget_parser(sub)
    args = parser.parse_args(list(argv))
    return args.run(args)


def test_cli_init_show(path: Path):
    out = _cli("budget", "init", "taxi", "--epsilon", "1", "--delta", "1e-6", "--ledger", str(path))
    assert "created the budget of dataset 'taxi'" in out and "mu=0.2367" in out
    with Ledger(path) as led:
        led.charge("taxi", 10.0, 1.0, "counts")
    shown = _cli("budget", "show", "taxi", "--ledger", str(path))
    assert "1 charge(s)" in shown and "counts" in shown
    data = json.loads(_cli("budget", "show", "taxi", "--ledger", str(path), "--json"))
    assert data["charges"] == 1 and data["entries"][0]["sigma"] == 10.0
    assert data["mu_budget"] == MU_B
    with pytest.raises(LedgerError, match="already has a budget"):
        _cli("budget", "init", "taxi", "--epsilon", "2", "--delta", "1e-6", "--ledger", str(path))


@pytest.mark.parametrize(
    "bad",
    [
        ["--epsilon", "-1", "--delta", "1e-6"],
        ["--epsilon", "1", "--delta", "1.5"],
        ["--epsilon", "0", "--delta", "1e-6"],
    ],
)
def test_cli_refused_init_leaves_no_file(path: Path, bad: list[str]):
    with pytest.raises(ValueError, match=r"epsilon|delta"):
        _cli("budget", "init", "taxi", *bad, "--ledger", str(path))
    assert not path.exists()
    assert list(path.parent.iterdir()) == []
    with pytest.raises(ValueError, match="dataset"):
        _cli("budget", "init", "", "--epsilon", "1", "--delta", "1e-6", "--ledger", str(path))
    assert not path.exists()


def test_cli_show_never_creates(path: Path):
    with pytest.raises(LedgerError, match="no ledger at"):
        _cli("budget", "show", "taxi", "--ledger", str(path))
    assert not path.exists()


def test_cli_ledger_from_environment(path: Path, monkeypatch):
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    with pytest.raises(ValueError, match=LEDGER_ENV):
        _cli("budget", "show", "taxi")
    monkeypatch.setenv(LEDGER_ENV, str(path))
    data = json.loads(_cli("budget", "init", "taxi", "--epsilon", "1", "--delta", "1e-6", "--json"))
    assert data["ledger"] == str(path) and data["charges"] == 0


def test_cli_plan():
    data = json.loads(
        _cli("budget", "plan", "--epsilon", "1", "--delta", "1e-6", "--queries", "10", "--json")
    )
    sigma = plan_equal(1.0, 1e-6, 10, 1.0)  # rounded up to 10 digits, checked as released
    assert sigma <= data["sigma"] <= sigma * (1 + 1e-9)
    assert data["noise"] == "secure" and data["keys"] is None
    assert data["epsilon_total"] <= 1.0 + 1e-12
    assert data["basic_sigma"] > data["sigma"] and data["variance_ratio"] > 1
    text = _cli("budget", "plan", "--epsilon", "1", "--delta", "1e-6", "--queries", "3")
    assert "sigma per query" in text
    with pytest.raises(SystemExit):
        _cli("budget", "plan", "--epsilon", "1", "--delta", "1e-6", "--queries", "0")


def test_cli_main_wiring(path: Path, capsys):
    """Through ``dpgauss.cli.main``: ``budget`` is a registered command."""
    from dpgauss.cli import app as cli

    commands = [
        a.choices for a in cli._build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    assert any("budget" in c for c in commands)
    argv = ["budget", "init", "taxi", "--epsilon", "1", "--delta", "1e-6", "--ledger", str(path)]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 2
    assert "already has a budget" in capsys.readouterr().err
    assert cli.main(["budget", "show", "taxi", "--ledger", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["charges"] == 0
    assert cli.main(["budget", "show", "nope", "--ledger", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no budget for dataset 'nope'" in err
    assert cli.main(["budget", "plan", "--epsilon", "1", "--delta", "2", "--queries", "3"]) == 2


def test_the_ledger_page_matches_the_code():
    """docs/ledger.md: the schema version is the code's, and its example records delivery
    (else its charges stay "not yet delivered" in `budget show`)."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "ledger.md").read_text()
    assert re.findall(r"`user_version` (\d+)", page) == [str(ledger_module.SCHEMA_VERSION)]
    example = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    assert example.count("record_delivery(") >= 2 and '"delivered"' in example


def test_delta_spent_outside_gdp_fits_exactly(tmp_path):
    """A budget (ε, δ) admits threshold charges iff √Σμ² ≤ gdp_mu(ε, δ − Ση): the largest μ
    that fits fits, one ulp more is refused, and nothing more fits after it."""
    from dpgauss.privacy import gdp_mu
    from dpgauss.privacy.events import ThresholdEvent

    path = tmp_path / "l.sqlite"
    eta = 3e-7
    with Ledger(path) as led:
        led.create_budget("d", 1.0, 1e-6)
        mu = float(gdp_mu(1.0, 1e-6 - eta))
        assert mu < led.remaining("d").mu_budget
        with pytest.raises(BudgetExceeded):
            led.charge_event("d", ThresholdEvent(math.nextafter(mu, math.inf), eta))
        entry = led.charge_event("d", ThresholdEvent(mu, eta), label="discovered keys")
        assert entry.eta == eta and entry.mu == mu
        status = led.remaining("d")
        assert status.eta_spent == eta and status.mu_effective == mu
        assert status.mu_remaining == 0.0 and status.epsilon_spent <= 1.0
        with pytest.raises(BudgetExceeded):
            led.charge("d", mu=1e-9)
        led.check()
    with Ledger(path) as led:  # the η is read back from the file
        assert [e.eta for e in led.charges("d")] == [eta]
    with Ledger(tmp_path / "m.sqlite") as led:  # η alone can exhaust δ
        led.create_budget("d", 1.0, 1e-6)
        with pytest.raises(BudgetExceeded):
            led.charge("d", mu=1e-3, eta=1e-6)
        with pytest.raises(ValueError, match="eta"):
            led.charge("d", mu=1e-3, eta=1.5)


def test_budget_show_prints_the_delta_outside_gdp(path: Path):
    from dpgauss.privacy.events import ThresholdEvent

    _cli("budget", "init", "d", "--epsilon", "1", "--delta", "1e-6", "--ledger", str(path))
    assert "outside" not in _cli("budget", "show", "d", "--ledger", str(path))
    with Ledger(path, create=False) as led:
        led.charge_event("d", ThresholdEvent(0.1, 3e-7), label="shops")
    text = _cli("budget", "show", "d", "--ledger", str(path))
    assert "outside   : delta=3e-07 spent by key selections" in text
    assert "shops (+ delta 3e-07 outside mu-GDP)" in text
    obj = json.loads(_cli("budget", "show", "d", "--ledger", str(path), "--json"))
    assert obj["eta_spent"] == 3e-7 and obj["entries"][0]["eta"] == 3e-7
