"""Extreme values of every numeric spec key: a working release or a one-line error.

Every numeric key of a spec is tried with 0, subnormals, 1e-300, 1e300, 1.7e308, ±inf, nan,
huge integers and negative zero.  Each either validates (and, end to end, releases) or raises
a ``ValueError``/``TypeError`` that names the key and its allowed range — before anything is
charged.  The range domain's bin count and labels are exact (rational arithmetic).
"""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpgauss.cli import main
from dpgauss.release import plan
from dpgauss.release.domains.key_domain import resolve_domain
from dpgauss.release.ledger import Ledger
from dpgauss.release.spec import ReleaseSpec

TINY = 5e-324
HUGE_INT = 10**400  # beyond the largest double
BASE = {
    "source": {"path": "d.csv"},
    "unit": {"column": "uid"},
    "domain": {"kind": "range", "column": "key", "start": 0, "stop": 10},
    "statistic": {"kind": "count"},
    "bounds": {"max_records_per_unit": 5},
    "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
    "denoise": {"method": "none"},
}


def spec_with(**tables: dict) -> ReleaseSpec:
    data = copy.deepcopy(BASE)
    for name, value in tables.items():
        if name.endswith("_"):
            data[name[:-1]] = value
        else:
            data[name] = {**data.get(name, {}), **value}
    return ReleaseSpec.from_dict(data)


SUM = {"kind": "sum", "column": "v", "lower": -1.0, "upper": 1.0}
KDE = {"kind": "graph", "graph": "manhattan", "lat": "la", "lon": "lo", "mapping": "kde"}

# (tables, None for a valid spec, or (exception type, words the message must contain))
CASES = [
    # [privacy]
    ({"privacy": {"epsilon": 0}}, None),
    ({"privacy": {"epsilon": -0.0}}, None),
    ({"privacy": {"epsilon": TINY}}, None),
    ({"privacy": {"epsilon": 1e20}}, None),
    (
        {"privacy": {"epsilon": 1e300}},
        (ValueError, "[privacy] epsilon must be a number in [0, 1e20]"),
    ),
    (
        {"privacy": {"epsilon": 1.7e308}},
        (ValueError, "[privacy] epsilon must be a number in [0, 1e20]"),
    ),
    (
        {"privacy": {"epsilon": 10**30}},
        (ValueError, "[privacy] epsilon must be a number in [0, 1e20]"),
    ),
    ({"privacy": {"epsilon": HUGE_INT}}, (ValueError, "[privacy] epsilon must be a finite number")),
    ({"privacy": {"epsilon": math.inf}}, (ValueError, "[privacy] epsilon must be a finite number")),
    ({"privacy": {"epsilon": math.nan}}, (ValueError, "[privacy] epsilon must be a finite number")),
    ({"privacy": {"epsilon": -1e-300}}, (ValueError, "[privacy] epsilon must be a number >= 0")),
    ({"privacy": {"delta": TINY}}, None),
    ({"privacy": {"delta": 1e-300}}, None),
    ({"privacy": {"delta": -0.0}}, (ValueError, "[privacy] delta must be in (0, 1)")),
    ({"privacy": {"delta": 1.0}}, (ValueError, "[privacy] delta must be in (0, 1)")),
    ({"privacy": {"delta": HUGE_INT}}, (ValueError, "[privacy] delta must be a finite number")),
    ({"privacy_": {"sigma": TINY, "delta": 1e-6, "dataset": "d"}}, None),  # checked end to end
    ({"privacy_": {"sigma": HUGE_INT, "delta": 1e-6, "dataset": "d"}}, (ValueError, "sigma")),
    ({"privacy_": {"sigma": -0.0, "delta": 1e-6, "dataset": "d"}}, (ValueError, "> 0")),
    ({"privacy": {"secure": False, "seed": 10**30}}, None),
    # [domain] range
    ({"domain": {"start": -0.0}}, None),
    ({"domain": {"start": TINY}}, None),
    ({"domain": {"start": 1e-300}}, None),
    (
        {"domain": {"start": 1e300}},
        (ValueError, "[domain] start must be a number with |start| <= 1e36"),
    ),
    (
        {"domain": {"start": -1.7e308}},
        (ValueError, "[domain] start must be a number with |start| <= 1e36"),
    ),
    ({"domain": {"start": -(10**30)}}, (ValueError, "[domain] the range has about 10^30 bins")),
    (
        {"domain": {"start": HUGE_INT}},
        (ValueError, "|start| <= 1e36; got <an integer of 401 digits>"),
    ),
    ({"domain": {"start": math.nan}}, (ValueError, "[domain] start must be a finite number")),
    ({"domain": {"start": "0"}}, (TypeError, "[domain] start must be a number")),
    ({"domain": {"stop": TINY}}, None),
    ({"domain": {"stop": 1e36}}, (ValueError, "bins")),
    (
        {"domain": {"stop": 1.7e308}},
        (ValueError, "[domain] stop must be a number with |stop| <= 1e36"),
    ),
    ({"domain": {"stop": -math.inf}}, (ValueError, "[domain] stop must be a finite number")),
    ({"domain": {"stop": -0.0}}, (ValueError, "[domain] stop must be greater than start")),
    ({"domain": {"step": 1e300}}, None),
    ({"domain": {"step": 1.7e308}}, None),
    ({"domain": {"step": 10**30}}, None),
    ({"domain": {"step": 1e-6}}, None),
    # counted as written (issue #28, item 3): 10 / 1e-7 is 10^8 bins, the doubles' 10^8 + 1
    ({"domain": {"step": 1e-7}}, (ValueError, "[domain] the range has 100,000,000 bins")),
    (
        {"domain": {"step": TINY}},
        (ValueError, "bins (ceil((stop - start) / step)); at most 50,000,000"),
    ),
    ({"domain": {"step": 1e-300}}, (ValueError, "[domain] the range has about 10^300 bins")),
    ({"domain": {"step": -0.0}}, (ValueError, "[domain] step must be a number > 0")),
    ({"domain": {"step": math.inf}}, (ValueError, "[domain] step must be a finite number")),
    ({"domain": {"start": 0.0, "stop": 1e-320, "step": TINY}}, None),  # 2,024 subnormal bins
    ({"domain": {"start": 1e16, "stop": 1e16 + 10, "step": 0.5}}, (ValueError, "too fine")),
    ({"domain": {"start": 2**60, "stop": 2**60 + 10}}, None),
    # [domain] graph
    (
        {"domain_": {**KDE, "bandwidth": TINY}},
        (ValueError, "bandwidth must be a number of metres in [1e-150, 1e150]"),
    ),
    (
        {"domain_": {**KDE, "bandwidth": 1e300}},
        (ValueError, "[domain] bandwidth must be a number of metres"),
    ),
    ({"domain_": {**KDE, "bandwidth": 1e-150}}, None),
    ({"domain_": {**KDE, "bandwidth": 1e150}}, None),
    (
        {"domain_": {**KDE, "bandwidth": 50.0, "neighbors": 10**30}},
        (ValueError, "[domain] neighbors must be an integer in [1, 2**53]"),
    ),
    ({"domain_": {**KDE, "bandwidth": 50.0, "neighbors": 10**6}}, None),
    ({"domain_": {**KDE, "bandwidth": 50.0, "cutoff": 1.7e308}}, None),
    ({"domain_": {**KDE, "bandwidth": 50.0, "cutoff": TINY}}, None),
    (
        {"domain_": {**KDE, "bandwidth": 50.0, "cutoff": HUGE_INT}},
        (ValueError, "[domain] cutoff must be a finite number"),
    ),
    (
        {"domain_": {**KDE, "bandwidth": 50.0, "bbox": [40.0, 41.0, -1e300, 1e300]}},
        (ValueError, "[domain] bbox"),
    ),
    ({"domain_": {**KDE, "bandwidth": 50.0, "bbox": [TINY, 1e-300, -180, 180]}}, None),
    (
        {"domain_": {**KDE, "bandwidth": 50.0, "bbox": [0, HUGE_INT, 0, 1]}},
        (ValueError, "[domain] bbox must be a finite number"),
    ),
    # [statistic]
    ({"statistic_": {**SUM, "upper": 1.7e308}}, None),  # refused end to end (sensitivity)
    (
        {"statistic_": {**SUM, "upper": HUGE_INT}},
        (ValueError, "[statistic] upper must be a finite number"),
    ),
    ({"statistic_": {**SUM, "lower": -0.0, "upper": TINY}}, None),
    (
        {"statistic_": {**SUM, "lower": TINY, "upper": TINY}},
        (ValueError, "upper must be greater than lower"),
    ),
    # [bounds]
    ({"bounds_": {"max_records_per_unit": 2**53}}, None),
    (
        {"bounds_": {"max_records_per_unit": 2**53 + 1}},
        (ValueError, "[bounds] max_records_per_unit must be an integer in [1, 2**53]"),
    ),
    (
        {"bounds_": {"max_records_per_unit": 10**30}},
        (ValueError, "[bounds] max_records_per_unit must be an integer in [1, 2**53]"),
    ),
    (
        {"bounds_": {"max_records_per_unit": 1e30}},
        (ValueError, "[bounds] max_records_per_unit must be an integer in [1, 2**53]"),
    ),
    (
        {"bounds_": {"max_records_per_key": HUGE_INT}},
        (ValueError, "[bounds] max_records_per_key must be an integer in [1, 2**53]"),
    ),
    (
        {"bounds_": {"max_records_per_key": TINY}},
        (TypeError, "[bounds] max_records_per_key must be an integer >= 1"),
    ),
    (
        {"bounds_": {"max_records_per_key": math.nan}},
        (TypeError, "[bounds] max_records_per_key must be an integer >= 1"),
    ),
    (
        {"bounds_": {"max_records_per_unit": 5, "max_keys_per_unit": 10**30}},
        (ValueError, "[bounds] max_keys_per_unit must be an integer in [1, 2**53]"),
    ),
    # [output] and [filter]
    ({"output": {"level": TINY}}, None),
    ({"output": {"level": 0.9999999999999999}}, None),
    ({"output": {"level": 1 - 1e-17}}, (ValueError, "[output] level must be in (0, 1)")),
    ({"output": {"level": HUGE_INT}}, (ValueError, "[output] level must be a finite number")),
    ({"filter_": {"column": "key", "start": 1.7e308}}, None),
    ({"filter_": {"column": "key", "stop": -1.7e308}}, None),
    (
        {"filter_": {"column": "key", "start": HUGE_INT}},
        (ValueError, "[filter] start must be a finite number"),
    ),
    (
        {"filter_": {"column": "key", "start": -0.0, "stop": 0.0}},
        (ValueError, "[filter] stop must be after start"),
    ),
]


@pytest.mark.parametrize(("tables", "outcome"), CASES, ids=[repr(c[0])[:70] for c in CASES])
def test_every_numeric_key_validates_or_names_itself(tables: dict, outcome: object) -> None:
    if outcome is None:
        spec_with(**tables)
        return
    kind, words = outcome  # type: ignore[misc]
    with pytest.raises(kind) as info:
        spec_with(**tables)
    text = str(info.value)
    assert words in text and "\n" not in text and len(text) < 400


# ------------------------------------------------------------------ exact range bins


@pytest.mark.slow
@pytest.mark.parametrize(
    ("start", "stop", "step", "exact", "size"),
    [
        # the doubles' exact ratio is 50.000000000000002 (51 bins) and float arithmetic says
        # 50.0; as written, 7.5 is the 50th edge: 50 bins, no sliver (issue #28, item 3)
        (0.0, 7.5, 0.15, 51, 50),
        (0.0, 1.4000000000000001, 0.1, 15, 15),  # float: 14; as written 14.000000000000001
        (-0.7, 12.8, 0.3, 46, 45),  # float: 45; as written 45
        (2**53 + 3, 2**53 + 7, 1, 4, 4),  # float(start) = float(stop) - 4: the IndexError case
        (2**60, 2**60 + 10, 1, 10, 10),
        (0, 10**36, 10**30, 10**6, 10**6),
        (0.0, 1e-320, TINY, 2024, 2024),  # subnormals: "1e-320" is far from its double
    ],
)
def test_bin_count_is_exact_everywhere(start, stop, step, exact, size, tmp_path: Path) -> None:
    assert math.ceil((Fraction(stop) - Fraction(start)) / Fraction(step)) == exact
    spec = spec_with(domain={"start": start, "stop": stop, "step": step})
    dom = resolve_domain(spec)
    assert dom.size == size == len(dom.labels)


def test_labels_are_the_exact_edges() -> None:
    from dpgauss.release.domains.keys import RangeBins

    # Integers: exact beyond 2**53 and beyond int64.
    bins = RangeBins.of(2**53 + 3, 2**53 + 7, 1)
    assert bins.labels().tolist() == [2**53 + 3, 2**53 + 4, 2**53 + 5, 2**53 + 6]
    bins = RangeBins.of(2**63 - 2, 2**63 + 2, 1)
    assert bins.labels().tolist() == [2**63 - 2, 2**63 - 1, 2**63, 2**63 + 1]
    # Floats: each label is the exact edge rounded once to the nearest double.
    for start, stop, step in [
        (0.3, 6.2, 0.1),
        (0.0, 7.5, 0.15),
        (-0.7, 12.8, 0.3),
        (1.1, 3.65, 0.05),
    ]:
        bins = RangeBins.of(start, stop, step)
        want = [float(Fraction(start) + i * Fraction(step)) for i in range(bins.size)]
        assert bins.labels().tolist() == want
        assert np.all(np.diff(bins.labels()) > 0)
    # Many bins take the vectorised paths: same answer.
    bins = RangeBins.of(0.1, 1000.1, 0.001)
    labels = bins.labels()
    idx = np.array([0, 1, 2, 777, 123456, bins.size - 1])
    assert labels[idx].tolist() == [float(Fraction(0.1) + int(i) * Fraction(0.001)) for i in idx]
    # No negative zero.
    assert math.copysign(1.0, float(RangeBins.of(-0.0, 1.0, 0.5).labels()[0])) == 1.0


def test_float_bins_at_edges() -> None:
    from dpgauss.release.domains.keys import RangeBins

    bins = RangeBins.of(0.0, 1.0, 0.25)
    assert bins.key(Fraction(0.5)) == 2  # at an edge: the bin above
    assert bins.key(Fraction(math.nextafter(0.5, 0))) == 1
    assert bins.key(Fraction(math.nextafter(1.0, 0))) == 3  # just below stop: the last bin
    assert bins.key(Fraction(1.0)) is None  # stop: none
    assert bins.key(Fraction(-0.0)) == 0


# --------------------------------------------------------------------- end to end


CSV = "uid,key,v,la,lo\n" + "".join(f"{i % 7},{i % 10},{i * 1.5},40.75,-73.98\n" for i in range(40))


def toml(tables: dict) -> str:
    def value(v: object) -> str:
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return (
                "nan"
                if v != v
                else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
            )
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return str(v)

    return "".join(
        f"[{t}]\n" + "".join(f"{k} = {value(v)}\n" for k, v in kv.items())
        for t, kv in tables.items()
    )


@pytest.fixture
def workdir(tmp_path: Path, capsys) -> Path:
    (tmp_path / "d.csv").write_text(CSV)
    code = main(
        [
            "budget",
            "init",
            "d",
            "--epsilon",
            "1e21",
            "--delta",
            "0.5",
            "--ledger",
            str(tmp_path / "b.sqlite"),
        ]
    )
    capsys.readouterr()
    assert code == 0
    return tmp_path


def release(workdir: Path, capsys, **tables: dict) -> tuple[int, str]:
    data = copy.deepcopy(BASE)
    data["source"] = {"path": str(workdir / "d.csv")}
    for name, value in tables.items():
        if name.endswith("_"):
            data[name[:-1]] = value
        else:
            data[name] = {**data.get(name, {}), **value}
    path = workdir / "spec.toml"
    path.write_text(toml(data))
    out = workdir / f"out{len(list(workdir.glob('out*.csv')))}.csv"
    argv = ["release", str(path), "--out", str(out)]
    if data["privacy"].get("secure", True):  # secure = false is never charged to a ledger
        argv += ["--ledger", str(workdir / "b.sqlite")]
    code = main(argv)
    stdout, stderr = capsys.readouterr()
    return code, stderr.strip() if code else stdout


def charges(workdir: Path) -> int:
    with Ledger(workdir / "b.sqlite", create=False) as led:
        return led.remaining("d").charges


@pytest.mark.slow
@pytest.mark.parametrize(
    ("tables", "words"),
    [
        # The three examples: tracebacks (exit 1) on main.
        ({"privacy": {"epsilon": 1e300}}, "[privacy] epsilon must be a number in [0, 1e20]"),
        ({"domain": {"step": 5e-324}}, "[domain] the range has about 10^324 bins"),
        (
            {"statistic_": {**SUM, "upper": 1.7e308}},
            "[statistic] lower/upper: the sum's sensitivity",
        ),
        # And the others found along the way.
        ({"statistic_": {**SUM, "upper": 1e300}}, "the sum's sensitivity (max(|lower|, |upper|)"),
        ({"statistic_": {**SUM, "upper": 1e99}}, "[privacy] epsilon = 1, delta = 1e-06 put noise"),
        (
            {"statistic_": {**SUM, "lower": -1.7e308, "upper": 1.7e308, "kind": "mean"}},
            "[statistic] lower/upper",
        ),
        (
            {"statistic_": {**SUM, "lower": -TINY, "upper": TINY}},
            "outside the supported [1e-100, 1e+100]",
        ),
        ({"privacy_": {"sigma": TINY, "delta": 1e-6, "dataset": "d"}}, "[privacy] sigma = 5e-324"),
        ({"privacy_": {"sigma": 1e-20, "delta": 1e-6, "dataset": "d"}}, "below the least noise"),
        ({"privacy_": {"sigma": 1e300, "delta": 1e-6, "dataset": "d"}}, "[privacy] sigma = 1e+300"),
        ({"privacy": {"epsilon": 10**30}}, "[privacy] epsilon must be a number in [0, 1e20]"),
        ({"privacy": {"epsilon": 0.0, "delta": 1e-300}}, "put noise 1.99471e+300 on the count"),
        (
            {"privacy": {"epsilon": 0.0, "delta": 1e-12}},
            "[privacy] the secure sampler cannot serve",
        ),
        ({"privacy": {"epsilon": 1e15}}, "the secure sampler cannot serve epsilon = 1e+15"),
        ({"privacy": {"epsilon": HUGE_INT}}, "[privacy] epsilon must be a finite number"),
        ({"domain": {"start": 10**400}}, "[domain] start must be a number with |start| <= 1e36"),
        (
            {"bounds_": {"max_records_per_unit": 10**30}},
            "[bounds] max_records_per_unit must be an integer in [1, 2**53]",
        ),
        ({"domain_": {**KDE, "bandwidth": 1e300}}, "[domain] bandwidth"),
    ],
    ids=lambda v: repr(v)[:60] if isinstance(v, dict) else "",
)
def test_extreme_specs_end_to_end_are_one_line_errors(workdir: Path, capsys, tables, words) -> None:
    code, text = release(workdir, capsys, **tables)
    assert code == 2, text
    assert words in text and "\n" not in text, text
    assert charges(workdir) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "tables",
    [
        {"privacy": {"epsilon": 1e20, "secure": False}},
        {"privacy": {"epsilon": 1e5}},
        {"privacy": {"epsilon": TINY}},
        {"privacy": {"epsilon": 1.0, "delta": TINY}},
        {"privacy_": {"sigma": 1e7, "delta": 1e-6, "dataset": "d", "secure": False}},
        {"statistic_": {**SUM, "lower": -1e90, "upper": 1e90}},
        {"domain": {"start": 0.0, "stop": 1e-320, "step": TINY}},
        {"domain": {"start": 2**60, "stop": 2**60 + 10}},
        {"domain_": {**KDE, "bandwidth": 1e-150}},
        {"domain_": {**KDE, "bandwidth": 1e150}},
        {"bounds_": {"max_records_per_unit": 2**53}},
        {"output": {"level": TINY}},
        {"filter_": {"column": "v", "start": -1.7e308, "stop": 1.7e308}},
    ],
    ids=lambda v: repr(v)[:60],
)
def test_extreme_but_meaningful_specs_release(workdir: Path, capsys, tables) -> None:
    code, text = release(workdir, capsys, **tables)
    assert code == 0, text
    secure = ({**BASE["privacy"], **tables.get("privacy", {}), **tables.get("privacy_", {})}).get(
        "secure", True
    )
    assert charges(workdir) == (1 if secure else 0)


def test_sigma_above_the_zero_epsilon_noise_is_kept(workdir: Path, capsys) -> None:
    """sigma = 1e7 is more noise than (0, 1e-6) needs (2e6): the release keeps sigma and
    states the smaller delta it achieves, instead of silently using 2e6."""
    spec = spec_with(privacy_={"sigma": 1e7, "delta": 1e-6, "dataset": "d", "secure": False})
    sens = plan.sensitivity_of(spec)
    cal = plan.calibrate(spec, sens, 10)
    assert cal.mechanism.sigma == pytest.approx(1e7, rel=1e-9) and cal.mechanism.sigma >= 1e7
    assert cal.mechanism.epsilon == 0.0 and cal.mechanism.delta < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize(
    "domain",
    [
        {"kind": "values", "column": "key", "values": [2**63, 2**64 - 1, 3]},  # uint64 keys
        {"kind": "values", "column": "key", "values": [-1, 2**63, 10**30]},
        {"kind": "values", "column": "key", "values": [2**60 + 1, 0.5, 3]},  # not doubles
        {"kind": "range", "column": "key", "start": 2**63 - 2, "stop": 2**63 + 2},
    ],
    ids=["uint64", "decimal", "mixed", "range-beyond-int64"],
)
def test_parquet_output_holds_every_key_exactly(workdir: Path, capsys, domain: dict) -> None:
    """Keys beyond int64, or integers no double holds beside float keys, are written exactly
    (uint64, decimal128 or their text); pyarrow alone raised there, after the charge."""
    pq = pytest.importorskip("pyarrow.parquet")
    data = copy.deepcopy(BASE)
    data["source"] = {"path": str(workdir / "d.csv")}
    data["domain"] = domain
    (workdir / "spec.toml").write_text(toml(data))
    out = workdir / "out.parquet"
    argv = ["release", str(workdir / "spec.toml"), "--out", str(out)]
    code = main([*argv, "--ledger", str(workdir / "b.sqlite")])
    _, err = capsys.readouterr()
    assert code == 0, err
    keys = pq.read_table(out).column("key").to_pylist()
    want = domain.get("values") or [2**63 - 2 + i for i in range(4)]
    assert [str(k) if isinstance(k, str) else k for k in keys] == [
        str(v) if isinstance(keys[0], str) else v for v in want
    ]


def test_integral_floats_are_stored_as_integers() -> None:
    """``neighbors = 3.0`` is the integer 3 (the mapper refused the float, unnamed)."""
    spec = spec_with(domain_={**KDE, "bandwidth": 50.0, "neighbors": 3.0})
    assert spec.domain.neighbors == 3 and isinstance(spec.domain.neighbors, int)
    assert resolve_domain(spec).mapper.neighbors == 3  # type: ignore[union-attr]
