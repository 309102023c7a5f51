"""Named groups of keys: ``dpgauss denoise --groups`` and :mod:`dpgauss.release.groups`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpgauss.cli import main
from dpgauss.release.denoise_table import denoise_table
from dpgauss.release.groups import GROUP_COLUMNS, read_groups

D = 120


def _write(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _read(path: Path) -> dict[str, list[str]]:
    rows = list(csv.DictReader(open(path, newline="", encoding="utf-8")))
    return {k: [r[k] for r in rows] for k in rows[0]}


def _f(table: dict[str, list[str]], name: str) -> np.ndarray:
    return np.array([float(v) for v in table[name]])


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    theta = np.zeros(D)
    theta[30:50] = 12.0
    theta[90] = 30.0
    sigma = rng.uniform(2.0, 4.0, D)
    y = theta + sigma * rng.standard_normal(D)
    rows = [[f"k{i}", y[i], sigma[i]] for i in range(D)]
    return _write(tmp_path / "t.csv", ["key", "released", "sigma"], rows), y, sigma


def _groups(tmp_path: Path) -> Path:
    rows: list[list[object]] = [["hot", f"k{i}", 1] for i in range(30, 50)]
    rows += [["cold", f"k{i}", 1] for i in range(60, 80)]
    rows += [["hot", "k90", 1]]  # a group's rows need not be adjacent
    rows += [["contrast", "k40", 1], ["contrast", "k70", -1]]  # weights of both signs
    rows += [["half", f"k{i}", 0.5] for i in range(0, D, 3)]
    return _write(tmp_path / "g.csv", ["group", "key", "weight"], rows)


def test_the_groups_table_gives_each_sum_and_its_intervals(table, tmp_path: Path) -> None:
    path, y, sigma = table
    res = denoise_table(
        path, chain=True, out=tmp_path / "d.csv", groups=_groups(tmp_path), nonnegative=True
    )
    keyed = _read(tmp_path / "d.csv")
    out = _read(tmp_path / "d.csv.groups.csv")
    assert list(out) == list(GROUP_COLUMNS)
    assert out["group"] == ["hot", "cold", "contrast", "half"]  # the file's order
    assert out["keys"] == ["21", "20", "2", str(len(range(0, D, 3)))]
    w = np.zeros((4, D))
    w[0, 30:50] = 1
    w[0, 90] = 1
    w[1, 60:80] = 1
    w[2, 40], w[2, 70] = 1, -1
    w[3, ::3] = 0.5
    np.testing.assert_allclose(_f(out, "released"), w @ y, rtol=1e-12)
    np.testing.assert_allclose(_f(out, "denoised"), w @ _f(keyed, "denoised"), rtol=1e-9)
    z = stats.norm.ppf(0.975)
    half = z * np.sqrt((w**2) @ sigma**2)
    np.testing.assert_allclose(_f(out, "released_lower"), w @ y - half, rtol=1e-12)
    np.testing.assert_allclose(_f(out, "released_upper"), w @ y + half, rtol=1e-12)
    lo, hi = _f(out, "denoised_lower"), _f(out, "denoised_upper")
    assert np.all(lo <= hi) and np.all(hi - lo <= 2 * half * (1 + 1e-9))
    # θ ≥ 0 known: sums of nonnegative weights are never below 0, the contrast may be
    assert np.all(lo[[0, 1, 3]] >= 0.0)
    assert res.report["groups"]["groups"] == 4
    report = json.loads((tmp_path / "d.csv.report.json").read_text())
    assert report["groups"]["output"].endswith("d.csv.groups.csv")


def test_groups_do_not_change_the_per_key_intervals(table, tmp_path: Path) -> None:
    """The sums are drawn with the per-key intervals' draws: asking for them changes no
    key's interval, and a one-key group's interval is that key's."""
    path, _, _ = table
    denoise_table(path, chain=True, out=tmp_path / "a.csv")
    one = _write(tmp_path / "one.csv", ["group", "key"], [["k45", "k45"], ["k3", "k3"]])
    denoise_table(path, chain=True, out=tmp_path / "b.csv", groups=one)
    a, b = _read(tmp_path / "a.csv"), _read(tmp_path / "b.csv")
    for col in ("denoised", "denoised_lower", "denoised_upper"):
        assert a[col] == b[col]
    g = _read(tmp_path / "b.csv.groups.csv")
    assert float(g["denoised_lower"][0]) == pytest.approx(float(a["denoised_lower"][45]), rel=1e-12)
    assert float(g["denoised_upper"][1]) == pytest.approx(float(a["denoised_upper"][3]), rel=1e-12)


def test_a_parquet_output_gets_a_parquet_groups_table(table, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    path, _, _ = table
    denoise_table(path, chain=True, out=tmp_path / "d.parquet", groups=_groups(tmp_path))
    t = pq.read_table(tmp_path / "d.parquet.groups.parquet")
    assert t.column_names == list(GROUP_COLUMNS)
    assert t.column("keys").to_pylist()[:2] == [21, 20]


@pytest.mark.parametrize(
    ("header", "rows", "match"),
    [
        (["group", "name"], [["a", "k1"]], "needs the columns 'group' and 'key'"),
        (["group", "key"], [["a", "nope"]], "line 2: key 'nope' .* is not a key of the table"),
        (["group", "key"], [["a", "k1"], ["a", "k1"]], "line 3: key 'k1' is in group 'a' twice"),
        (["group", "key", "weight"], [["a", "k1", "x"]], "line 2: weight 'x' is not a finite"),
        (["group", "key", "weight"], [["a", "k1", "inf"]], "is not a finite number"),
        (["group", "key", "weight"], [["a", "k1", "1_000"]], "weight '1_000' is not a finite"),
        (["group", "key"], [["", "k1"]], "line 2 has an empty group name"),
        (["group", "key"], [], "names no group"),
        (["group", "key", "group"], [["a", "k1", "b"]], "line 1: .* repeats the column 'group'"),
    ],
)
def test_bad_groups_files_are_refused_before_anything_is_written(
    table, tmp_path: Path, header: list[str], rows: list[list[object]], match: str
) -> None:
    path, _, _ = table
    bad = _write(tmp_path / "bad.csv", header, rows)
    with pytest.raises(ValueError, match=match):
        denoise_table(path, chain=True, out=tmp_path / "d.csv", groups=bad)
    assert not list(tmp_path.glob("d.csv*"))


def test_read_groups_builds_the_weight_matrix() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = _write(
            Path(tmp) / "g.csv",
            ["weight", "key", "group"],
            [[2, "b", "x"], [1, "a", "y"], [-1, "c", "x"]],
        )
        g = read_groups(p, ["a", "b", "c"])
    assert g.names == ("x", "y")
    np.testing.assert_array_equal(g.matrix.toarray(), [[0, 2, -1], [1, 0, 0]])
    np.testing.assert_array_equal(g.sizes, [2, 1])


def test_the_command_line_writes_the_groups_and_says_so(table, tmp_path: Path, capsys) -> None:
    path, _, _ = table
    code = main(
        [
            "denoise",
            str(path),
            "--out",
            str(tmp_path / "d.csv"),
            "--chain",
            "--groups",
            str(_groups(tmp_path)),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "groups     : 4 sums of keys" in out
    assert (tmp_path / "d.csv.groups.csv").is_file()
    bad = _write(tmp_path / "bad.csv", ["group", "key"], [["a", "zz"]])
    code = main(
        ["denoise", str(path), "--out", str(tmp_path / "e.csv"), "--chain", "--groups", str(bad)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "is not a key of the table" in err and err.count("\n") == 1


# ------------------------------------------------------------------ in a release


def _release_setup(tmp_path: Path):
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    from .test_pipeline import ENGINE, make_spec, small_release_data

    src, truth = small_release_data(tmp_path)
    g = _write(
        tmp_path / "groups.csv",
        ["group", "key", "weight"],
        [["low", 0, 1], ["low", 1, 1], ["low", 2, 1], ["odd", 1, 1], ["odd", 3, 1], ["all", 5, 2]]
        + [["all", k, 1] for k in (0, 1, 2, 3, 4, 6, 7, 8, 9)],
    )
    return src, truth, g, ENGINE, make_spec


def test_a_release_writes_its_groups_beside_the_table(tmp_path: Path) -> None:
    """``[output] groups``: the sums of the table's released and denoised columns, with
    intervals from the per-key intervals' draws — the table itself is the same as without
    groups, and ``dpgauss denoise`` of the published table reproduces the groups table."""
    from dpgauss.release.pipeline import run_release

    src, _, g, engine, make_spec = _release_setup(tmp_path)
    privacy = {"epsilon": 0.5, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 3}
    plain = make_spec(src, privacy=privacy, denoise={"method": "auto", "nonnegative": False})
    with_groups = make_spec(
        src,
        privacy=privacy,
        denoise={"method": "auto", "nonnegative": False},
        output={"groups": str(g)},
    )
    run_release(plain, out=tmp_path / "a.csv", engine=engine)
    rel = run_release(with_groups, out=tmp_path / "b.csv", engine=engine)
    a, b = _read(tmp_path / "a.csv"), _read(tmp_path / "b.csv")
    assert a == b
    out = _read(tmp_path / "b.csv.groups.csv")
    assert list(out) == list(GROUP_COLUMNS) and out["group"] == ["low", "odd", "all"]
    assert out["keys"] == ["3", "2", "10"]
    w = np.zeros((3, 10))
    w[0, :3] = 1
    w[1, [1, 3]] = 1
    w[2] = 1
    w[2, 5] = 2
    np.testing.assert_allclose(_f(out, "released"), w @ _f(b, "released"), rtol=1e-12)
    np.testing.assert_allclose(_f(out, "denoised"), w @ _f(b, "denoised"), rtol=1e-9)
    assert rel.report["denoise"]["groups"]["groups"] == 3
    assert rel.report["denoise"]["groups"]["table"] == "b.csv.groups.csv"
    assert "groups     : 3 sums of keys in b.csv.groups.csv; median interval width" in rel.summary
    assert str(g) not in json.dumps(rel.report)  # the local path is not published
    denoise_table(tmp_path / "b.csv", chain=True, out=tmp_path / "c.csv", groups=g)
    again = _read(tmp_path / "c.csv.groups.csv")
    for col in ("denoised", "denoised_lower", "denoised_upper"):
        np.testing.assert_allclose(_f(again, col), _f(out, col), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("tables", "match"),
    [
        ({"statistic": {"kind": "mean", "column": "fare", "lower": 0, "upper": 50}}, "mean"),
        ({"output": {"groups": "MISSING"}}, r"\[output\] groups: .*cannot be read"),
        ({"output": {"groups": "BAD"}}, r"\[output\] groups: .*key '10' .* not a key"),
    ],
)
def test_a_bad_groups_setting_is_refused_before_the_charge(
    tmp_path: Path, tables: dict, match: str
) -> None:
    from dpgauss.release.pipeline import run_release

    from ..helpers import charges, make_ledger

    src, _, g, engine, make_spec = _release_setup(tmp_path)
    bad = _write(tmp_path / "bad.csv", ["group", "key"], [["a", 10]])
    given = {"output": {"groups": str(g)}} | tables
    given["output"] = {
        k: {"MISSING": str(tmp_path / "nope.csv"), "BAD": str(bad)}.get(v, v)
        for k, v in given["output"].items()
    }
    ledger = make_ledger(tmp_path)
    spec = make_spec(src, **given)
    with pytest.raises(ValueError, match=match):
        run_release(spec, out=tmp_path / "o.csv", ledger=ledger, engine=engine)
    assert charges(ledger) == 0
    assert not list(tmp_path.glob("o.csv*"))


# ------------------------------------------------------------------ review of sums (review-sums)


def test_the_raw_interval_of_a_tiny_weighted_sum_is_not_zero(tmp_path: Path) -> None:
    """review-sums finding 2: the groups table's raw interval formed ``Σ w²σ²`` as is, so
    weights of 1e-62 on σ = 1e-100 gave ``released_lower == released_upper`` (the variance
    underflowed to 0) though the sum's standard deviation is a normal double."""
    rng = np.random.default_rng(37)
    sigma = 1e-100
    y = sigma * rng.standard_normal(20)
    t = _write(tmp_path / "t.csv", ["key", "released"], [[f"k{i}", y[i]] for i in range(20)])
    g = _write(
        tmp_path / "g.csv", ["group", "key", "weight"], [["a", f"k{i}", 1e-62] for i in range(20)]
    )
    denoise_table(t, sigma=sigma, out=tmp_path / "d.csv", groups=g)
    out = _read(tmp_path / "d.csv.groups.csv")
    half = stats.norm.ppf(0.975) * 1e-62 * sigma * np.sqrt(20)
    width = _f(out, "released_upper") - _f(out, "released_lower")
    np.testing.assert_allclose(width, 2 * half, rtol=1e-12)
    den = _f(out, "denoised_upper") - _f(out, "denoised_lower")
    assert np.all((den > 0) & (den <= 2 * half * (1 + 1e-12)))


def test_a_groups_csv_with_a_byte_order_mark_is_read(table, tmp_path: Path) -> None:
    """review-sums finding 4: a UTF-8 CSV with a byte-order mark (Excel's "CSV UTF-8") was
    refused as having "no 'group'" column (the mark was read into the first name); every
    other public file of a release (edge tables, key files) is read without it."""
    path, _, _ = table
    g = tmp_path / "bom.csv"
    g.write_bytes(b"\xef\xbb\xbfgroup,key\nhot,k31\nhot,k32\n")
    assert read_groups(g, [f"k{i}" for i in range(D)]).names == ("hot",)
    denoise_table(path, chain=True, out=tmp_path / "d.csv", groups=g)
    assert _read(tmp_path / "d.csv.groups.csv")["keys"] == ["2"]


def test_a_bad_row_after_a_quoted_line_break_is_named_by_its_line(tmp_path: Path) -> None:
    """review-sums finding 5: rows were numbered as if each took one line, so a row after a
    key holding a line break (a values domain's text key, quoted) was named a line early."""
    g = tmp_path / "g.csv"
    g.write_bytes(b'group,key\ng,"two\nlines"\ng,zz\n')
    with pytest.raises(ValueError, match=r"g\.csv: line 4: key 'zz'"):
        read_groups(g, ["two\nlines", "b"])


def test_a_parquet_groups_file_with_a_repeated_column_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """review-sums finding 6: pyarrow's error for a Parquet file with two columns of one name
    (a schema dump of several lines) was passed through: the message was not one line and
    did not say which column."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    g = tmp_path / "g.parquet"
    t = pa.Table.from_arrays(
        [pa.array(["x"]), pa.array(["a"]), pa.array(["y"])], names=["group", "key", "group"]
    )
    pq.write_table(t, g)
    with pytest.raises(ValueError) as err:
        read_groups(g, ["a"])
    msg = str(err.value)
    assert "\n" not in msg and "repeats the column 'group'" in msg and str(g) in msg


def test_a_product_releases_groups_are_reproduced_by_denoise(tmp_path: Path) -> None:
    from dpgauss.release.pipeline import run_release

    from .test_pipeline import write_parquet

    _, _, _, engine, make_spec = _release_setup(tmp_path)
    rng = np.random.default_rng(38)
    uid = np.repeat(np.arange(300), rng.integers(1, 4, 300))
    src = write_parquet(
        tmp_path / "p.parquet",
        uid=uid,
        a=rng.integers(0, 3, uid.size),
        b=rng.integers(0, 4, uid.size),
    )
    g = _write(tmp_path / "pg.csv", ["group", "ax", "bx"], [["r", 0, 0], ["r", 0, 1], ["s", 2, 3]])
    parts = [
        {"kind": "range", "column": "a", "start": 0, "stop": 3, "name": "ax"},
        {"kind": "range", "column": "b", "start": 0, "stop": 4, "name": "bx"},
    ]
    spec = make_spec(
        src,
        domain={"kind": "product", "parts": parts},
        privacy={"epsilon": 0.5, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 3},
        denoise={"method": "auto", "nonnegative": True},
        output={"groups": str(g)},
    )
    run_release(spec, out=tmp_path / "b.csv", engine=engine)
    out = _read(tmp_path / "b.csv.groups.csv")
    denoise_table(
        tmp_path / "b.csv", grid=(3, 4), out=tmp_path / "c.csv", groups=g, key=["ax", "bx"]
    )
    again = _read(tmp_path / "c.csv.groups.csv")
    for col in ("denoised", "denoised_lower", "denoised_upper"):
        np.testing.assert_allclose(_f(again, col), _f(out, col), rtol=1e-9, atol=1e-9)


def test_a_failure_staging_the_groups_table_writes_nothing(
    table, tmp_path: Path, monkeypatch
) -> None:
    """Checked (held): the groups table is staged with the table and the report; a failure
    writing it leaves no file behind (no table alone)."""
    import dpgauss.release.denoise_table as dt

    path, _, _ = table
    real = dt._write

    def failing(p: str, columns: dict, parquet: bool) -> None:
        if "group" in columns and "keys" in columns:
            raise OSError("disk full")
        real(p, columns, parquet)

    monkeypatch.setattr(dt, "_write", failing)
    with pytest.raises((OSError, ValueError), match="disk full"):
        denoise_table(path, chain=True, out=tmp_path / "d.csv", groups=_groups(tmp_path))
    assert not list(tmp_path.glob("d.csv*"))
