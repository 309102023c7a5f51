"""Exact key mapping (``values`` and ``range`` domains) in the DuckDB engine.

Each check writes records of one column type (Parquet ``int64``, ``uint64``, ``float64``,
``float32``, ``decimal``, ``string``, ``bool``, ``timestamp``) and reads back *which key each
record got*: every record is its own unit and sums the value ``2**i`` (``i`` its position), so
the bounded sum of a key is the set of its records, bit by bit — exact, and a record counted
under two keys would show.  The expected key comes from an independent exact reference
(``fractions.Fraction``) of the documented rules (:mod:`dpgauss.release.domains.keys`).

The Spark engine runs the same checks (fewer examples) in ``test_engine_spark.py``.
"""

from __future__ import annotations

import itertools
import math
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from dpgauss.release import ReleaseSpec, bounded_aggregate  # noqa: E402
from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.engines.base import EngineError  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402

DUCK = DuckDBEngine(threads=1)
MAX_RECORDS = 52  # 2**i stays exact in a double sum
_files = itertools.count()

# ----------------------------------------------------------------- the reference

WS = " \t\n\x0b\f\r"
INT_LITERAL = re.compile(r"[+-]?[0-9]+(_[0-9]+)*")


def read_exact(kind: str, raw: Any) -> Fraction | None:
    """The record's value by the documented rules, or None (invalid)."""
    if raw is None:
        return None
    if kind in ("int64", "uint64", "bool"):
        return Fraction(int(raw))
    if kind in ("float64", "float32"):
        f = float(np.float32(raw)) if kind == "float32" else float(raw)
        return Fraction(f) if math.isfinite(f) else None
    if kind.startswith("decimal"):
        return Fraction(raw)
    if kind == "string":
        t = raw.strip(WS)
        if INT_LITERAL.fullmatch(t):
            v = int(t.replace("_", ""))
            if abs(v) < 10**38:
                return Fraction(v)
        try:
            f = float(t.replace("_", ""))
        except ValueError:
            return None
        return Fraction(f) if math.isfinite(f) and t.lower() not in ("inf", "nan") else None
    return None  # timestamps and other types: not numbers


def _as_written(v: Any) -> Fraction:
    """A spec number as the decimal it was written as (a float: its shortest repr)."""
    return Fraction(Decimal(repr(v))) if isinstance(v, float) else Fraction(v)


def range_reference(domain: dict, x: Fraction | None) -> int | None:
    s, t, p = (Fraction(domain[k]) for k in ("start", "stop", "step"))
    n = math.ceil((t - s) / p)
    ws, wt, wp = (_as_written(domain[k]) for k in ("start", "stop", "step"))
    ratio = (wt - ws) / wp
    if ratio.denominator == 1 and n == ratio.numerator + 1:  # as written: no sliver bin
        t = s + ratio.numerator * p
    if x is None or not s <= x < t:
        return None
    return math.floor((x - s) / p)


def values_reference(domain: dict, x: Fraction | None) -> int | None:
    keys = {Fraction(v): i for i, v in enumerate(domain["values"])}
    return None if x is None else keys.get(x)


# -------------------------------------------------------------------- the engine


def arrow(kind: str, values: list[Any]) -> Any:
    types = {
        "int64": pa.int64(),
        "uint64": pa.uint64(),
        "float64": pa.float64(),
        "float32": pa.float32(),
        "string": pa.string(),
        "bool": pa.bool_(),
    }
    if kind.startswith("decimal"):
        p, s = (int(v) for v in kind[len("decimal(") : -1].split(","))
        return pa.array(values, pa.decimal128(p, s))
    if kind == "timestamp":
        return pa.array(np.array(values, dtype="datetime64[us]"))
    return pa.array(values, types[kind])


def mapped_keys(
    engine: Any, kind: str, values: list[Any], domain: dict, tmp_path: Path
) -> list[int | None]:
    """The key the engine gives each record (None: none), read back bit by bit."""
    n = len(values)
    assert n <= MAX_RECORDS
    table = pa.table(
        {
            "uid": pa.array(range(n), pa.int64()),
            "x": arrow(kind, values),
            "v": pa.array([2.0**i for i in range(n)], pa.float64()),
        }
    )
    path = tmp_path / f"k{next(_files)}.parquet"
    pq.write_table(table, path)
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(path)},
            "unit": {"column": "uid"},
            "domain": {**domain, "column": "x"},
            "statistic": {"kind": "sum", "column": "v", "lower": 0.0, "upper": 2.0**52},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
        }
    )
    agg = bounded_aggregate(spec, salt=1, engine=engine)
    assert agg.sums is not None
    out: list[int | None] = [None] * n
    for key, (s, c) in enumerate(zip(agg.sums, agg.counts, strict=True)):
        bits = int(s)
        assert float(bits) == s and bin(bits).count("1") == c
        for i in range(n):
            if bits >> i & 1:
                assert out[i] is None, f"record {i} under two keys"
                out[i] = key
    return out


def check(engine: Any, kind: str, values: list[Any], domain: dict, tmp_path: Path) -> None:
    ref = range_reference if domain["kind"] == "range" else values_reference
    want = [ref(domain, read_exact(kind, v)) for v in values]
    got = mapped_keys(engine, kind, values, domain, tmp_path)
    bad = [(v, g, w) for v, g, w in zip(values, got, want, strict=True) if g != w]
    assert not bad, f"{kind} {domain}: (value, engine, exact) {bad[:5]}"


# --------------------------------------------------------------- the strategies

INTERESTING_FLOATS = [
    0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, 0.1, 0.2, 0.3, 0.25, 0.5,
    0.7, 1.0, 1.5, 3.0, 7.5, 10.0, 0.15, 0.05, 1e-3, 2.0**52, 2.0**53, 2.0**60, 1e15, 1e20,
    1e30, 1e36, -1.0, -2.5, -0.7, 1e300, 1.7e308,
]  # fmt: skip
INTERESTING_INTS = [
    0, 1, -1, 2, 3, 5, 10, 100, -7, 2**31, 2**52, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 3,
    2**60, 2**60 + 1, 2**62, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 10**18, 10**20, 10**30,
]  # fmt: skip
LIMITS = {"int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}


@st.composite
def range_domains(draw: Any) -> dict:
    from dpgauss.release.domains.keys import RangeBins

    if draw(st.booleans()):
        start = draw(st.sampled_from(INTERESTING_INTS) | st.integers(-(10**20), 10**20))
        start = draw(st.sampled_from([1, -1])) * start
        step = draw(st.sampled_from([1, 2, 3, 7, 10, 2**10, 10**6, 2**53 + 1, 10**15]))
    else:
        start = draw(
            st.sampled_from(INTERESTING_FLOATS)
            | st.floats(-1e6, 1e6)
            | st.sampled_from(INTERESTING_INTS[:12])
        )
        step = draw(
            st.sampled_from([0.1, 0.2, 0.3, 0.25, 0.5, 0.7, 0.15, 1e-3, 1.0, 2.5, 1e-300, 5e-324])
            | st.floats(1e-3, 1e3)
        )
    k = draw(st.integers(1, 40))
    stop_exact = (
        Fraction(start)
        + k * Fraction(step)
        - draw(st.sampled_from([0, 0, 1])) * (Fraction(step) / 3)
    )
    stop: Any = float(stop_exact) if isinstance(start, float) or isinstance(step, float) else None
    if stop is None:
        stop = math.ceil(stop_exact)
    try:
        RangeBins.of(start, stop, step)
    except (ValueError, TypeError):
        assume(False)
    return {"kind": "range", "start": start, "stop": stop, "step": step}


def near(q: Fraction, kind: str) -> list[Any]:
    """Values of the column kind at and around the exact number ``q``."""
    if kind in LIMITS:
        lo, hi = LIMITS[kind]
        c = math.ceil(q)
        return [v for v in (c - 1, c, c + 1) if lo <= v <= hi]
    if kind.startswith("decimal"):
        p, s = (int(v) for v in kind[len("decimal(") : -1].split(","))
        unit = Fraction(1, 10**s)
        m = math.ceil(q / unit)
        out = [Decimal(m + d).scaleb(-s) for d in (-1, 0, 1)]
        return [v for v in out if abs(v) < Decimal(10) ** (p - s)]
    if abs(q) > Fraction(1.7e308):
        return []
    f = float(q)
    out = [f, math.nextafter(f, math.inf), math.nextafter(f, -math.inf)]
    if kind == "float32":
        return [float(np.float32(v)) for v in out if abs(v) < 3e38]
    if kind == "string":
        return [repr(v) for v in out] + ([str(math.ceil(q))] if abs(q) < 10**40 else [])
    return out


def decorate(text: str, draw: Any) -> str:
    """Whitespace, a sign and digit separators, as CSV text may have them."""
    pad = draw(st.sampled_from(["", " ", "\t", "  ", " \n", "\x0b", "\r"]))
    if INTERESTING_LITERAL.fullmatch(text) and draw(st.booleans()):
        digits = text.lstrip("+-")
        if len(digits) > 3:
            digits = digits[:-3] + "_" + digits[-3:]
        text = ("-" if text.startswith("-") else draw(st.sampled_from(["", "+"]))) + digits
    return pad + text + draw(st.sampled_from(["", " ", "\t"]))


INTERESTING_LITERAL = re.compile(r"[+-]?[0-9]+")
KINDS = ["int64", "uint64", "float64", "float32", "decimal(20,2)", "decimal(38,10)", "string"]


@st.composite
def records(draw: Any, anchors: list[Fraction], kind: str) -> list[Any]:
    pool: list[Any] = []
    for q in anchors:
        pool += near(q, kind)
    if kind in LIMITS:
        lo, hi = LIMITS[kind]
        pool += [v for v in INTERESTING_INTS if lo <= v <= hi]
        pool.append(draw(st.integers(lo, hi)))
    elif kind.startswith("decimal"):
        pool += [Decimal(0), Decimal("0.1"), Decimal("-0.5")]
    else:
        pool += [*INTERESTING_FLOATS, math.nan, math.inf, -math.inf, draw(st.floats(-1e6, 1e6))]
        if kind == "float32":
            pool = [float(np.float32(v)) for v in pool if not abs(v) > 3e38]
        if kind == "string":
            pool = [v if isinstance(v, str) else repr(v) for v in pool]
            pool += ["", "abc", "1e", "0x10", "nan", "inf", "1.5.1", "9" * 40, "-" + "9" * 38]
            pool += [str(v) for v in INTERESTING_INTS]
    picked = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=MAX_RECORDS))
    if kind == "string":
        picked = [decorate(v, draw) for v in picked]
    return picked


SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_range_keys_are_exact(tmp_path: Path, data: Any) -> None:
    from dpgauss.release.domains.keys import RangeBins

    domain = data.draw(range_domains())
    bins = RangeBins.of(domain["start"], domain["stop"], domain["step"])
    kind = data.draw(st.sampled_from(KINDS))
    edges = [bins.edge(i) for i in (0, 1, bins.size // 2, bins.size - 1, bins.size)]
    values = data.draw(records([*edges, bins.stop], kind))
    try:
        check(DUCK, kind, values, domain, tmp_path)
    except EngineError as exc:  # a decimal scale beyond 38 digits of exact arithmetic
        assert "cannot bin a DECIMAL column" in str(exc)


@st.composite
def value_domains(draw: Any) -> dict:
    pool = INTERESTING_INTS + INTERESTING_FLOATS + [0.1 + 0.2, 2.0**53 + 2, 1.2e16, 123.456]
    vals = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12))
    seen: dict[Fraction, Any] = {}
    for v in vals:
        seen.setdefault(Fraction(v), v)
    return {"kind": "values", "values": list(seen.values())}


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_value_keys_are_exact(tmp_path: Path, data: Any) -> None:
    domain = data.draw(value_domains())
    kind = data.draw(st.sampled_from(KINDS))
    anchors = [Fraction(v) for v in domain["values"]]
    values = data.draw(records(anchors, kind))
    check(DUCK, kind, values, domain, tmp_path)


# ------------------------------------------------------------- fixed type checks


#: (column kind, records, numeric keys): every Parquet type against exact matching.
NUMERIC_KEY_CASES = [
    ("int64", [2**60, 2**60 + 1, -5, 0, 2**63 - 1, 2**53 + 1], [2**60, 2**60 + 1, 0, 2.5]),
    ("uint64", [2**64 - 1, 2**63, 0, 5, 2**60 + 1], [2**64 - 1, 2**63, 5, 2**60 + 1, 0.0]),
    ("float32", [1.5, 0.1, -0.0, 16777217.0, 3.0, math.nan], [1.5, 0.1, 0.10000000149011612]),
    ("float64", [2.0**60, 0.1, -0.0, 2.0**53, 1e300, math.inf], [2**60, 2**60 + 1, 0.1, 0]),
    (
        "decimal(20,2)",
        [Decimal("0.10"), Decimal("1.50"), Decimal("3.00"), Decimal("-0.50")],
        [0.1, 1.5, 3, -0.5],
    ),
    ("string", ["1", "1.0", " 2 ", "1_000", "9007199254740993", "0.1"], [1, 2, 1000, 0.1]),
    ("string", ["9007199254740993", "9007199254740992", "1e3"], [2**53 + 1, 1000.0]),
    ("bool", [True, False, True, None], [0, 1, 2]),
]


def test_every_parquet_type_against_numeric_keys(tmp_path: Path) -> None:
    for kind, values, keys in NUMERIC_KEY_CASES:
        check(DUCK, kind, values, {"kind": "values", "values": keys}, tmp_path)
    # Timestamps are not numbers: invalid, not outside.
    ts = ["2013-01-01T00:00:00", "2013-01-02T00:00:00"]
    assert mapped_keys(DUCK, "timestamp", ts, {"kind": "values", "values": [0, 1]}, tmp_path) == [
        None,
        None,
    ]


def test_string_keys_compare_the_text(tmp_path: Path) -> None:
    def keys(kind: str, values: list[Any], keys: list[str]) -> list[int | None]:
        return mapped_keys(DUCK, kind, values, {"kind": "values", "values": keys}, tmp_path)

    assert keys("int64", [2**60, -5, 7], [str(2**60), "-5"]) == [0, 1, None]
    assert keys("uint64", [2**64 - 1], [str(2**64 - 1)]) == [0]
    assert keys("bool", [True, False], ["true", "false"]) == [0, 1]
    assert keys("decimal(10,2)", [Decimal("0.10"), Decimal("1.50")], ["0.10", "1.5"]) == [0, None]
    stamps = ["2013-01-01T00:00:00", "2013-01-01T00:00:00.500000"]
    assert keys("timestamp", stamps, ["2013-01-01 00:00:00", "2013-01-01 00:00:00.5"]) == [0, 1]
    assert keys("string", [" 1", "1", "01"], ["1", "01"]) == [None, 0, 1]  # text, untrimmed
    assert keys("float64", [0.1, 1e20], ["0.1", "1e+20"]) == [None, None]  # engine-dependent


# ---------------------------------------------------------------- the findings


def test_values_equal_as_doubles_match_one_key_each(tmp_path: Path) -> None:
    """Regression: keys equal as doubles (2**60 and 2**60 + 1 with a float key, 2**53 + 1 and
    2.0**53) used to both match one record (it was counted twice)."""
    domain = {"kind": "values", "values": [2**60, 2**60 + 1, 0.5]}
    assert mapped_keys(DUCK, "int64", [2**60, 2**60 + 1], domain, tmp_path) == [0, 1]
    assert mapped_keys(DUCK, "string", [str(2**60), "0.5"], domain, tmp_path) == [0, 2]
    domain = {"kind": "values", "values": [2**53 + 1, 2.0**53]}
    got = mapped_keys(DUCK, "string", ["9007199254740992", "9007199254740993"], domain, tmp_path)
    assert got == [1, 0]
    got = mapped_keys(DUCK, "float64", [2.0**53, 2.0**53 + 2], domain, tmp_path)
    assert got == [1, None]
    # A HUGEINT-keyed domain against text: 1.5 is not the integer 2.
    domain = {"kind": "values", "values": [2, 2**60]}
    assert mapped_keys(DUCK, "string", ["1.5", "2", "2.0", "0x10"], domain, tmp_path) == [
        None,
        0,
        0,
        None,
    ]


def test_an_integer_range_beyond_2_53_is_exact(tmp_path: Path) -> None:
    """Regression: with start = 2**53 + 3 and stop = 2**53 + 7 (ints), the float bin count and
    the exact integer key disagreed: the record 2**53 + 7 got key 4 of a 4-key domain (an
    IndexError that failed every release of the file)."""
    domain = {"kind": "range", "start": 2**53 + 3, "stop": 2**53 + 7, "step": 1}
    values = [2**53 + 2, 2**53 + 3, 2**53 + 6, 2**53 + 7, 2**53 + 8]
    assert mapped_keys(DUCK, "int64", values, domain, tmp_path) == [None, 0, 3, None, None]
    text = [str(v) for v in values]
    assert mapped_keys(DUCK, "string", text, domain, tmp_path) == [None, 0, 3, None, None]
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": "x.csv"},
            "unit": {"column": "u"},
            "domain": {**domain, "column": "x"},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    labels = resolve_domain(spec).labels.tolist()
    assert labels == [2**53 + 3, 2**53 + 4, 2**53 + 5, 2**53 + 6]


def test_float_range_edges_stop_and_counts(tmp_path: Path) -> None:
    edge = {"kind": "range", "start": 0.0, "stop": 1.0, "step": 0.25}
    below = math.nextafter(1.0, 0.0)
    values = [0.5, math.nextafter(0.5, 0.0), below, 1.0, -0.0, -5e-324, 0.25]
    assert mapped_keys(DUCK, "float64", values, edge, tmp_path) == [2, 1, 3, None, 0, None, 1]
    # 7.5 / 0.15 is exactly 50.000000000000002 in the doubles, but 50 as written: 50 bins
    # (issue #28, item 3), and a DECIMAL value in the sliver beyond the 50th is in none.
    sliver = {"kind": "range", "start": 0, "stop": 7.5, "step": 0.15}
    dec = [Decimal("7.4999999999999998"), Decimal("7.4999999999999997"), Decimal("7.5")]
    assert mapped_keys(DUCK, "decimal(20,16)", dec, sliver, tmp_path) == [None, 49, None]
    # 4.3 - 0.3 rounds to 4.0, so floats put 4.3 at bin 40; exactly it is below that edge.
    shift = {"kind": "range", "start": 0.3, "stop": 6.2, "step": 0.1}
    assert mapped_keys(DUCK, "float64", [4.3, 0.3, 6.1], shift, tmp_path) == [39, 0, 57]


def test_csv_text_reads_like_the_parquet_string_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    rows = ["9007199254740993", " 2 ", "1_000", "0.1", "1e3", "abc", "", "4.3"]
    path.write_text("uid,x,v\n" + "".join(f'{i},"{r}",{2.0**i}\n' for i, r in enumerate(rows)))
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(path)},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "x", "values": [2**53 + 1, 2, 1000, 0.1]},
            "statistic": {"kind": "sum", "column": "v", "lower": 0.0, "upper": 2.0**52},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    agg = bounded_aggregate(spec, salt=1, engine=DUCK)
    assert agg.sums is not None
    assert agg.sums.tolist() == [1.0, 2.0, 4.0 + 16.0, 8.0]
    assert (agg.rows.invalid_domain, agg.rows.outside_domain) == (2, 1)


@pytest.mark.slow
def test_decimal_scale_beyond_exact_arithmetic_is_a_clear_error(tmp_path: Path) -> None:
    domain = {"kind": "range", "start": 0.1, "stop": 1e6, "step": 0.1}
    with pytest.raises(EngineError, match=r"cannot bin a DECIMAL column of scale 30 exactly"):
        mapped_keys(DUCK, "decimal(38,30)", [Decimal("0.5")], domain, tmp_path)


def test_a_decimal_range_is_counted_as_written(tmp_path: Path) -> None:
    """Issue #28, item 3: 52.5195 to 52.5245 by 0.0005 is 10 bins (the doubles' exact ratio
    is just above 10, which gave an 11th bin starting at stop); the last edge is 52.524 and
    stop itself is in no bin, on the engine as in the reference."""
    from dpgauss.release.domains.keys import RangeBins

    dom = {"kind": "range", "start": 52.5195, "stop": 52.5245, "step": 0.0005}
    assert Fraction(52.5245) > Fraction(52.5195) + 10 * Fraction(0.0005)  # the trap
    bins = RangeBins.of(dom["start"], dom["stop"], dom["step"])
    assert bins.size == 10 and bins.labels()[-1] == 52.524
    assert bins.stop == Fraction(52.5195) + 10 * Fraction(0.0005)
    last = float(bins.stop)
    values = [52.5195, 52.52, 52.524, math.nextafter(last, 0.0), last, 52.5245]
    values += [math.nextafter(last, math.inf), 52.5194]
    got = mapped_keys(DUCK, "float64", values, dom, tmp_path)
    assert got == [range_reference(dom, Fraction(v)) for v in values]
    assert got[:3] == [0, 1, 9] and got[-1] is None and got[-3] is None


def test_toml_ranges_are_read_as_the_decimals_written(tmp_path: Path) -> None:
    """``load_spec`` keeps each TOML float's text: more digits than the double's repr count
    (a stop written just above 52.5245 is 11 bins), and the bin count of the summary and the
    report's structure give the count and the last edge."""
    from dpgauss.release.domains.key_domain import resolve_domain
    from dpgauss.release.spec import load_spec

    def spec(stop: str) -> Any:
        path = tmp_path / "s.toml"
        path.write_text(
            '[source]\npath = "x.csv"\n[unit]\ncolumn = "u"\n[domain]\nkind = "range"\n'
            f'column = "lat"\nstart = 52.5195\nstop = {stop}\nstep = 0.0005\n'
            "[bounds]\nmax_records_per_unit = 1\n"
            '[privacy]\nepsilon = 1.0\ndelta = 1e-6\ndataset = "d"\n'
        )
        return load_spec(path)

    assert spec("52.5245").domain.bins.size == 10
    assert spec("52.524500000000000000001").domain.bins.size == 11  # the text, not the repr
    assert spec("52.524_5").domain.bins.size == 10  # TOML's digit separators
    structure = resolve_domain(spec("52.5245")).structure
    assert structure == (
        "chain of 10 ordered bins of lat from 52.5195 by 0.0005, the last from 52.524"
    )


@settings(max_examples=300, deadline=None)
@given(
    digits=st.integers(0, 12),
    start=st.integers(-(10**15), 10**15),
    step=st.integers(1, 10**6),
    count=st.integers(1, 5000),
)
def test_decimal_ranges_have_the_count_as_written(
    digits: int, start: int, step: int, count: int
) -> None:
    """For decimals written with ``digits`` places, ``stop = start + count·step`` exactly in
    decimal gives ``count`` bins where the doubles' rounding alone would add a sliver bin,
    with edges the doubles' exact values, and never a bin beyond the stop."""
    from dpgauss.release.domains.keys import RangeBins, WrittenFloat

    def text(n: int) -> str:
        return str(Decimal(n).scaleb(-digits))

    s, t, p = text(start), text(start + count * step), text(step)
    try:
        bins = RangeBins.of(WrittenFloat(s), WrittenFloat(t), WrittenFloat(p))
    except ValueError as exc:  # a step too fine for distinct double edges
        assert "too fine" in str(exc)
        return
    binary = math.ceil((Fraction(float(t)) - Fraction(float(s))) / Fraction(float(p)))
    assert bins.size == (count if binary == count + 1 else binary)
    assert bins.stop <= Fraction(float(t))
    assert bins.edge(bins.size - 1) < bins.stop
