"""The dpgauss command line: outputs, JSON keys, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import dpgauss
from dpgauss.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_calibrate_json(capsys):
    code, out, err = run(capsys, "calibrate", "--epsilon", "0.5", "--delta", "1e-5", "--json")
    assert code == 0 and err == ""
    obj = json.loads(out)
    assert set(obj) == {
        "sigma",
        "classical_sigma",
        "variance_ratio",
        "epsilon",
        "delta",
        "sensitivity",
    }
    assert obj["sigma"] == dpgauss.analytic_gaussian_sigma(0.5, 1e-5)
    assert obj["classical_sigma"] == dpgauss.classical_gaussian_sigma(0.5, 1e-5)
    assert obj["variance_ratio"] == pytest.approx((obj["classical_sigma"] / obj["sigma"]) ** 2)


def test_calibrate_classical_invalid_is_null(capsys):
    code, out, _ = run(capsys, "calibrate", "--epsilon", "2", "--delta", "1e-5", "--json")
    obj = json.loads(out)
    assert code == 0 and obj["classical_sigma"] is None and obj["variance_ratio"] is None
    code, out, _ = run(capsys, "calibrate", "--epsilon", "2", "--delta", "1e-5")
    assert code == 0 and "not valid" in out


def test_calibrate_huge_epsilon(capsys):
    # "valid for every epsilon >= 0": 1e100 used to end in FloatingPointError
    code, out, err = run(capsys, "calibrate", "--epsilon", "1e100", "--delta", "1e-5", "--json")
    assert code == 0 and err == ""
    obj = json.loads(out)
    assert obj["sigma"] == dpgauss.analytic_gaussian_sigma(1e100, 1e-5)
    assert 0 < obj["sigma"] < 1e-50


def test_profile_both_directions(capsys):
    code, out, _ = run(capsys, "profile", "--sigma", "3", "--epsilon", "1", "--json")
    assert code == 0 and json.loads(out)["delta"] == dpgauss.gaussian_delta(3.0, 1.0)
    code, out, _ = run(capsys, "profile", "--sigma", "3", "--delta", "1e-5", "--sensitivity", "2")
    assert code == 0 and "epsilon =" in out
    assert f"{dpgauss.gaussian_epsilon(3.0, 1e-5, 2.0):.10g}" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "--epsilon", "-1", "--delta", "1e-5"],
        ["calibrate", "--epsilon", "1", "--delta", "1.5"],
        ["calibrate", "--epsilon", "nan", "--delta", "1e-5"],
        ["calibrate", "--epsilon", "inf", "--delta", "1e-5"],
        ["calibrate", "--epsilon", "x", "--delta", "1e-5"],
        ["calibrate", "--epsilon", "1", "--delta", "1e-5", "--sensitivity", "0"],
        ["calibrate", "--delta", "1e-5"],
        ["profile", "--sigma", "3"],
        ["profile", "--sigma", "3", "--epsilon", "1", "--delta", "1e-5"],
        ["profile", "--sigma", "-3", "--epsilon", "1"],
        ["nonsense"],
    ],
)
def test_bad_arguments_one_line_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("dpgauss: error: ")
    assert "Traceback" not in err


def test_demo_prints_the_summary_of_run_demo(capsys, monkeypatch, tmp_path):
    # The demo itself runs in tests/test_demo.py (and `dpgauss demo` in .ci/run); here only
    # the wiring: --out reaches run_demo and its summary is what is printed.
    import dpgauss.demo

    seen = []

    class Fake:
        summary = "five\nlines"

    monkeypatch.setattr(dpgauss.demo, "run_demo", lambda out: seen.append(out) or Fake())
    code, out, _ = run(capsys, "demo", "--out", str(tmp_path / "d"))
    assert code == 0 and out == "five\nlines\n" and seen == [str(tmp_path / "d")]


def _one_line_error(capsys, *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and err.startswith("dpgauss: error: "), err
    return err


def test_demo_unwritable_out_is_one_line(capsys, tmp_path):
    afile = tmp_path / "somefile"
    afile.write_text("not a directory")
    for target in (afile / "out", "/proc/dpgauss-demo-out"):
        err = _one_line_error(capsys, "demo", "--out", str(target))
        assert "--out" in err and str(target) in err
    assert afile.read_text() == "not a directory"


def test_demo_refusal_names_out_only_when_it_was_not_passed(capsys, tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    err = _one_line_error(capsys, "demo", "--out", str(mine))
    assert "was not made by dpgauss demo" in err and "pass --out" not in err
    assert err.startswith("dpgauss: error: --out: ")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dpgauss-demo").mkdir()
    (tmp_path / "dpgauss-demo" / "notes.txt").write_text("mine")
    err = _one_line_error(capsys, "demo")
    assert "dpgauss-demo exists" in err and "--out DIR" in err
    assert (mine / "thesis.tex").read_text() == "precious"


@pytest.mark.parametrize("command", ["calibrate", "profile", "demo"])
def test_command_help_has_a_description(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    between = out.split("\n\n")[1]  # usage, then the description, then the options
    assert not between.startswith("options:") and len(between.split()) >= 8, out


@pytest.mark.slow
def test_console_script_exit_status():
    """The installed entry point returns the status to the shell."""
    proc = subprocess.run(
        [sys.executable, "-m", "dpgauss.cli", "calibrate", "--epsilon", "-1", "--delta", "0.1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("dpgauss: error:")


def test_version_and_a_bare_command_print_what_to_do(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"dpgauss {dpgauss.__version__}"
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: dpgauss") and "release" in err and "denoise" in err


def test_budget_list_and_exact_budget_numbers(capsys, tmp_path):
    ledger = str(tmp_path / "ledger.db")
    assert main(["budget", "list", "--ledger", ledger]) == 2  # no ledger yet: one line
    assert "no ledger" in capsys.readouterr().err
    for name, eps in (("taxi", "1.000001"), ("bikes", "2")):
        assert (
            main(["budget", "init", name, "--epsilon", eps, "--delta", "1e-6", "--ledger", ledger])
            == 0
        )
    out = capsys.readouterr().out
    assert "epsilon=1.000001 delta=1e-06" in out  # not rounded to "1"
    assert main(["budget", "list", "--ledger", ledger]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["bikes", "taxi"]
    assert lines[3].split()[1:3] == ["1.000001", "1e-06"]
    assert main(["budget", "list", "--ledger", ledger, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["budgets"]
    assert [b["dataset"] for b in listed] == ["bikes", "taxi"]
    assert listed[1]["epsilon"] == 1.000001


def test_a_missing_source_is_named_without_sql(capsys, tmp_path):
    pytest.importorskip("duckdb")
    ledger = tmp_path / "ledger.db"
    assert (
        main(["budget", "init", "m", "--epsilon", "1", "--delta", "1e-6", "--ledger", str(ledger)])
        == 0
    )
    pattern = tmp_path / "nowhere" / "part-*.parquet"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'[source]\npath = "{pattern}"\n[unit]\ncolumn = "uid"\n'
        '[domain]\nkind = "range"\ncolumn = "x"\nstart = 0\nstop = 10\nstep = 1\n'
        '[statistic]\nkind = "count"\n[bounds]\nmax_records_per_unit = 1\n'
        f'[privacy]\nepsilon = 1.0\ndelta = 1e-6\nledger = "{ledger}"\ndataset = "m"\n'
    )
    capsys.readouterr()
    assert main(["release", str(spec), "--out", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(pattern) in err
    assert "SELECT" not in err and "LINE" not in err
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "shown"), [("--progress", True), ("--no-progress", False)])
def test_release_progress_is_asked_for_by_name(capsys, tmp_path, flag, shown):
    pytest.importorskip("duckdb")
    ledger = tmp_path / "ledger.db"
    assert (
        main(["budget", "init", "m", "--epsilon", "4", "--delta", "1e-6", "--ledger", str(ledger)])
        == 0
    )
    data = tmp_path / "r.csv"
    data.write_text("uid,x\n" + "".join(f"{i % 7},{i % 10}\n" for i in range(50)))
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'[source]\npath = "{data}"\n[unit]\ncolumn = "uid"\n'
        '[domain]\nkind = "range"\ncolumn = "x"\nstart = 0\nstop = 10\nstep = 1\n'
        '[statistic]\nkind = "count"\n[bounds]\nmax_records_per_unit = 2\n'
        f'[privacy]\nepsilon = 1.0\ndelta = 1e-6\nledger = "{ledger}"\ndataset = "m"\n'
        '[denoise]\nmethod = "none"\n'
    )
    capsys.readouterr()
    assert main(["release", str(spec), "--out", str(tmp_path / "out.csv"), flag]) == 0
    assert ("dpgauss: planning" in capsys.readouterr().err) is shown


#: Runs ``python -m dpgauss.cli ARGS`` with SIGINT at its default disposition, as a command
#: typed at a terminal has it.  A process started with SIGINT *ignored* keeps it ignored
#: (POSIX; Python installs no handler then), and the test suite may well be started that way:
#: a non-interactive shell's ``pytest &``, ``nohup`` and some job runners ignore SIGINT in what
#: they start, and every child inherits it.  That was issue #28's "every SIGINT lost, exit 0".
_WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'dpgauss.cli', *sys.argv[1:]])"
)


def _sigint_caught(pid: int) -> bool | None:
    """Whether process ``pid`` has a handler for SIGINT (Linux's /proc; None elsewhere)."""
    import signal

    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    except OSError:
        return None
    return None


@pytest.mark.slow
def test_ctrl_c_ends_cleanly(tmp_path):
    """Ctrl-C during ``reproduce`` (DuckDB aggregates, numba and SciPy solvers): exit status 130
    and one line, in a subprocess.  It waits for a state, not for a time or a given line: the
    child has Python's SIGINT handler, and a point of the run is done with most still to do."""
    import os
    import queue
    import signal
    import threading

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = ["reproduce", "4", "--quick", "--jobs", "1", "--out", str(tmp_path / "fig")]
    proc = subprocess.Popen(
        [sys.executable, "-c", _WITH_DEFAULT_SIGINT, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    err: list[str] = []
    try:
        # The state: a progress line (any other line, a library's warning, is skipped) that
        # is not the last one; a fresh clone compiles numba first, so the wait is generous.
        deadline = time.monotonic() + 600
        while True:
            line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
            assert line is not None, f"ended before any progress: {''.join(err)}"
            err.append(line)
            if line.startswith("reproduce:"):
                assert "100%" not in line, "".join(err)
                break
        assert proc.poll() is None and _sigint_caught(proc.pid) is not False
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)  # what a user does: press Ctrl-C again
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=10)
    while (rest := lines.get()) is not None:
        err.append(rest)
    text = "".join(err)
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "Error" not in text, text
    mine = [line for line in text.splitlines() if line.startswith("dpgauss:")]
    assert mine == ["dpgauss: interrupted"] and text.strip().endswith(mine[0]), text


#: Sends this process a SIGINT as soon as anything imports NumPy: a Ctrl-C during the start-up
#: (importing NumPy, SciPy and the sub-commands takes seconds), deterministically.
_SIGINT_AT_NUMPY = """
import importlib.abc, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)

class _CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, _CtrlC())
sys.argv[1:] = ["calibrate", "--epsilon", "1", "--delta", "1e-5"]
"""


@pytest.mark.parametrize(
    "entry",
    [
        # what the `dpgauss` console script does
        "from dpgauss.cli import main\nsys.exit(main())",
        # python -m dpgauss.cli
        "import runpy\nrunpy.run_module('dpgauss.cli', run_name='__main__', alter_sys=True)",
    ],
    ids=["console-script", "python-m"],
)
def test_ctrl_c_during_the_start_up_is_one_line(entry):
    """Ctrl-C while the command imports its libraries: one line, exit 130, no traceback."""
    out = subprocess.run(
        [sys.executable, "-c", _SIGINT_AT_NUMPY + entry],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (out.returncode, out.stderr, out.stdout) == (130, "dpgauss: interrupted\n", "")


def test_import_of_the_command_is_light():
    """``import dpgauss.cli`` (the console script's first line) imports no NumPy: the start-up's
    heavy imports happen inside ``main``, where Ctrl-C is handled."""
    code = "import sys, dpgauss.cli; print('numpy' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_closed_pipe_ends_cleanly(tmp_path):
    """A reader that goes away (``| head``): no ``BrokenPipeError`` traceback."""
    import os

    from dpgauss.release.ledger import Ledger

    cmd = [sys.executable, "-m", "dpgauss.cli"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ledger = tmp_path / "ledger.db"
    with Ledger(ledger) as led:
        led.create_budget("big", 50.0, 1e-6)
        for i in range(800):  # ~90 KB of output: more than a pipe holds
            led.charge("big", mu=1e-4, label=f"charge {i}")
    proc = subprocess.Popen(
        [*cmd, "budget", "show", "big", "--ledger", str(ledger)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().startswith("dataset")
    proc.stdout.close()  # the reader goes away after one line, as `| head -1` does
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert proc.returncode in (0, 141)


@pytest.mark.filterwarnings("ignore:something else:FutureWarning")
def test_dpgauss_warnings_are_one_line(capsys, monkeypatch):
    """A warning of dpgauss's own (an assumed CRS) is one ``dpgauss: warning:`` line on
    stderr, like an error; another library's warning is shown as Python shows it."""
    import warnings

    from dpgauss.cli import calibrate as cal_module
    from dpgauss.errors import CrsWarning

    real = cal_module._calibrate

    def noisy(args):
        warnings.warn(
            "the node table gives no crs:\n  its coordinates are read as degrees",
            CrsWarning,
            stacklevel=2,
        )
        warnings.warn("something else", FutureWarning, stacklevel=2)
        return real(args)

    monkeypatch.setattr(cal_module, "_calibrate", noisy)
    code, out, err = run(capsys, "calibrate", "--epsilon", "1", "--delta", "1e-5")
    assert code == 0 and "analytic sigma" in out
    lines = err.splitlines()
    assert (
        "dpgauss: warning: the node table gives no crs: its coordinates are read as degrees"
        in lines
    )
    # another library's warning goes where warnings went before (stderr, or pytest's record)
    assert not any("dpgauss: warning: something else" in line for line in lines)
    assert not any("CrsWarning" in line for line in lines)
