"""Records from Python (``release_frame``): pandas and pyarrow frames, scanned in place, and
object columns typed by the schema, never by the records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from dpgauss.release import release_frame  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ..helpers import charges, make_ledger  # noqa: E402

TYPES = {"uid": "int64", "zone": "int64"}
SPEC = {
    "source": {"table": "records", "types": TYPES},
    "unit": {"column": "uid"},
    "domain": {"kind": "values", "column": "zone", "values": [1, 2, 3, 4]},
    "bounds": {"max_records_per_unit": 2},
    "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
    "denoise": {"method": "none"},
}


def frame(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"uid": np.repeat(np.arange(n // 2), 2), "zone": rng.integers(0, 6, n)})


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pandas", "arrow"])
def test_a_frame_releases_what_its_parquet_file_releases(
    tmp_path: Path, kind: str, zero_noise
) -> None:
    df = frame()
    pq.write_table(pa.Table.from_pandas(df), tmp_path / "s.parquet")
    want = bounded_aggregate(
        ReleaseSpec.from_dict({**SPEC, "source": {"path": str(tmp_path / "s.parquet")}}), salt=1
    ).counts
    data = df if kind == "pandas" else pa.Table.from_pandas(df)
    ledger = make_ledger(tmp_path)
    with zero_noise():
        res = release_frame(data, dict(SPEC), out=tmp_path / "o.csv", ledger=ledger)
    assert np.array_equal(res.columns["released"], want)  # no bound bites: b = 2
    assert np.array_equal(want, np.bincount(df.zone, minlength=6)[1:5])
    assert charges(ledger) == 1 and (tmp_path / "o.csv").exists()


def test_an_object_column_is_read_as_text_value_by_value(tmp_path: Path, zero_noise) -> None:
    """One unit's string in an integer object column changes nothing for anyone else: each
    value is read as its own text (DuckDB would type the column from a sample of rows)."""
    df = frame()
    df["zone"] = df["zone"].astype(object)
    eve = pd.DataFrame({"uid": [10**6, 10**6], "zone": ["three", 3.0]}, dtype=object)
    # zone as text: "3.0" is the key 3 by the keymap's reading of a number (as a CSV field)
    source = {"table": "records", "types": {"uid": "int64", "zone": "string"}}
    spec = ReleaseSpec.from_dict({**SPEC, "source": source})
    with_eve = pd.concat([eve, df], ignore_index=True)  # first: inside any type sample
    ledger = make_ledger(tmp_path)
    outs = []
    for i, data in enumerate((df, with_eve)):
        with zero_noise():
            res = release_frame(data, spec, out=tmp_path / f"o{i}.csv", ledger=ledger)
        outs.append(res.columns["released"])
    base, more = outs
    diff = more - base
    assert diff.tolist() == [0.0, 0.0, 1.0, 0.0]  # eve's 3.0 counts at key 3; "three" nowhere
    assert np.array_equal(base, np.bincount(df.zone.astype(int), minlength=6)[1:5])


def test_bad_calls_are_refused_before_the_budget(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    with pytest.raises(TypeError, match="data must be a pandas DataFrame"):
        release_frame([1, 2], dict(SPEC), ledger=ledger)
    with pytest.raises(ValueError, match=r"\[source\] of a DataFrame release is table"):
        release_frame(frame(), {**SPEC, "source": {"path": "x.csv"}}, ledger=ledger)
    with pytest.raises(ValueError, match="is not a column of the source"):
        release_frame(
            frame().rename(columns={"zone": "z"}), dict(SPEC), out=tmp_path / "o.csv", ledger=ledger
        )
    assert charges(ledger) == 0


def test_the_engine_scans_a_registered_frame_in_place() -> None:
    import duckdb

    con = duckdb.connect()
    df = frame()
    con.register("records", df)
    spec = ReleaseSpec.from_dict(SPEC)
    agg = bounded_aggregate(spec, salt=1, engine=DuckDBEngine(con))
    assert agg.counts.sum() == (df.zone.between(1, 4)).sum()


@pytest.mark.slow
def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/release.md, "Records from Python": the block runs as written."""
    pytest.importorskip("shapely")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "release.md").read_text()
    block = doc.split("```python\nimport pandas as pd\nfrom dpgauss.datasets import load_trips")
    code = "import pandas as pd\nfrom dpgauss.datasets import load_trips" + block[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    make_ledger(tmp_path, dataset="city")
    scope: dict = {}
    exec(compile(code, "docs/release.md", "exec"), scope)
    assert (tmp_path / "neighbourhoods.csv").read_text().count("\n") == 261


def test_a_polars_frame(tmp_path: Path, zero_noise) -> None:
    """Polars is a peer, not a dependency: checked when it is installed."""
    pl = pytest.importorskip("polars")
    df = frame()
    ledger = make_ledger(tmp_path)
    with zero_noise():
        res = release_frame(pl.from_pandas(df), dict(SPEC), out=tmp_path / "o.csv", ledger=ledger)
    assert np.array_equal(res.columns["released"], np.bincount(df.zone, minlength=6)[1:5])
    bad = pl.DataFrame({"uid": [1], "zone": pl.Series([object()], dtype=pl.Object)})
    with pytest.raises(ValueError, match="have the Polars Object type"):
        release_frame(bad, dict(SPEC), out=tmp_path / "p.csv", ledger=ledger)
    if hasattr(pl, "Int128"):
        # the neighbouring-dataset fuzzer's find: polars reads a CSV column of integers past
        # int64 as Int128, which pyarrow cannot import (ArrowInvalid '_pli128'): now refused
        # by its type, in one line, before the charge
        wide = pl.DataFrame({"uid": pl.Series([1], dtype=pl.Int128), "zone": [1]})
        with pytest.raises(ValueError, match="columns 'uid' are 128-bit Polars integers"):
            release_frame(wide, dict(SPEC), out=tmp_path / "q.csv", ledger=ledger)
        assert not (tmp_path / "q.csv").exists()


@pytest.mark.slow
def test_categorical_columns_are_read_as_their_text(tmp_path: Path, zero_noise) -> None:
    """A pandas categorical (a DuckDB ENUM) is read as the text of each value, like a CSV
    field: string keys, numeric keys and timestamps all match (it used to be invalid for every
    row, a silently empty release)."""
    df = pd.DataFrame(
        {
            "uid": np.arange(6),
            "zone": pd.Categorical(["1", "2", "1", "x", "2", "1"]),
            "t": pd.Categorical(["2013-01-13 00:10"] * 3 + ["x", "2013-01-13 01:30", "epoch"]),
        }
    )
    ledger = make_ledger(tmp_path)
    for i, (domain, want) in enumerate(
        [
            ({"kind": "values", "column": "zone", "values": [1, 2]}, [3.0, 2.0]),
            ({"kind": "values", "column": "zone", "values": ["1", "x"]}, [3.0, 1.0]),
            ({"kind": "values", "column": "t", "values": ["x", "epoch"]}, [1.0, 1.0]),
            (
                {
                    "kind": "range",
                    "column": "t",
                    "start": "2013-01-13",
                    "stop": "2013-01-13 02:00",
                    "step": "1h",
                },
                [3.0, 1.0],
            ),
        ]
    ):
        types = {"uid": "int64", "zone": "string", "t": "string"}
        if domain["kind"] == "range":
            types["t"] = "timestamp"  # the categorical's text, by the timestamp grammar
        source = {"table": "records", "types": types}
        with zero_noise():
            res = release_frame(
                df,
                {**SPEC, "source": source, "domain": domain},
                out=tmp_path / f"c{i}.csv",
                ledger=ledger,
            )
        assert res.columns["released"].tolist() == want


class _NoText:
    def __str__(self) -> str:
        raise RuntimeError("SSN 123-45-6789")


@pytest.mark.slow
@pytest.mark.parametrize(
    "hostile",
    ["\ud800 lone surrogate", 10**5000, _NoText(), "ok"],
    ids=["surrogate", "huge-int", "str-raises", "control"],
)
@pytest.mark.parametrize("column", ["uid", "zone", "note"])
def test_a_value_without_a_text_is_invalid_for_its_row_alone(
    tmp_path: Path, hostile: object, column: str, zero_noise
) -> None:
    """Issue #25, finding 4: a value whose text cannot be made (``__str__`` raises, an int
    past Python's digit limit, a lone surrogate) made ``release_frame`` raise and quote it.
    It is now NULL for its own row: the release is the one without that row's value."""
    df = frame(400).astype(object)
    df["note"] = pd.Series(["n"] * len(df), dtype=object)
    eve = pd.DataFrame({"uid": [10**6], "zone": [3], "note": ["n"]}, dtype=object)
    eve.loc[0, column] = hostile
    data = pd.concat([eve, df], ignore_index=True)
    ledger = make_ledger(tmp_path)
    types = {"uid": "string", "zone": "int64", "note": "string"}  # note: in the hash
    spec = {**SPEC, "source": {"table": "records", "types": types}}
    with zero_noise():
        got = release_frame(data, dict(spec), out=tmp_path / "o.csv", ledger=ledger)
        want = release_frame(
            pd.concat([eve.assign(**{column: None}) if hostile != "ok" else eve, df]),
            dict(spec),
            out=tmp_path / "w.csv",
            ledger=ledger,
        )
    assert np.array_equal(got.columns["released"], want.columns["released"])
    base = np.bincount(df.zone.astype(int), minlength=6)[1:5]
    # eve counts at zone 3 only when every column she needs has a text
    eve_counts = column == "note" or (hostile == "ok" and column == "uid")
    assert np.array_equal(got.columns["released"] - base, [0, 0, int(eve_counts), 0])
    assert "123-45" not in got.summary and charges(ledger) == 2


def test_a_python_backed_string_column_with_a_lone_surrogate(tmp_path: Path, zero_noise) -> None:
    """The ``string`` dtype stored as Python objects can hold a lone surrogate too."""
    df = frame(400)
    df["uid"] = pd.array([str(u) for u in df.uid], dtype="string[python]")
    df.loc[0, "uid"] = "\udcff"
    ledger = make_ledger(tmp_path)
    with zero_noise():
        res = release_frame(df, dict(SPEC), out=tmp_path / "o.csv", ledger=ledger)
    base = np.bincount(df.zone[1:], minlength=6)[1:5]
    assert np.array_equal(res.columns["released"], base)  # the row without a unit is dropped
