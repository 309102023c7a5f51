"""Series (issue #29 item 2): ``[series]``, ``[unit] scope``, one period per release, and the
ledger's composition for both scopes (:mod:`dpgauss.release.series`)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss import cli
from dpgauss.errors import BudgetExceeded
from dpgauss.privacy import gdp_mu
from dpgauss.release.ledger import Ledger
from dpgauss.release.series import Period, parse_period, period_path, period_spec
from dpgauss.release.spec import ReleaseSpec, SeriesSpec, load_spec

from ..helpers import read_csv

pytest.importorskip("duckdb")


def _spec(src: Path | str = "x.csv", **tables: object) -> ReleaseSpec:
    data: dict[str, object] = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 4},
        "series": {"column": "t", "period": "1h"},
        "bounds": {"max_records_per_unit": 2},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "none"},
    }
    data.update(tables)
    return ReleaseSpec.from_dict({k: v for k, v in data.items() if v is not None})


# ------------------------------------------------------------------------------ the spec


def test_series_table_is_parsed_and_normalised() -> None:
    s = SeriesSpec(column="t", period=" 15min ", origin="2013-01-07")
    assert (s.period, s.origin, s.period_us) == ("15min", "2013-01-07 00:00:00", 900 * 10**6)
    assert s.origin_us == int((datetime(2013, 1, 7) - datetime(1970, 1, 1)).total_seconds()) * 10**6
    spec = _spec()
    assert spec.series == SeriesSpec(column="t", period="1h")
    assert spec.to_dict()["series"] == {
        "column": "t",
        "period": "1h",
        "origin": "1970-01-01 00:00:00",
        "history": 0,
    }
    assert ReleaseSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"series": {"column": "t", "period": "1 month"}}, r"\[series\] period must be a dur"),
        ({"series": {"column": "t", "period": "0h"}}, r"\[series\] period must be a duration"),
        ({"series": {"column": "t"}}, r"\[series\] period is required"),
        ({"series": {"period": "1h"}}, r"\[series\] column is required"),
        (
            {"series": {"column": "t", "period": "1h", "origin": "2013-01-01T00:00+01:00"}},
            r"\[series\] origin must be a timestamp without a time zone",
        ),
        ({"series": {"column": "t", "period": "1h", "every": 2}}, "unknown key 'every'"),
        ({"series": None, "unit": {"column": "uid", "scope": "period"}}, "needs a \\[series\\]"),
        ({"unit": {"column": "uid", "scope": "hour"}}, r"\[unit\] scope must be one of"),
        ({"filter": {"column": "f", "start": 0}}, "a series release reads one window"),
        ({"filter": {"column": "t", "start": 0.5}}, "must be a window of timestamps"),
    ],
)
def test_bad_series_specs_are_refused_naming_the_key(tables: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        _spec(**tables)


def test_the_series_column_must_be_declared_with_types() -> None:
    with pytest.raises(ValueError, match=r"\[series\] column 't' is not declared"):
        _spec(source={"path": "x.csv", "types": {"uid": "int64", "key": "int64"}})
    _spec(source={"path": "x.csv", "types": {"uid": "int64", "key": "int64", "t": "timestamp"}})


# ------------------------------------------------------------------------------ periods


def test_a_period_is_named_by_its_start_on_the_grid() -> None:
    s = SeriesSpec(column="t", period="1h")
    p = parse_period(s, "2013-01-13T09:00:00")
    assert p == Period(377_241, "2013-01-13 09:00:00", "2013-01-13 10:00:00")
    assert p.name == "2013-01-13T09-00-00"
    assert parse_period(s, datetime(2013, 1, 13, 9)) == p
    with pytest.raises(ValueError, match=r"nearest are '2013-01-13 09:00:00' and '2013-01-13 "):
        parse_period(s, "2013-01-13 09:30")
    with pytest.raises(ValueError, match="without a time zone"):
        parse_period(s, "2013-01-13T09:00:00+00:00")
    with pytest.raises(ValueError, match="must be a timestamp"):
        parse_period(s, "soon")
    with pytest.raises(TypeError, match="must be a timestamp"):
        parse_period(s, 1358067600)


def test_periods_before_the_origin_and_odd_lengths() -> None:
    week = SeriesSpec(column="t", period="1w", origin="2013-01-07")  # Mondays
    p = parse_period(week, "2012-12-31")
    assert (p.index, p.stop) == (-1, "2013-01-07 00:00:00")
    odd = SeriesSpec(column="t", period="7us", origin="2000-01-01 00:00:00.000003")
    q = parse_period(odd, "2000-01-01 00:00:00.000010")
    assert (q.index, q.start, q.stop) == (
        1,
        "2000-01-01 00:00:00.000010",
        "2000-01-01 00:00:00.000017",
    )
    with pytest.raises(ValueError, match="ends after the year 9999"):
        parse_period(SeriesSpec(column="t", period="1d"), "9999-12-31")


@given(
    st.integers(min_value=1, max_value=10**12),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.integers(min_value=-(10**6), max_value=10**6),
)
@settings(max_examples=200, deadline=None)
def test_the_grid_is_exact(length_us: int, origin_us: int, k: int) -> None:
    """Every period's start parses back to its index; its end is the next one's start."""
    at = origin_us + k * length_us  # µs since 1970: inside the years 2 … 9998
    if not -(62 * 10**15) < at < 253 * 10**15:
        return
    origin = datetime(1970, 1, 1) + timedelta(microseconds=origin_us)
    s = SeriesSpec(column="t", period=f"{length_us}us", origin=origin)
    start = origin + timedelta(microseconds=k * length_us)
    p = parse_period(s, start)
    assert p.index == k and datetime.fromisoformat(p.start) == start
    assert datetime.fromisoformat(p.stop) - start == timedelta(microseconds=length_us)
    if length_us > 1:
        with pytest.raises(ValueError, match="is not the start"):
            parse_period(s, start + timedelta(microseconds=1))


def test_the_period_spec_is_the_window_intersected_with_the_filter() -> None:
    spec = _spec()
    p = parse_period(spec.series, "2013-01-13 09:00")
    f = period_spec(spec, p).filter
    assert (f.column, f.start, f.stop) == ("t", "2013-01-13 09:00:00", "2013-01-13 10:00:00")
    narrow = _spec(filter={"column": "t", "start": "2013-01-13 09:15", "stop": "2013-02-01"})
    f = period_spec(narrow, p).filter
    assert (f.start, f.stop) == ("2013-01-13 09:15:00", "2013-01-13 10:00:00")
    with pytest.raises(ValueError, match="lies outside the \\[filter\\] window"):
        period_spec(narrow, parse_period(spec.series, "2013-01-13 08:00"))
    with pytest.raises(ValueError, match="the spec has no \\[series\\]"):
        period_spec(_spec(series=None), p)


def test_a_period_has_its_own_file_name() -> None:
    p = Period(0, "2013-01-13 09:00:00", "2013-01-13 10:00:00")
    assert period_path(Path("/o/out.csv"), p) == Path("/o/out.2013-01-13T09-00-00.csv")
    assert period_path(Path("/o/h_{period}.parquet"), p) == Path("/o/h_2013-01-13T09-00-00.parquet")
    assert period_path(Path("/o/out"), p) == Path("/o/out.2013-01-13T09-00-00")


# ------------------------------------------------------------------------------ the ledger


def _fits(mus: list[float], etas: list[float], eps: float, dlt: float) -> bool:
    """The ledger's rule, from the definition: Σμ² ≤ gdp_mu(ε, δ − Ση)² in exact arithmetic
    (μ_B rounded as the ledger rounds it)."""
    budget = float(gdp_mu(eps, dlt))
    eta = sum(Fraction(e) for e in etas)
    if eta:
        rest = Fraction(dlt) - eta
        if rest <= 0:
            return False
        budget = min(budget, float(gdp_mu(eps, float(rest))))
    return sum(Fraction(m) ** 2 for m in mus) <= Fraction(budget) ** 2


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.01, max_value=0.4),
            st.sampled_from([None, "2013-01-13 09:00", "2013-01-13 10:00", "2013-01-13 11:00"]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["all", "period"]),
)
@settings(max_examples=60, deadline=None)
def test_the_ledger_composes_both_scopes_as_the_formula_says(tmp_path_factory, charges, scope):
    """scope 'all': √Σμ² over every charge; 'period': the charges of no period with each
    period's own — a charge is accepted iff every such set still fits."""
    eps, dlt = 1.0, 1e-6
    path = tmp_path_factory.mktemp("ledger") / "b.sqlite"
    grid = {"scope": "period", "period": "1h", "column": "t"} if scope == "period" else {}
    accepted: list[tuple[float, str | None]] = []
    with Ledger(path) as led:
        led.create_budget("d", eps, dlt, **grid)
        for mu, period in charges:
            trial = [*accepted, (mu, period)]
            if scope == "all":
                sets = [[m for m, _ in trial]]
            else:
                common = [m for m, p in trial if p is None]
                periods = {p for _, p in trial if p is not None}
                sets = [common + [m for m, q in trial if q == p] for p in periods] or [common]
            want = all(_fits(s, [], eps, dlt) for s in sets)
            try:
                led.charge("d", mu=mu, period=period)
                got = True
            except BudgetExceeded:
                got = False
            assert got == want, (accepted, mu, period)
            if got:
                accepted.append((mu, period))
        status = led.remaining("d")
        led.check()
    worst = max(
        (
            sum(Fraction(m) ** 2 for m in s)
            for s in sets
            if all(_fits(s, [], eps, dlt) for s in sets)
        ),
        default=None,
    )
    assert status.charges == len(accepted)
    if accepted and worst is not None and scope == "all":
        assert status.mu_spent == pytest.approx(math.sqrt(sum(m * m for m, _ in accepted)))


def test_a_period_budget_holds_for_each_period(tmp_path: Path) -> None:
    mu_b = float(gdp_mu(1.0, 1e-6))
    with Ledger(tmp_path / "b.sqlite") as led:
        led.create_budget("d", 1.0, 1e-6, scope="period", period="1h", column="t")
        assert led.grid("d") == ("period", "1h", "1970-01-01 00:00:00", "t")
        for h in (9, 10, 11):  # three periods, each with (almost) the whole budget
            led.charge("d", mu=0.9 * mu_b, period=f"2013-01-13T{h:02}:00")
        with pytest.raises(BudgetExceeded):
            led.charge("d", mu=0.5 * mu_b, period="2013-01-13 10:00:00")  # the same period
        with pytest.raises(BudgetExceeded):
            led.charge("d", mu=0.5 * mu_b)  # a release of every period: no room in any
        led.charge("d", mu=0.4 * mu_b)  # fits beside each period's 0.9: 0.81 + 0.16 <= 1
        with pytest.raises(ValueError, match="is not the start of a 1h period"):
            led.charge("d", mu=0.01, period="2013-01-13 12:30")
        s = led.remaining("d")
        assert (s.scope, s.period, s.periods, s.charges) == ("period", "1h", 3, 4)
        assert s.mu_spent == pytest.approx(math.hypot(0.9, 0.4) * mu_b)
        fresh = led.remaining("d", period="2013-01-13 12:00")
        assert fresh.mu_spent == pytest.approx(0.4 * mu_b)
        assert [e.period for e in led.charges("d")] == [
            "2013-01-13 09:00:00",
            "2013-01-13 10:00:00",
            "2013-01-13 11:00:00",
            None,
        ]
    with pytest.raises(ValueError, match="needs the series' period"):
        Ledger(tmp_path / "c.sqlite").create_budget("d", 1.0, 1e-6, scope="period")
    with pytest.raises(ValueError, match="needs the series' column"):
        Ledger(tmp_path / "c.sqlite").create_budget("d", 1.0, 1e-6, scope="period", period="1h")
    with pytest.raises(ValueError, match="go with scope = 'period' only"):
        Ledger(tmp_path / "c.sqlite").create_budget("d", 1.0, 1e-6, period="1h")


def test_threshold_deltas_add_per_period(tmp_path: Path) -> None:
    """η spent outside μ-GDP composes like μ: per period, with the charges of no period."""
    with Ledger(tmp_path / "b.sqlite") as led:
        led.create_budget("d", 1.0, 1e-6, scope="period", period="1d", column="t")
        led.charge("d", mu=0.01, eta=6e-7, period="2013-01-13")
        led.charge("d", mu=0.01, eta=6e-7, period="2013-01-14")  # another day: fits
        with pytest.raises(BudgetExceeded):
            led.charge("d", mu=0.01, eta=6e-7, period="2013-01-13")  # 1.2e-6 > δ
        assert led.remaining("d").eta_spent == pytest.approx(6e-7)


# ------------------------------------------------------------------------------ releases


def _records(path: Path) -> Path:
    """Units 0..29; unit u has 3 records in each of the hours 09, 10 and 11 (key u % 4),
    and one at 12:00 sharp (the next period)."""
    lines = ["uid,key,t"]
    for u in range(30):
        for h in (9, 10, 11):
            lines += [f"{u},{u % 4},2013-01-13 {h:02}:{m:02}:00" for m in (0, 20, 59)]
        lines.append(f"{u},{u % 4},2013-01-13 12:00:00")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("scope", ["all", "period"])
def test_three_periods_bounded_within_each(tmp_path: Path, zero_noise, scope: str) -> None:
    from dpgauss.release.pipeline import run_release

    src = _records(tmp_path / "r.csv")
    ledger = tmp_path / "b.sqlite"
    grid = {"scope": "period", "period": "1h", "column": "t"} if scope == "period" else {}
    with Ledger(ledger) as led:
        led.create_budget("d", 3.0 if scope == "all" else 1.0, 1e-6, **grid)
    spec = _spec(
        src,
        unit={"column": "uid", "scope": scope},
        output={"path": str(tmp_path / "out.csv"), "plot": False},
    )
    want = np.bincount(np.arange(30) % 4, minlength=4) * 2.0  # b = 2 of each unit's 3
    reports = []
    for h in (9, 10, 11):
        with zero_noise():
            res = run_release(spec, ledger=ledger, period=f"2013-01-13T{h:02}:00:00")
        assert np.array_equal(res.columns["released"], want)
        assert res.diagnostics["rows"]["outside_filter"] == 30 * 7  # 6 other records + 12:00
        reports.append(json.loads(Path(res.report_path).read_text()))
        assert f"period     : [2013-01-13 {h:02}:00:00, 2013-01-13 {h + 1:02}:00:00)" in res.summary
    names = sorted(p.name for p in tmp_path.glob("out.*.csv"))
    assert names == [f"out.2013-01-13T{h:02}-00-00.csv" for h in (9, 10, 11)]
    assert [float(r["released"]) for r in read_csv(tmp_path / names[0])] == list(want)
    assert reports[1]["series"] == {
        "column": "t",
        "period": "1h",
        "origin": "1970-01-01 00:00:00",
        "index": 377_242,
        "start": "2013-01-13 10:00:00",
        "stop": "2013-01-13 11:00:00",
        "scope": scope,
    }
    assert reports[0]["spec"]["series"]["period"] == "1h" and "filter" not in reports[0]["spec"]
    with Ledger(ledger, create=False) as led:
        entries = led.charges("d")
        status = led.remaining("d")
    assert [e.period[11:13] for e in entries] == ["09", "10", "11"]
    mu = entries[0].mu
    if scope == "all":  # the periods compose: √3 μ
        assert status.mu_spent == pytest.approx(math.sqrt(3) * mu)
    else:  # disjoint periods: one period's μ
        assert status.mu_spent == pytest.approx(mu) and status.periods == 3
    with pytest.raises(BudgetExceeded if scope == "period" else ValueError):
        with zero_noise():  # scope 'period': the same period again does not fit;
            # scope 'all': its file exists (and the budget of 3 is spent anyway)
            run_release(spec, ledger=ledger, period="2013-01-13T09:00:00")


def test_the_spec_and_the_budget_must_agree_on_the_scope(tmp_path: Path) -> None:
    from dpgauss.release.plan import plan_release

    src = _records(tmp_path / "r.csv")
    ledger = tmp_path / "b.sqlite"
    with Ledger(ledger) as led:
        led.create_budget("d", 1.0, 1e-6)
        led.create_budget("p", 1.0, 1e-6, scope="period", period="1h", column="t")
        led.create_budget("c", 1.0, 1e-6, scope="period", period="1h", column="dropoff")
        led.create_budget("w", 1.0, 1e-6, scope="period", period="2h", column="t")
    out = {"path": str(tmp_path / "o.csv"), "plot": False}
    per = {"column": "uid", "scope": "period"}

    def plan(dataset: str, unit: dict) -> object:
        spec = _spec(
            src, unit=unit, output=out, privacy={"epsilon": 1.0, "delta": 1e-6, "dataset": dataset}
        )
        return plan_release(spec, ledger=ledger, period="2013-01-13 10:00")

    with pytest.raises(ValueError, match="scope = 'period', but the budget of dataset 'd'"):
        plan("d", per)
    with pytest.raises(ValueError, match="scope = 'all', but the budget of dataset 'p'"):
        plan("p", {"column": "uid"})
    with pytest.raises(ValueError, match="is for the periods of '2h'"):
        plan("w", per)
    with pytest.raises(ValueError, match="from '1970-01-01 00:00:00' of 'dropoff'"):
        plan("c", per)
    assert plan("p", per).period.start == "2013-01-13 10:00:00"
    with pytest.raises(ValueError, match="give period="):
        plan_release(_spec(src, output=out), ledger=ledger)
    with pytest.raises(ValueError, match="the spec has no \\[series\\]"):
        plan_release(_spec(src, output=out, series=None), ledger=ledger, period="2013-01-13")


# ------------------------------------------------------------------------------ the CLI


def test_the_command_line_releases_one_period(tmp_path: Path, capsys, zero_noise) -> None:
    src = _records(tmp_path / "r.csv")
    ledger = tmp_path / "b.sqlite"
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'[source]\npath = "{src}"\n[unit]\ncolumn = "uid"\nscope = "period"\n'
        '[series]\ncolumn = "t"\nperiod = "1h"\n'
        '[domain]\nkind = "range"\ncolumn = "key"\nstart = 0\nstop = 4\n'
        "[bounds]\nmax_records_per_unit = 2\n"
        '[privacy]\nepsilon = 1.0\ndelta = 1e-6\ndataset = "d"\n'
        f'[denoise]\nmethod = "none"\n[output]\npath = "{tmp_path / "h.csv"}"\nplot = false\n'
    )
    assert load_spec(spec).unit.scope == "period"
    base = ["--ledger", str(ledger)]
    assert (
        cli.main(
            ["budget", "init", "d", "--epsilon", "1", "--delta", "1e-6", "--scope", "period", *base]
        )
        == 2
    )
    assert "--scope/--period/--column/--origin: scope = 'period' needs" in capsys.readouterr().err
    assert not ledger.exists()  # a refusal creates no ledger
    init = ["budget", "init", "d", "--epsilon", "1", "--delta", "1e-6", "--scope", "period"]
    assert cli.main([*init, "--period", "1h", *base]) == 2
    assert "needs the series' column" in capsys.readouterr().err
    assert cli.main([*init, "--period", "1h", "--column", "t", *base]) == 0
    assert "scope     : a unit within one 1h period of 't'" in capsys.readouterr().out
    assert cli.main(["release", str(spec), *base, "--no-progress"]) == 2
    assert "pass --period START" in capsys.readouterr().err
    with zero_noise():
        code = cli.main(
            [
                "release",
                str(spec),
                *base,
                "--period",
                "2013-01-13T11:00:00",
                "--json",
                "--no-progress",
            ]
        )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["output"] == "h.2013-01-13T11-00-00.csv" and out["series"]["scope"] == "period"
    assert cli.main(["budget", "show", "d", *base]) == 0
    assert "[period 2013-01-13 11:00:00]" in capsys.readouterr().out


def test_budget_plan_splits_a_cap_over_periods(capsys) -> None:
    argv = ["budget", "plan", "--epsilon", "3", "--delta", "1e-5", "--periods", "365", "--json"]
    assert cli.main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["periods"] == plan["queries"] == 365
    assert plan["mu_per_query"] * math.sqrt(365) <= plan["mu_budget"] * (1 + 1e-12)
    assert cli.main(argv[:-1]) == 0
    assert "365 periods under [unit] scope = 'all'" in capsys.readouterr().out
    assert cli.main([*argv[:-1], "--queries", "2"]) == 2
    assert "not both" in capsys.readouterr().err
