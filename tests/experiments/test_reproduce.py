"""`dpgauss reproduce`: the quick run of every figure, its files and the numbers that hold."""

from __future__ import annotations

import argparse
import json
import math
import sys

import pytest

from dpgauss.cli.reproduce import add_reproduce_parser
from dpgauss.errors import MatplotlibMissingError
from dpgauss.experiments import REGISTRY, load_figure, run
from dpgauss.experiments.runner import ProgressBar, point_seed, resolve_figures

from ..helpers import csv_number as number
from ..helpers import read_csv
from .conftest import FIGURES

STEMS = {
    "1": "fig1_calibration",
    "2": "fig2_mean_estimation",
    "3": "fig3_sparse_histograms",
    "4": "fig4_taxi_heat_maps",
}


@pytest.fixture(scope="module")
def quick(quick_all):
    """The shared quick run of every figure (conftest): (out dir, report, seconds)."""
    return quick_all


@pytest.mark.slow
def test_quick_run_is_fast(quick):
    _, _, seconds = quick
    assert seconds < 120.0  # the issue: the whole quick set in under 2 minutes on 2 cores


@pytest.mark.slow
def test_every_figure_writes_csv_json_and_summary_line(quick):
    out, report, _ = quick
    assert [r.figure.number for r in report.results] == list(FIGURES)
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for fig in FIGURES:
        stem = STEMS[fig]
        rows = read_csv(out / f"{stem}.csv")
        assert rows, stem
        assert list(rows[0]) == list(load_figure(fig).columns)
        data = json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))
        assert data["quick"] is True and data["seed"] == 0
        assert data["claims"], stem
        headline_lines = [ln for ln in summary.splitlines() if ln.startswith(f"- **Figure {fig}:")]
        assert len(headline_lines) == 1
        assert data["headline"] in headline_lines[0]


@pytest.mark.slow
def test_pngs(quick):
    pytest.importorskip("matplotlib")
    out, _, _ = quick
    for stem in STEMS.values():
        png = out / f"{stem}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def exact_sigma_ratio(epsilon: float, delta: float) -> float:
    """Classical / analytic σ at Δ = 1, the analytic σ solved with mpmath at 50 digits."""
    mpmath = pytest.importorskip("mpmath")
    mp = mpmath.mp
    with mpmath.workdps(50):
        eps, dlt = mp.mpf(epsilon), mp.mpf(delta)

        def profile(s):
            phi = mp.ncdf
            return phi(1 / (2 * s) - eps * s) - mp.exp(eps) * phi(-1 / (2 * s) - eps * s) - dlt

        sigma = mp.findroot(profile, mp.mpf("3.7"))
        classical = mp.sqrt(2 * mp.log(mp.mpf("1.25") / dlt)) / eps
        return float(classical / sigma)


@pytest.mark.slow
def test_sigma_ratio_at_eps1_delta1e5_is_exact(quick):
    out, report, _ = quick
    rows = read_csv(out / "fig1_calibration.csv")
    (row,) = [r for r in rows if float(r["delta"]) == 1e-5 and float(r["epsilon"]) == 1.0]
    exact = exact_sigma_ratio(1.0, 1e-5)
    assert abs(float(row["sigma_ratio"]) - exact) < 1e-8
    assert abs(float(row["variance_ratio"]) - exact**2) < 1e-8
    fig1 = report.results[0].summary
    assert abs(fig1.numbers["sigma_ratio_eps1_delta1e-05"] - exact) < 1e-8


@pytest.mark.slow
def test_fig1_claim_14_is_checked_not_assumed(quick):
    out, _, _ = quick
    rows = read_csv(out / "fig1_calibration.csv")
    at1 = {float(r["delta"]): float(r["variance_ratio"]) for r in rows if float(r["epsilon"]) == 1}
    assert at1[1e-2] > at1[1e-5] > 1.4 > at1[1e-10] > 1.3
    data = json.loads((out / "fig1_calibration.json").read_text(encoding="utf-8"))
    (claim,) = [c for c in data["claims"] if "1.4" in c["statement"]]
    assert claim["verdict"] == "disagrees"


@pytest.mark.slow
def test_fig1_curves_are_consistent(quick):
    out, _, _ = quick
    for r in read_csv(out / "fig1_calibration.csv"):
        eps, analytic = float(r["epsilon"]), float(r["analytic_sigma"])
        classical, bound = number(r["classical_sigma"]), number(r["theorem4_lower_bound"])
        assert analytic > 0
        if eps == 0.0:
            assert analytic < float(r["theorem2_sigma"])  # Theorem 2 is valid (and loose)
        if eps <= 1.0 and eps > 0:
            assert analytic < classical
        else:
            assert math.isnan(classical)
        if not math.isnan(bound):
            assert analytic >= bound


@pytest.mark.slow
def test_james_stein_beats_analytic_tenfold_at_eps001_d1000(quick):
    out, _, _ = quick
    rows = read_csv(out / "fig2_mean_estimation.csv")
    mse = {
        r["method"]: float(r["mse"])
        for r in rows
        if int(r["d"]) == 1000 and float(r["epsilon"]) == 0.01
    }
    assert mse["analytic+js"] < 0.1 * mse["analytic"]
    assert mse["analytic"] < mse["classical"] < mse["laplace"]


@pytest.mark.slow
def test_mean_estimation_rows_are_complete(quick):
    out, _, _ = quick
    rows = read_csv(out / "fig2_mean_estimation.csv")
    methods = {"laplace", "classical", "analytic", "analytic+js", "analytic+soft", "analytic+auto"}
    points = {(r["d"], r["epsilon"]) for r in rows}
    assert len(rows) == len(methods) * len(points)
    for r in rows:
        assert r["method"] in methods
        valid = not (r["method"] == "classical" and float(r["epsilon"]) >= 1.0)
        assert math.isfinite(number(r["mse"])) == valid
        if valid:
            assert float(r["mse"]) > 0
    # Common random numbers: classical/analytic MSE is exactly the variance ratio.
    for r in rows:
        if r["method"] == "classical" and float(r["epsilon"]) < 1.0:
            (a,) = [
                x
                for x in rows
                if x["method"] == "analytic" and (x["d"], x["epsilon"]) == (r["d"], r["epsilon"])
            ]
            ratio = float(r["mse"]) / float(a["mse"])
            sigma_ratio = float(r["noise_sigma"]) / float(a["noise_sigma"])
            assert ratio == pytest.approx(sigma_ratio**2, rel=1e-9)


@pytest.mark.slow
def test_histogram_sensitivities_and_sparsity(quick):
    out, _, _ = quick
    rows = read_csv(out / "fig3_sparse_histograms.csv")
    for r in rows:
        n, eps = int(r["n"]), float(r["epsilon"])
        if r["method"] == "laplace":  # Laplace scale 2/(nε): σ = √2 · 2/(nε)
            assert float(r["noise_sigma"]) == pytest.approx(math.sqrt(2) * 2 / (n * eps))
        assert float(r["mean_nonzero_bins"]) < 20  # Dirichlet(1/d): a handful of bins


@pytest.mark.slow
def test_results_do_not_depend_on_jobs(quick, tmp_path):
    out, _, _ = quick
    run(["3", "1"], quick=True, out=tmp_path, seed=0, jobs=1, progress=False, plots=False)
    for stem in (STEMS["1"], STEMS["3"]):
        assert (tmp_path / f"{stem}.csv").read_bytes() == (out / f"{stem}.csv").read_bytes()


def test_seed_changes_results_and_points_have_own_seeds(tmp_path):
    a = point_seed(0, "2", "d=10,eps=0.01").generate_state(4)
    b = point_seed(1, "2", "d=10,eps=0.01").generate_state(4)
    c = point_seed(0, "2", "d=10,eps=0.1").generate_state(4)
    d = point_seed(0, "3", "d=10,eps=0.01").generate_state(4)
    assert len({tuple(x) for x in (a, b, c, d)}) == 4


def test_without_matplotlib_csvs_are_still_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    report = run(["1"], quick=True, out=tmp_path, progress=False)
    assert (tmp_path / "fig1_calibration.csv").exists()
    assert not (tmp_path / "fig1_calibration.png").exists()
    assert any("pip install 'dpgauss[plot]'" in note for note in report.notes)
    with pytest.raises(MatplotlibMissingError, match=r"pip install 'dpgauss\[plot\]'"):
        run(["1"], quick=True, out=tmp_path, progress=False, plots=True)


def test_figure_selection():
    assert [f.number for f in resolve_figures(["fig3", "calibration", "1"])] == ["1", "3"]
    with pytest.raises(ValueError, match="unknown figure"):
        resolve_figures(["9"])
    assert "4" in REGISTRY  # the taxi heat maps' slot
    if load_figure("4") is None:
        with pytest.raises(ValueError, match="not available yet"):
            resolve_figures(["4"])
    with pytest.raises(ValueError, match="jobs"):
        run(["1"], quick=True, jobs=0, progress=False)
    with pytest.raises(TypeError, match="seed"):
        run(["1"], quick=True, seed=1.5, progress=False)  # type: ignore[arg-type]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def _parser():
    parser = _Parser(prog="dpgauss")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_reproduce_parser(sub)
    return parser


@pytest.mark.slow
def test_cli_parser(tmp_path, capsys):
    parser = _parser()
    args = parser.parse_args(
        ["reproduce", "1", "--quick", "--out", str(tmp_path), "--seed", "7", "--jobs", "1"]
    )
    assert (args.figures, args.quick, args.seed, args.jobs) == (["1"], True, 7, 1)
    text = args.run(args)
    assert "figure 1 (calibration)" in text and "summary.md" in text
    assert "seed 7" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    defaults = parser.parse_args(["reproduce"])
    assert (defaults.figures, defaults.quick, defaults.seed, defaults.jobs) == ([], False, 0, 1)
    for bad in (["--jobs", "0"], ["--seed", "-1"], ["--jobs", "two"]):
        with pytest.raises(ValueError):
            parser.parse_args(["reproduce", *bad])
    args = parser.parse_args(["reproduce", "7", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="unknown figure"):
        args.run(args)


def test_progress_bar_lines():
    import io

    stream = io.StringIO()
    bar = ProgressBar(10.0, stream=stream)
    for _ in range(10):
        bar.advance(1.0, "x")
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("reproduce: 100%")
    assert 1 <= len(lines) <= 11


def test_a_figure_whose_extra_is_missing_is_skipped_or_refused(monkeypatch, tmp_path):
    from dpgauss.experiments import runner

    monkeypatch.setitem(runner.REQUIRES, "1", (("no_such_module_xyz",), "demo"))
    with pytest.raises(ValueError, match=r"needs no_such_module_xyz: pip install"):
        resolve_figures(["1"])
    assert "1" not in [f.number for f in resolve_figures(None)]
