"""Regression tests of the privacy-hardening review (plan, then charge, then write).

Each test names the finding it guards.  Neighbouring datasets and CSV parsing have their
own files (``test_neighbours.py``, ``test_csv_format.py``); here: what a release publishes,
what it refuses before charging, and what a failure, an interrupt or a kill leaves behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpgauss.cli import main  # noqa: E402
from dpgauss.release import pipeline  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.ledger import Ledger  # noqa: E402
from dpgauss.release.pipeline import ReleaseDeliveryError, run_release  # noqa: E402

from .test_pipeline import (  # noqa: E402
    make_ledger,
    make_spec,
    small_release_data,
    small_spec_toml,
)

ENGINE = DuckDBEngine(threads=1)


def entries(ledger: Path, dataset: str = "d") -> list:
    with Ledger(ledger, create=False) as led:
        return led.charges(dataset)


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def no_temporary_files(directory: Path) -> bool:
    return not [p for p in directory.rglob("*") if p.name.endswith((".tmp", ".old"))]


# --------------------------------------------------------- finding 5: seeded releases


def test_an_insecure_release_with_a_ledger_is_refused_before_anything(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    priv = {"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 3}
    out = tmp_path / "r.csv"
    with pytest.raises(ValueError, match="never charged to a ledger"):
        run_release(make_spec(src, privacy=priv), out=out, ledger=ledger, engine=ENGINE)
    assert entries(ledger) == [] and not out.exists()


def test_an_insecure_release_says_so_everywhere_and_hides_its_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, _ = small_release_data(tmp_path)
    monkeypatch.setenv("DPGAUSS_LEDGER", str(make_ledger(tmp_path)))  # not consulted
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    spec = small_spec_toml(
        tmp_path / "s.toml", src, "none", privacy="secure = false\nseed = 987654321"
    )
    out = tmp_path / "r.csv"
    assert main(["release", str(spec), "--out", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    assert "WARNING: NOT PRIVATE" in cap.err
    obj = json.loads(cap.out)
    assert obj["warning"].startswith("NOT PRIVATE") and obj["charge"] == {"charged": False}
    report = (tmp_path / "r.csv.report.json").read_text()
    assert "987654321" not in report and "NOT PRIVATE" in report
    assert entries(Path(os.environ["DPGAUSS_LEDGER"])) == []
    (diag,) = (tmp_path / "state" / "dpgauss" / "diagnostics").iterdir()
    assert diag.name.startswith("CONFIDENTIAL-r.csv-")
    assert json.loads(diag.read_text())["seed"] == 987654321
    assert "CONFIDENTIAL" not in " ".join(files(tmp_path))  # not beside the release


# ------------------------------------------------- finding 7: published vs confidential


@pytest.mark.slow
def test_the_published_report_holds_no_counter_timing_or_path(tmp_path: Path) -> None:
    src, truth = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    out_dir = tmp_path / "public"
    out_dir.mkdir()
    spec = make_spec(src, denoise={"method": "james_stein"})
    res = run_release(spec, out=out_dir / "r.csv", ledger=ledger, engine=ENGINE)
    text = (out_dir / "r.csv.report.json").read_text()
    report = json.loads(text)
    assert set(report) == {
        "dpgauss_version",
        "published",
        "spec",
        "domain",
        "sensitivity",
        "privacy",
        "denoise",
        "charge",
        "output",
    }
    assert str(tmp_path) not in text and "timing" not in text and "rows" not in report
    assert "read" not in json.dumps(report["output"])
    # the release directory holds only what may be published
    assert files(out_dir) == sorted(
        ["r.csv", "r.csv.report.json", *(["r.csv.png"] if report["output"]["plot"] else [])]
    )
    diag_path = Path(res.diagnostics_path)
    assert diag_path.parent != out_dir and diag_path.name.startswith("CONFIDENTIAL-")
    diag = json.loads(diag_path.read_text())
    assert diag["rows"]["kept"] == truth.sum() and diag["confidential"].startswith("CONFIDENTIAL")
    assert diag["paths"]["ledger"] == str(ledger.absolute()) and "timing" in diag


@pytest.mark.slow
def test_denoising_time_and_share_go_to_the_diagnostics_only(tmp_path: Path) -> None:
    """``auto``'s seconds per candidate and the release's denoising time and share are
    confidential: in the diagnostics, never in the published report."""
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = make_spec(src, denoise={"method": "auto"})
    res = run_release(spec, out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    timing = res.diagnostics["timing"]
    assert 0.0 < timing["denoise_s"] <= timing["noise_denoise_s"] <= timing["total_s"]
    assert timing["denoise_share"] == timing["denoise_s"] / timing["total_s"]
    assert "denoise soft_threshold_s" in timing and "denoise none, james_stein_s" in timing
    text = (tmp_path / "r.csv.report.json").read_text()
    assert "timing" not in text and "denoise_s" not in text
    assert "timing" not in res.report["denoise"]["params"]
    assert "timing     : plan " in res.diagnostics_text and " % of it)" in res.diagnostics_text
    assert "candidates : " in res.diagnostics_text and "soft_threshold" in res.diagnostics_text


# ------------------------------------------------ finding 8: checked before the charge


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"denoise": {"method": "soft_threshold", "params": {"bogus": 1}}}, "unknown keys"),
        ({"denoise": {"method": "soft_threshold", "params": {"threshold": -1}}}, "failed"),
        ({"denoise": {"method": "hard_threshold", "params": {"threshold": "sure"}}}, "failed"),
        ({"denoise": {"method": "james_stein", "params": {"target": "x"}}}, "failed"),
        ({"denoise": {"method": "wavelet", "params": {"level": 50}}}, "failed"),
        ({"denoise": {"method": "trend_filter", "params": {"order": 99}}}, "failed"),
        ({"denoise": {"method": "auto", "params": {"margin": -5}}}, "failed"),
        (
            {"domain": {"kind": "range", "column": "key", "start": 0, "stop": 1}}
            | {"denoise": {"method": "trend_filter"}},
            "failed",
        ),
        ({"denoise": {"method": "james_stein", "params": {"sigma": 2.0}}}, "may not set"),
        ({"denoise": {"method": "trend_filter", "params": {"graph": 2}}}, "may not set"),
    ],
)
def test_denoiser_parameters_are_checked_before_the_charge(
    tmp_path: Path, tables: dict, message: str
) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    with pytest.raises(ValueError, match=message):
        run_release(make_spec(src, **tables), out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    assert entries(ledger) == [] and files(tmp_path) == ["budget.sqlite", "s.parquet"]


def test_a_missing_optional_package_is_found_before_the_charge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtins

    real = builtins.__import__

    def no_pywt(name: str, *args: object, **kwargs: object) -> object:
        if name == "pywt" or name.startswith("pywt."):
            raise ImportError("No module named 'pywt'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pywt)
    monkeypatch.delitem(sys.modules, "pywt", raising=False)
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = make_spec(src, denoise={"method": "wavelet"})
    with pytest.raises(ValueError, match="needs pywt"):
        run_release(spec, out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    assert entries(ledger) == []


@pytest.mark.parametrize("kind", ["dangling", "to-a-file", "directory", "missing-dir"])
def test_bad_output_paths_are_refused_before_the_charge(tmp_path: Path, kind: str) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    out = tmp_path / "r.csv"
    if kind == "dangling":
        os.symlink(tmp_path / "nowhere.csv", out)
    elif kind == "to-a-file":
        (tmp_path / "real.csv").write_text("x")
        os.symlink(tmp_path / "real.csv", out)
    elif kind == "directory":
        out.mkdir()
    else:
        out = tmp_path / "no" / "such" / "r.csv"
    spec = make_spec(src, output={"overwrite": True})
    with pytest.raises(ValueError) as info:
        run_release(spec, out=out, ledger=ledger, engine=ENGINE)
    assert "\n" not in str(info.value)
    assert entries(ledger) == []
    if kind == "to-a-file":
        assert (tmp_path / "real.csv").read_text() == "x"


def test_names_too_long_for_the_directory_are_refused_before_the_charge(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    out = tmp_path / ("x" * 240 + ".csv")  # its report name and temporary names are too long
    with pytest.raises(ValueError, match="too long"):
        run_release(make_spec(src), out=out, ledger=ledger, engine=ENGINE)
    assert entries(ledger) == []


def test_an_output_inside_the_diagnostics_directory_is_refused(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    diag = tmp_path / "budget.sqlite.diagnostics"
    diag.mkdir()
    with pytest.raises(ValueError, match="confidential"):
        run_release(make_spec(src), out=diag / "r.csv", ledger=ledger, engine=ENGINE)
    assert entries(ledger) == []


def test_two_releases_never_write_into_one_directory_at_once(tmp_path: Path) -> None:
    from dpgauss.release.plan import plan_release

    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    first = plan_release(make_spec(src), out=out / "a.csv", ledger=ledger, engine=ENGINE)
    try:
        with pytest.raises(ValueError, match="another dpgauss release is writing"):
            run_release(make_spec(src), out=out / "b.csv", ledger=ledger, engine=ENGINE)
    finally:
        first.outputs.release()
    run_release(make_spec(src), out=out / "b.csv", ledger=ledger, engine=ENGINE)
    assert [e.delivery for e in entries(ledger)] == ["delivered"]


def test_an_interrupt_once_every_file_is_named_is_a_delivery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpgauss.release import outputs

    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    real = outputs._fsync_dir

    def interrupt(directory: Path) -> None:
        real(directory)
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs, "_fsync_dir", interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_release(make_spec(src), out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    (entry,) = entries(ledger)
    assert entry.delivery == "delivered" and (tmp_path / "r.csv").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_an_unwritable_directory_is_refused_before_the_charge(tmp_path: Path) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="cannot write"):
            run_release(make_spec(src), out=ro / "r.csv", ledger=ledger, engine=ENGINE)
    finally:
        ro.chmod(0o700)
    assert entries(ledger) == []


# ------------------------------------------- finding 10: the source is never overwritten


@pytest.mark.parametrize("target", ["source", "ledger", "report-is-source"])
def test_an_output_can_never_be_the_source_or_the_ledger(tmp_path: Path, target: str) -> None:
    path = tmp_path / "data.csv"
    path.write_text("uid,key\n" + "".join(f"{i},{i % 10}\n" for i in range(50)))
    before = path.read_bytes()
    ledger = make_ledger(tmp_path)
    out = {
        "source": path,
        "ledger": ledger,
        "report-is-source": tmp_path / "x",
    }[target]
    if target == "report-is-source":
        os.replace(path, tmp_path / "x.report.json")
        path = tmp_path / "x.report.json"
        before = path.read_bytes()
    spec = make_spec(path, output={"overwrite": True})
    with pytest.raises(ValueError, match="refusing"):
        run_release(spec, out=out, ledger=ledger, engine=ENGINE)
    assert path.read_bytes() == before and entries(ledger) == []


# ------------------------- findings 8, 9, 11: failures after the charge, kills, Ctrl-C


def test_a_failure_after_the_charge_is_recorded_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)

    def boom(step: str) -> None:
        if step == "denoised":
            raise MemoryError("simulated")

    monkeypatch.setattr(pipeline, "_at_step", boom)
    with pytest.raises(ReleaseDeliveryError, match="after charge #1") as info:
        run_release(make_spec(src), out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    assert info.value.charge_id == 1
    (entry,) = entries(ledger)
    assert entry.delivery == "failed" and "MemoryError: simulated" in entry.note
    assert "r.csv" not in files(tmp_path) and no_temporary_files(tmp_path)
    diag = tmp_path / "budget.sqlite.diagnostics" / "CONFIDENTIAL-d-charge-1.json"
    assert json.loads(diag.read_text())["delivery"].startswith("failed after the charge")


def _ctrl_c_in_compiled_code() -> SystemError:
    """What a numba function raises when Ctrl-C lands while it runs."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from exc
    except SystemError as exc:
        return exc


@pytest.mark.parametrize("how", ["KeyboardInterrupt", "SystemError"])
def test_an_interrupt_after_the_charge_is_one_line_and_recorded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    """Ctrl-C after the charge: exit 130 and ONE line, which says the budget is spent,
    nothing was delivered and the ledger entry records it (issue #28: it printed two)."""
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = tmp_path / "s.toml"
    small_spec_toml(spec, src, "none")

    def interrupt(step: str) -> None:
        if step == "charged":
            raise KeyboardInterrupt if how == "KeyboardInterrupt" else _ctrl_c_in_compiled_code()

    monkeypatch.setattr(pipeline, "_at_step", interrupt)
    code = main(["release", str(spec), "--out", str(tmp_path / "r.csv"), "--ledger", str(ledger)])
    assert code == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(
        r"dpgauss: interrupted after charge #1 \(mu=[0-9.e-]+\) to dataset 'd': the budget is "
        r"spent and nothing was delivered \(the ledger entry records it as 'failed'\)",
        line,
    ), line
    (entry,) = entries(ledger)
    assert entry.delivery == "failed" and "interrupted" in entry.note
    assert "r.csv" not in files(tmp_path)


def test_an_interrupt_once_delivered_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = tmp_path / "s.toml"
    small_spec_toml(spec, src, "none")

    def interrupt(step: str) -> None:
        if step == "committed":
            raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "_at_step", interrupt)
    code = main(["release", str(spec), "--out", str(tmp_path / "r.csv"), "--ledger", str(ledger)])
    assert code == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("dpgauss: interrupted just after the release was delivered: charge #1")
    assert line.endswith(
        "the table and its report are written (the ledger entry records it as 'delivered')"
    )
    (entry,) = entries(ledger)
    assert entry.delivery == "delivered"
    assert "r.csv" in files(tmp_path)


def test_an_interrupt_from_python_is_a_keyboard_interrupt_naming_the_charge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From Python the library prints nothing: the exception says it (and is still a
    KeyboardInterrupt, so ``except KeyboardInterrupt`` keeps working)."""
    from dpgauss.errors import ReleaseInterrupted

    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)

    def interrupt(step: str) -> None:
        if step == "denoised":
            raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "_at_step", interrupt)
    with pytest.raises(KeyboardInterrupt) as info:
        run_release(make_spec(src), out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    assert isinstance(info.value, ReleaseInterrupted) and info.value.charge_id == 1
    assert "nothing was delivered" in str(info.value)
    assert capsys.readouterr().err == ""


_KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from dpgauss.release import pipeline
    from dpgauss.release.engines.duckdb import DuckDBEngine
    from dpgauss.release.spec import load_spec

    step = sys.argv[1]
    def kill(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    pipeline._at_step = kill
    pipeline.run_release(load_spec(sys.argv[2]), out=sys.argv[3], ledger=sys.argv[4],
                         engine=DuckDBEngine(threads=1))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("step", "state"),
    [
        ("planned", None),
        ("aggregated", None),
        ("charged", "charged"),
        ("denoised", "charged"),
        ("staged", "writing"),
        ("committed", "writing"),
        ("never", "delivered"),
    ],
)
def test_sigkill_at_each_step_leaves_nothing_or_everything(
    tmp_path: Path, step: str, state: str | None
) -> None:
    src, _ = small_release_data(tmp_path)
    ledger = make_ledger(tmp_path)
    spec = small_spec_toml(tmp_path / "s.toml", src, "james_stein")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _KILLER, step, str(spec), str(out_dir / "r.csv"), str(ledger)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    killed = step != "never"
    assert proc.returncode == (-signal.SIGKILL if killed else 0), proc.stderr
    written = files(out_dir)
    complete = ["r.csv", "r.csv.png", "r.csv.report.json"]
    if not any(name.endswith(".png") for name in written):
        complete.remove("r.csv.png")
    assert written in ([], complete)  # nothing, or the whole release
    assert no_temporary_files(tmp_path)
    charged = entries(ledger)
    if state is None:
        assert charged == [] and written == []
    else:
        (entry,) = charged
        assert entry.delivery == state
        assert (written == complete) == (step in ("committed", "never"))
        if state == "writing":
            assert all(str(out_dir / name) in entry.note for name in complete)


# ------------------------------------------- finding 6: a total function of the data


@pytest.mark.slow
def test_the_shape_and_messages_of_a_release_do_not_depend_on_the_records(tmp_path: Path) -> None:
    """Two neighbouring sources, one with every kind of unusable row: the same files, the
    same columns, the same summary lines (up to the noisy numbers)."""
    clean = tmp_path / "clean.csv"
    rows = "".join(f"{i},{i % 10}\n" for i in range(200))
    clean.write_text("uid,key\n" + rows)
    dirty = tmp_path / "dirty.csv"
    dirty.write_text(
        "uid,key\n" + rows + ",3\n" + "x,\n" + "y,99\n" + "z,abc\n" + "w,1,extra\n" + "v,2\r\n"
    )
    ledger = make_ledger(tmp_path)
    shapes = []
    for src in (clean, dirty):
        out = tmp_path / f"{src.stem}-out.csv"
        res = run_release(make_spec(src), out=out, ledger=ledger, engine=ENGINE)
        words = [line.split(":")[0] for line in res.summary.splitlines()]
        shapes.append((list(res.columns), {k: v.shape for k, v in res.columns.items()}, words))
    assert shapes[0] == shapes[1]


def _drop_scope(conn: Any) -> None:
    """A version-4 ledger made to look like version 3: no scope, no periods."""
    for table, column in (
        ("budgets", "scope"),
        ("budgets", "period"),
        ("budgets", "origin"),
        ("budgets", "series_column"),
        ("charges", "period"),
    ):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def test_ledger_schema_3_is_upgraded_in_place(tmp_path: Path) -> None:
    """Version 3 had no series: its budgets have scope 'all' and its charges no period."""
    import sqlite3

    ledger = make_ledger(tmp_path)
    with Ledger(ledger, create=False) as led:
        led.charge("d", sigma=10.0, sensitivity=1.0)
    conn = sqlite3.connect(ledger)
    _drop_scope(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with Ledger(ledger, create=False) as led:
        status = led.remaining("d")
        assert (status.scope, status.period, status.periods) == ("all", None, 0)
        led.charge("d", sigma=10.0, sensitivity=1.0, period="2013-01-13 09:00")
        assert led.grid("d") == ("all", None, None, None)
    assert [e.period for e in entries(ledger)] == [None, "2013-01-13 09:00:00"]
    conn = sqlite3.connect(ledger)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    conn.close()


def test_ledger_schema_1_is_upgraded_in_place(tmp_path: Path) -> None:
    import sqlite3

    ledger = make_ledger(tmp_path)
    with Ledger(ledger, create=False) as led:
        led.charge("d", sigma=10.0, sensitivity=1.0)
    conn = sqlite3.connect(ledger)  # make it look like a version-1 ledger
    conn.execute("ALTER TABLE charges DROP COLUMN delivery")
    conn.execute("ALTER TABLE charges DROP COLUMN note")
    conn.execute("ALTER TABLE charges DROP COLUMN eta")
    _drop_scope(conn)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    (entry,) = entries(ledger)
    assert entry.delivery is None and entry.mu == pytest.approx(0.1) and entry.eta == 0.0
    with Ledger(ledger, create=False) as led:
        led.record_delivery(entry.id, "delivered")
    assert entries(ledger)[0].delivery == "delivered"
    conn = sqlite3.connect(ledger)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    conn.close()


def test_ledger_schema_2_is_upgraded_in_place(tmp_path: Path) -> None:
    """Version 2 lacked ``eta``: its charges spent none, and a threshold charge then fits
    ``√Σμ² ≤ gdp_mu(ε, δ − Ση)``."""
    import sqlite3

    from dpgauss.privacy.events import ThresholdEvent

    ledger = make_ledger(tmp_path)
    with Ledger(ledger, create=False) as led:
        led.charge("d", sigma=10.0, sensitivity=1.0)
    conn = sqlite3.connect(ledger)
    conn.execute("ALTER TABLE charges DROP COLUMN eta")
    _drop_scope(conn)
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with Ledger(ledger, create=False) as led:
        assert led.remaining("d").eta_spent == 0.0
        led.charge_event("d", ThresholdEvent(0.05, 1e-9))
        status = led.remaining("d")
    assert status.eta_spent == 1e-9 and status.mu_effective < status.mu_budget
    assert [e.eta for e in entries(ledger)] == [0.0, 1e-9]
    conn = sqlite3.connect(ledger)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    conn.close()


def test_the_check_command_is_confidential_and_exits_1_on_a_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data.csv"
    path.write_text("uid,key\n1,2\n,3\n2,4\n")
    spec = small_spec_toml(tmp_path / "s.toml", path, "none", unit='on_null = "check_fails"')
    assert main(["check", str(spec)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("== CONFIDENTIAL") and "FAIL: 1 rows without a unit id" in out
    assert main(["check", str(spec), "--json"]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["ok"] is False and obj["rows"]["null_unit"] == 1
    assert files(tmp_path) == ["data.csv", "s.toml"]  # nothing written
    np.testing.assert_equal(obj["rows"]["kept"], 2)


def test_a_value_the_reader_rejects_is_never_quoted_by_a_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Parquet string that is not UTF-8 stops DuckDB's reader.  The release is refused
    before the charge with one fixed message (the value stays out of it); `dpgauss check`
    gives the data owner the detail, marked confidential."""
    from dpgauss.release.check import check_source
    from dpgauss.release.engines.base import AGGREGATION_FAILED

    bad = pa.array([b"ok", b"\xff\xfe secret"], pa.binary()).view(pa.string())
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table({"uid": [1, 2], "key": [0, 1], "note": bad}), src)
    ledger = make_ledger(tmp_path)
    with pytest.raises(ValueError) as info:
        run_release(make_spec(src), out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    assert str(info.value) == AGGREGATION_FAILED and "secret" not in str(info.value)
    assert entries(ledger) == []
    with pytest.raises(ValueError, match="CONFIDENTIAL") as info:
        check_source(make_spec(src), engine=ENGINE)
    assert "UTF" in str(info.value)
