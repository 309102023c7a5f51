"""``dpgauss denoise TABLE``: denoise a release made by any system, with intervals."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

from dpgauss.cli import main
from dpgauss.release.denoise_table import denoise_table
from dpgauss.release.pipeline import run_release

from .domains.test_key_domain import records
from .test_pipeline import ENGINE, make_spec, small_release_data


def _read(path: Path) -> dict[str, list[str]]:
    rows = list(csv.DictReader(open(path, newline="", encoding="utf-8")))
    return {k: [r[k] for r in rows] for k in rows[0]}


def _col(table: dict[str, list[str]], name: str) -> np.ndarray:
    return np.array([float(v) for v in table[name]])


@pytest.mark.slow
def test_a_dpgauss_chain_release_is_reproduced(tmp_path: Path) -> None:
    """Denoising a release's ``released`` column with its method and structure gives its
    ``denoised`` column."""
    src, _ = small_release_data(tmp_path)
    spec = make_spec(
        src,
        domain={"kind": "range", "column": "key", "start": 0, "stop": 10},
        privacy={"epsilon": 0.5, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 3},
        denoise={"method": "auto"},
    )
    rel = run_release(spec, out=tmp_path / "r.csv", engine=ENGINE)
    res = denoise_table(tmp_path / "r.csv", chain=True, out=tmp_path / "d.csv")
    out = _read(tmp_path / "d.csv")
    np.testing.assert_allclose(_col(out, "denoised"), rel.columns["denoised"], atol=1e-9)
    # the intervals' draws are seeded by the published values: reproduced too
    for col in ("denoised_lower", "denoised_upper"):
        np.testing.assert_allclose(_col(out, col), rel.columns[col], atol=1e-9)
    assert res.report["method"] == rel.report["denoise"]["method"]
    head = ["key", "released", "denoised", "sigma", "released_lower", "released_upper"]
    assert list(out)[:6] == head
    assert np.all(_col(out, "denoised_lower") <= _col(out, "denoised"))
    report = json.loads((tmp_path / "d.csv.report.json").read_text())
    assert "costs no privacy" in report["privacy"]


@pytest.mark.slow
def test_a_dpgauss_grid_release_is_reproduced(tmp_path: Path) -> None:
    r = records(tmp_path, n=6000, seed=2)
    spec = make_spec(
        r["src"],
        domain={
            "kind": "grid",
            "x": {"column": "x", "start": 0, "stop": 1, "step": 0.1},
            "y": {"column": "y", "start": -1.0, "stop": 2.0, "step": 0.25},
        },
        bounds={"max_records_per_unit": 4},
        privacy={"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 5},
        denoise={"method": "trend_filter"},
    )
    rel = run_release(spec, out=tmp_path / "g.parquet", engine=ENGINE)
    res = denoise_table(
        tmp_path / "g.parquet",
        grid=(12, 10),
        method="trend_filter",
        out=tmp_path / "gd.parquet",
    )
    np.testing.assert_allclose(res.result.estimate, rel.columns["denoised"], atol=1e-8)
    import pyarrow.parquet as pq

    back = pq.read_table(tmp_path / "gd.parquet")
    assert back.column_names[-2:] == ["denoised_lower", "denoised_upper"]
    assert back.column_names.count("denoised") == 1
    assert back.column("y").to_pylist() == rel.columns["y"].tolist()


def test_a_hand_written_table_with_one_sigma_per_row_and_an_edge_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    n = 60
    theta = np.where(np.arange(n) < 30, 10.0, 40.0)
    sig = np.where(np.arange(n) % 2 == 0, 2.0, 6.0)
    y = theta + sig * rng.standard_normal(n)
    names = [f"zone-{i:02d}" for i in range(n)]
    with open(tmp_path / "t.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["zone", "estimate", "se", "note"])
        for k, v, s in zip(names, y, sig, strict=True):
            w.writerow([k, repr(float(v)), repr(float(s)), "keep me"])
    with open(tmp_path / "e.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["u", "v"])
        for i in range(n - 1):
            w.writerow([names[i], names[i + 1]])
    code = main(
        [
            "denoise",
            str(tmp_path / "t.csv"),
            "--value",
            "estimate",
            "--sigma",
            "se",
            "--edges",
            str(tmp_path / "e.csv"),
            "--key",
            "zone",
            "--out",
            str(tmp_path / "o.csv"),
            "--seed",
            "0",
        ]
    )
    assert code == 0
    out = _read(tmp_path / "o.csv")
    assert out["note"] == ["keep me"] * n and out["zone"] == names
    den = _col(out, "denoised")
    assert np.mean((den - theta) ** 2) < np.mean((y - theta) ** 2)
    report = json.loads((tmp_path / "o.csv.report.json").read_text())
    assert report["sigma"] == "column 'se'" and report["structure"].startswith("edge table")
    assert any("one σ" in s for s in report["params"].get("skipped", []))


def test_a_number_sigma_and_no_structure(tmp_path: Path, capsys) -> None:
    (tmp_path / "t.csv").write_text("key,v\na,1.5\nb,-0.5\nc,2.0\nd,0.25\ne,1.0\n")
    code = main(
        [
            "denoise",
            str(tmp_path / "t.csv"),
            "--value",
            "v",
            "--sigma",
            "1.5",
            "--method",
            "james_stein",
            "--params",
            '{"target": "mean"}',
            "--out",
            str(tmp_path / "o.csv"),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "no privacy spent" in text and "james_stein" in text
    # issue #28, item 7: the σ given as a number is in the output, beside the intervals
    header, *rows = (tmp_path / "o.csv").read_text().splitlines()
    assert header == "key,v,sigma,denoised,denoised_lower,denoised_upper"
    assert all(r.split(",")[2] == "1.5" for r in rows) and len(rows) == 5
    code = main(["denoise", str(tmp_path / "t.csv"), "--value", "v", "--sigma", "2"])
    assert code == 2  # --out is required
    out = str(tmp_path / "o.csv")
    code = main(["denoise", str(tmp_path / "t.csv"), "--value", "v", "--sigma", "2", "--out", out])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().endswith("already exists (to replace it: --overwrite)")


def test_a_graphml_graph_by_node_id(tmp_path: Path) -> None:
    nx = pytest.importorskip("networkx")
    g = nx.Graph()
    for i in range(8):
        g.add_node(f"n{i}", x=24.9 + i * 1e-3, y=60.1)
    g.add_edges_from((f"n{i}", f"n{i + 1}") for i in range(7))
    nx.write_graphml(g, tmp_path / "g.graphml")
    rows = "\n".join(f"n{i},{float(i % 3)},1.0" for i in reversed(range(8)))
    (tmp_path / "t.csv").write_text("key,released,sigma\n" + rows + "\n")
    res = denoise_table(
        tmp_path / "t.csv",
        graph=str(tmp_path / "g.graphml"),
        method="trend_filter",
        params={"lam": 0.5},
        out=tmp_path / "o.csv",
    )
    assert res.report["structure"].startswith("graph GraphML")
    (tmp_path / "bad.csv").write_text("key,released,sigma\nn0,1,1\nzz,2,1\n")
    with pytest.raises(ValueError, match="must be the graph's node ids"):
        denoise_table(
            tmp_path / "bad.csv", graph=str(tmp_path / "g.graphml"), out=tmp_path / "x.csv"
        )


@pytest.mark.parametrize(
    ("body", "kwargs", "match"),
    [
        ("key,released,sigma\na,1,1\nb,abc,1\n", {}, "row 2 of column 'released'"),
        ("key,released,sigma\na,1,1\nb,2,0\n", {}, "σ must be > 0"),
        ("key,released\na,1\nb,2\n", {}, "give --sigma"),
        ("key,released,sigma\na,1,1\nb,2,1\n", {"noise": "laplace"}, "not Gaussian"),
        ("key,released,sigma\na,1,1\nb,2,1\n", {"method": "median"}, "method must be one of"),
        ("key,released,sigma\na,1,1\nb,2,1\n", {"grid": (3, 2)}, "ROWS × COLS = 2"),
        ("key,released,sigma\na,1,1\nb,2\n", {}, "line 3 has 2 fields"),
        ("key,released,sigma\na,1,1\nb,2,1\n", {"params": {"lam": 1}}, "unknown keys 'lam'"),
    ],
)
def test_bad_tables_and_arguments_are_refused_by_name(
    tmp_path: Path, body: str, kwargs: dict, match: str
) -> None:
    (tmp_path / "t.csv").write_text(body)
    with pytest.raises(ValueError, match=match):
        denoise_table(tmp_path / "t.csv", out=tmp_path / "o.csv", **kwargs)
    assert not (tmp_path / "o.csv").exists()


def test_laplace_noise_is_denoised_only_when_asked_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("key,released,sigma\na,1,1\nb,2,1\nc,3,1\nd,2,1\n")
    res = denoise_table(
        tmp_path / "t.csv", noise="laplace", assume_gaussian=True, out=tmp_path / "o.csv"
    )
    assert "treated as Gaussian" in res.report["noise"]


def test_the_input_is_never_the_output(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("key,released,sigma\na,1,1\nb,2,1\nc,3,1\n")
    with pytest.raises(ValueError):
        denoise_table(tmp_path / "t.csv", out=tmp_path / "t.csv", overwrite=True)
    assert (tmp_path / "t.csv").read_text().startswith("key,released,sigma")
    assert main(["denoise", str(tmp_path / "t.csv"), "--out", str(tmp_path / "t.csv")]) == 2


def test_review_findings_on_the_table_tool(tmp_path: Path, capsys) -> None:
    """Inputs are never outputs; a non-finite result writes nothing and says so in one
    line; numbers read from a CSV are numbers in a Parquet output."""
    (tmp_path / "t.csv").write_text("key,released,sigma\na,1,1\nb,2,1\nc,3,1\n")
    (tmp_path / "e.csv").write_text("u,v\na,b\nb,c\n")
    args = ["denoise", str(tmp_path / "t.csv"), "--edges", str(tmp_path / "e.csv")]
    assert main([*args, "--out", str(tmp_path / "e.csv"), "--overwrite"]) == 2
    assert (tmp_path / "e.csv").read_text().startswith("u,v")
    capsys.readouterr()
    (tmp_path / "h.csv").write_text("key,released,sigma\na,1e200,1\nb,2,1\nc,0,1\nd,1,1\n")
    code = main(
        [
            "denoise",
            str(tmp_path / "h.csv"),
            "--chain",
            "--method",
            "wavelet",
            "--out",
            str(tmp_path / "hw.csv"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "values must be within" in err and err.count("\n") == 1
    assert not (tmp_path / "hw.csv").exists()
    res = denoise_table(tmp_path / "t.csv", out=tmp_path / "o.parquet", method="none")
    import pyarrow.parquet as pq

    back = pq.read_table(res.output)
    assert str(back.schema.field("released").type) == "int64"
    assert str(back.schema.field("key").type) == "string"


def test_a_weak_fit_says_so(tmp_path: Path, capsys) -> None:
    """A denoiser that gains less than 2× on the values given (soft thresholding of a dense
    smooth signal) has *weak* error bars (``ErrorBars.weak``): the report's intervals say
    ``weak_fit`` and the summary says why they are near the raw ones; a strong fit (James–
    Stein toward the mean on a nearly flat table) says neither."""
    d = 400
    rng = np.random.default_rng(4)
    for name, values, weak in (
        ("dense", 3.0 * np.sin(2 * np.pi * np.arange(d) / d) + rng.standard_normal(d), True),
        ("flat", 10.0 + 0.05 * rng.standard_normal(d), False),
    ):
        src = tmp_path / f"{name}.csv"
        src.write_text("key,v\n" + "".join(f"{i},{float(v)!r}\n" for i, v in enumerate(values)))
        method, params = ("soft_threshold", "{}") if weak else ("james_stein", '{"target": "mean"}')
        out = tmp_path / f"{name}.out.csv"
        args = ["denoise", str(src), "--value", "v", "--sigma", "1", "--method", method]
        assert main([*args, "--params", params, "--out", str(out)]) == 0
        text = capsys.readouterr().out
        report = json.loads((tmp_path / f"{name}.out.csv.report.json").read_text())
        assert report["intervals"]["weak_fit"] is weak
        assert ("weak fit" in text) is weak
