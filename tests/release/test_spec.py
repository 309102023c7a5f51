"""The release spec: TOML loading, defaults, and validation messages that name the TOML key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from dpgauss.release.spec import (
    BoundsSpec,
    DomainSpec,
    PrivacySpec,
    ReleaseSpec,
    SourceSpec,
    load_spec,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "taxi_pickups.toml"

BASE = {
    "source": {"path": "trips.csv"},
    "unit": {"column": "hack_license"},
    "domain": {"kind": "values", "column": "zone", "values": [0, 1, 2]},
    "statistic": {"kind": "count"},
    "bounds": {"max_records_per_unit": 5},
    "privacy": {
        "epsilon": 1.0,
        "delta": 1e-6,
        "secure": True,
        "ledger": "budget.sqlite",
        "dataset": "trips",
    },
    "denoise": {"method": "auto"},
    "output": {"path": "release.csv"},
}

TOML = """
[source]
path = "trips.csv"
[unit]
column = "hack_license"
[domain]
kind = "values"
column = "zone"
values = [0, 1, 2]
[statistic]
kind = "count"
[bounds]
max_records_per_unit = 5
[privacy]
epsilon = 1.0
delta = 1e-6
secure = true
ledger = "budget.sqlite"
dataset = "trips"
[denoise]
method = "auto"
[output]
path = "release.csv"
"""


def spec_with(**changes: dict) -> ReleaseSpec:
    data = copy.deepcopy(BASE)
    for table, values in changes.items():
        if values is None:
            data.pop(table)
        else:
            data[table] = values
    return ReleaseSpec.from_dict(data)


def test_the_issue_toml_loads(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(TOML)
    spec = load_spec(path)
    assert spec == ReleaseSpec.from_dict(BASE)
    assert spec.source.paths == ("trips.csv",)
    assert spec.source.file_format == "csv"
    assert spec.domain.values == (0, 1, 2)
    assert spec.bounds.max_records_per_unit == 5
    assert spec.privacy.secure is True
    assert spec.output.level == 0.95


def test_round_trip_through_dict() -> None:
    spec = ReleaseSpec.from_dict(BASE)
    assert ReleaseSpec.from_dict(spec.to_dict()) == spec


def test_the_taxi_example_loads() -> None:
    spec = load_spec(EXAMPLE)
    assert spec.domain.kind == "graph" and spec.domain.mapping == "kde"
    assert spec.bounds.max_records_per_unit == 5
    assert spec.unit.column == "hack_license"
    (path,) = spec.source.paths
    assert Path(path).is_file()
    assert spec.domain.effective_cutoff == 150.0


def test_defaults() -> None:
    spec = spec_with(statistic=None, denoise=None, output=None)
    assert spec.statistic.kind == "count"
    assert spec.denoise.method == "auto"
    assert spec.output.path is None and spec.output.overwrite is False
    assert spec.unit.on_null == "drop" and spec.domain.on_invalid == "drop"
    kde = DomainSpec(
        kind="graph", graph="manhattan", lat="a", lon="b", mapping="kde", bandwidth=40.0
    )
    assert kde.effective_cutoff == 120.0
    near = DomainSpec(kind="graph", graph="manhattan", lat="a", lon="b")
    assert near.effective_cutoff == 150.0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"bounds": {"max_records_per_unit": 0}},
            "[bounds] max_records_per_unit must be an integer >= 1; got 0",
        ),
        ({"bounds": {"max_keys_per_unit": 3}}, "[bounds] needs max_records_per_unit"),
        (
            {"bounds": {"max_records_per_unit": 5, "max_record_per_key": 2}},
            "[bounds] unknown key 'max_record_per_key'",
        ),
        (
            {"privacy": {"epsilon": 1.0, "delta": 2.0, "dataset": "t"}},
            "[privacy] delta must be in (0, 1); got 2.0",
        ),
        (
            {"privacy": {"epsilon": -1.0, "delta": 1e-6, "dataset": "t"}},
            "[privacy] epsilon must be a number >= 0",
        ),
        (
            {"privacy": {"epsilon": 1.0, "sigma": 3.0, "delta": 1e-6, "dataset": "t"}},
            "[privacy] give exactly one of epsilon or sigma",
        ),
        ({"privacy": {"epsilon": 1.0, "delta": 1e-6}}, "[privacy] dataset is required"),
        (
            {"privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "t", "seed": 3}},
            "[privacy] seed is for experiments with secure = false",
        ),
        (
            {"domain": {"kind": "values", "column": "z", "values": []}},
            "[domain] values must be a non-empty list",
        ),
        (
            {"domain": {"kind": "values", "column": "z", "values": [1, 1]}},
            "[domain] values must be distinct; 1 appears twice",
        ),
        (
            {"domain": {"kind": "values", "column": "z", "values": [1, "a"]}},
            "[domain] values must be all numbers or all strings",
        ),
        (
            {"domain": {"kind": "range", "column": "z", "start": 5, "stop": 5}},
            "[domain] stop must be greater than start",
        ),
        (
            {"domain": {"kind": "range", "column": "z", "start": 0, "stop": 5, "values": [1]}},
            "[domain] values does not apply to kind = 'range'",
        ),
        ({"domain": {"kind": "hexagons", "column": "z"}}, "[domain] kind must be one of"),
        (
            {
                "domain": {
                    "kind": "graph",
                    "graph": "manhattan",
                    "lat": "a",
                    "lon": "b",
                    "mapping": "kde",
                }
            },
            "[domain] bandwidth (metres) is required",
        ),
        (
            {"domain": {"kind": "graph", "lat": "a", "lon": "b"}},
            "[domain] kind = 'graph' needs exactly one of graph",
        ),
        (
            {
                "domain": {
                    "kind": "graph",
                    "graph": "manhattan",
                    "lat": "a",
                    "lon": "b",
                    "bbox": [41, 40, -74, -73],
                }
            },
            "[domain] bbox must be",
        ),
        (
            {
                "domain": {
                    "kind": "graph",
                    "graph": "manhattan",
                    "lat": "a",
                    "lon": "b",
                    "cutoff": -1,
                }
            },
            "[domain] cutoff must be a number > 0",
        ),
        (
            {"statistic": {"kind": "sum", "column": "fare"}},
            "[statistic] kind = 'sum' needs the public clamping bounds lower and upper",
        ),
        (
            {"statistic": {"kind": "mean", "column": "fare", "lower": 5, "upper": 1}},
            "[statistic] upper must be greater than lower",
        ),
        (
            {"statistic": {"kind": "count", "column": "fare"}},
            "[statistic] column does not apply to kind = 'count'",
        ),
        ({"statistic": {"kind": "median"}}, "[statistic] kind must be one of"),
        (
            {"source": {"path": "a.csv", "table": "t"}},
            "[source] needs exactly one of path, table or bundled; got path, table",
        ),
        ({"source": {}}, "[source] needs exactly one of path, table or bundled"),
        (
            {"source": {"path": "a.csv", "on_malformed": "skip"}},
            "[source] on_malformed must be one of 'drop', 'check_fails'",
        ),
        (
            {"source": {"path": "a.csv", "delimiter": ";;"}},
            "[source] delimiter must be a single character",
        ),
        ({"unit": {"column": "  "}}, "[unit] column must be a non-empty string"),
        ({"unit": {"column": "u", "on_null": "ignore"}}, "[unit] on_null must be one of"),
        (  # issue #28, item 6: the old name promised a refusal that no release makes
            {"unit": {"column": "u", "on_null": "fail"}},
            "[unit] on_null = 'fail' is now named 'check_fails': a release always drops",
        ),
        ({"denoise": {"method": "wavelet"}}, "[denoise] method = 'wavelet' needs a range domain"),
        ({"denoise": {"method": "trend_filter"}}, "needs public structure"),
        ({"denoise": {"method": "none", "params": {"a": 1}}}, "[denoise] params does not apply"),
        ({"denoise": {"method": "magic"}}, "[denoise] method must be one of"),
        ({"output": {"path": "x.csv", "level": 1.5}}, "[output] level must be in (0, 1)"),
        ({"output": {"path": "x.csv", "format": "xlsx"}}, "[output] format must be one of"),
        ({"unit": None}, "the spec has no [unit] table"),
        ({"unit": {}}, "[unit] column is required"),
        ({"domain": {"column": "z"}}, "[domain] kind is required"),
    ],
)
def test_errors_name_the_key(changes: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        spec_with(**changes)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"bounds": {"max_records_per_unit": "5"}},
            "[bounds] max_records_per_unit must be an integer >= 1; got str '5'",
        ),
        ({"bounds": {"max_records_per_unit": 5.5}}, "[bounds] max_records_per_unit must be"),
        (
            {"privacy": {"epsilon": "1", "delta": 1e-6, "dataset": "t"}},
            "[privacy] epsilon must be a number",
        ),
        (
            {"privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "t", "secure": "yes"}},
            "[privacy] secure must be true or false",
        ),
        ({"unit": "hack_license"}, "[unit] must be a table"),
        ({"denoise": {"method": "auto", "params": [1]}}, "[denoise] params must be a table"),
    ],
)
def test_type_errors_name_the_key(changes: dict, message: str) -> None:
    with pytest.raises(TypeError) as info:
        spec_with(**changes)
    assert message in str(info.value)


def test_unknown_table() -> None:
    data = copy.deepcopy(BASE)
    data["privasy"] = {}
    with pytest.raises(ValueError, match=r"unknown table \[privasy\]"):
        ReleaseSpec.from_dict(data)


def test_integral_float_bound_is_accepted() -> None:
    assert BoundsSpec(max_records_per_unit=5.0).max_records_per_unit == 5  # type: ignore[arg-type]


def test_bad_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[source\npath = 1\n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_spec(bad)
    with pytest.raises(ValueError, match="no release spec at"):
        load_spec(tmp_path / "missing.toml")


def test_source_formats() -> None:
    assert SourceSpec(path="a/*.parquet").file_format == "parquet"
    assert SourceSpec(path=["a.pq", "b.parquet"]).file_format == "parquet"
    assert SourceSpec(path="a.txt").file_format == "csv"
    assert SourceSpec(path="a.txt", format="parquet").file_format == "parquet"
    assert SourceSpec(table="trips", types={"uid": "int64"}).file_format is None
    with pytest.raises(ValueError, match="mixes Parquet and other files"):
        _ = SourceSpec(path=["a.parquet", "b.csv"]).file_format
    with pytest.raises(ValueError, match="database is only used with table"):
        SourceSpec(path="a.csv", database="x.duckdb")


def test_privacy_sigma_mode() -> None:
    p = PrivacySpec(sigma=10.0, delta=1e-6, dataset="d")
    assert p.epsilon is None and p.sigma == 10.0
    with pytest.raises(ValueError, match=r"\[privacy\] delta is required"):
        PrivacySpec(sigma=10.0, dataset="d")
    free = PrivacySpec(epsilon=1.0, delta=1e-6, dataset="d", secure=False, seed=7)
    assert free.seed == 7


def test_output_format_by_extension() -> None:
    spec = ReleaseSpec.from_dict(BASE)
    assert spec.output.file_format("x.parquet") == "parquet"
    assert spec.output.file_format("x.csv") == "csv"
    assert spec.output.file_format("x") == "csv"
