"""Key files (``values_from``): typed as documented, checked like ``values``, refused in one
line naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.domains.key_files import read_values  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ..test_pipeline import assert_cli_refuses_uncharged  # noqa: E402


def keys(tmp_path: Path, text: str) -> tuple:
    p = tmp_path / "k.csv"
    p.write_text(text)
    return read_values(p)


def test_csv_keys_are_typed_as_a_whole(tmp_path: Path) -> None:
    assert keys(tmp_path, "zone\n3\n-1\n10\n") == (3, -1, 10)
    assert keys(tmp_path, "zone\n3\n1.5\n2e3\n") == (3.0, 1.5, 2000.0)
    assert keys(tmp_path, "zone\n007\n7x\n") == ("007", "7x")
    assert keys(tmp_path, "zone\n007\n8\n") == (7.0, 8.0)  # every key a number: numbers
    assert keys(tmp_path, 'zone\n"A,B"\nC\n') == ("A,B", "C")


def test_parquet_keys_keep_their_type(tmp_path: Path) -> None:
    p = tmp_path / "k.parquet"
    pq.write_table(pa.table({"k": pa.array(["007", "8"])}), p)
    assert read_values(p) == ("007", "8")
    pq.write_table(pa.table({"k": pa.array([2**62, -5], pa.int64())}), p)
    assert read_values(p) == (2**62, -5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zone\n1\n2\n1\n", "values must be distinct; 1 appears twice"),
        ("zone\n1\n1.0\n", "1.0 appears twice"),  # both numbers: 1.0 and 1.0
        ("zone,other\n1,2\n", "a key file has one column; this one has 2"),
        ("zone\n1\n\n3\n", None),  # a blank line: pyarrow skips empty lines
        ("zone\n", "values must be a non-empty list"),
    ],
)
def test_bad_key_files(tmp_path: Path, text: str, message: str | None) -> None:
    if message is None:
        assert keys(tmp_path, text) == (1, 3)
        return
    with pytest.raises(ValueError) as info:
        keys(tmp_path, text)
    assert str(info.value).startswith(str(tmp_path / "k.csv")) and message in str(info.value)


def test_a_release_with_a_key_file_refused_before_the_budget(tmp_path: Path) -> None:
    src = tmp_path / "s.parquet"
    z = np.arange(100) % 7
    pq.write_table(pa.table({"uid": np.arange(100), "zone": z}), src)
    (tmp_path / "k.csv").write_text("zone\n0\n3\n5\n")
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "zone", "values_from": str(tmp_path / "k.csv")},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    assert resolve_domain(spec).labels.tolist() == [0, 3, 5]
    agg = bounded_aggregate(spec, salt=1)
    assert agg.counts.tolist() == [float((z == k).sum()) for k in (0, 3, 5)]
    (tmp_path / "k.csv").write_text("zone\n0\n0\n")
    domain = {"kind": "values", "column": "zone", "values_from": str(tmp_path / "k.csv")}
    message = "k.csv: [domain] values must be distinct; 0 appears twice"
    assert_cli_refuses_uncharged(tmp_path, src, domain, message)


def test_values_and_values_from_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one of values"):
        ReleaseSpec.from_dict(
            {
                "source": {"path": "s.parquet"},
                "unit": {"column": "uid"},
                "domain": {"kind": "values", "column": "z", "values": [1], "values_from": "k"},
                "bounds": {"max_records_per_unit": 1},
                "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            }
        )
