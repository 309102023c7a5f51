"""``[denoise] nonnegative`` (issue #26 item 2): counts and sums of values ≥ 0 are never
negative, decided from the statistic; ``false`` turns it off; the CLI's flag."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from dpgauss.release.plan import plan_denoiser
from dpgauss.release.spec import ReleaseSpec

from .test_spec import BASE


def _spec(**changes: dict) -> ReleaseSpec:
    data = copy.deepcopy(BASE)
    for name, value in changes.items():
        data[name] = value
    return ReleaseSpec.from_dict(data)


SUM = {"kind": "sum", "column": "fare", "lower": 0.0, "upper": 100.0}
SIGNED = {"kind": "mean", "column": "fare", "lower": -10.0, "upper": 100.0}


@pytest.mark.parametrize(
    ("statistic", "denoise", "expected"),
    [
        ({"kind": "count"}, {"method": "auto"}, True),
        (SUM, {"method": "auto"}, True),
        ({**SUM, "kind": "mean"}, {"method": "trend_filter"}, True),
        (SIGNED, {"method": "auto"}, False),
        ({**SIGNED, "kind": "sum"}, {"method": "soft_threshold"}, False),
        ({"kind": "count"}, {"method": "auto", "nonnegative": False}, False),
        ({"kind": "count"}, {"method": "none"}, False),  # the raw release is never clipped
        ({"kind": "count"}, {"method": "james_stein", "nonnegative": True}, True),
    ],
)
def test_the_default_follows_the_statistic(statistic, denoise, expected) -> None:
    domain = (
        {"kind": "range", "column": "zone", "start": 0, "stop": 8}
        if denoise["method"] == "trend_filter"
        else BASE["domain"]
    )
    spec = _spec(statistic=statistic, denoise=denoise, domain=domain)
    assert spec.nonnegative is expected
    assert spec.never_negative is (statistic["kind"] == "count" or statistic["lower"] >= 0)


@pytest.mark.parametrize(
    ("statistic", "denoise", "message"),
    [
        (SIGNED, {"method": "auto", "nonnegative": True}, "needs a statistic that is never"),
        ({"kind": "count"}, {"method": "none", "nonnegative": True}, "does not apply to method"),
        ({"kind": "count"}, {"method": "auto", "nonnegative": 1}, "must be true or false"),
        (
            {"kind": "count"},
            {"method": "auto", "params": {"nonnegative": True}},
            "params may not set nonnegative",
        ),
    ],
)
def test_refused(statistic, denoise, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        _spec(statistic=statistic, denoise=denoise)


def test_the_spec_round_trips_with_the_flag() -> None:
    spec = _spec(denoise={"method": "auto", "nonnegative": False})
    assert ReleaseSpec.from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["denoise"]["nonnegative"] is False


class _Domain:
    """The two attributes plan_denoiser reads."""

    def __init__(self, size: int, grid: tuple[int, ...] | None) -> None:
        self.size, self.grid, self.edges = size, grid, None


@pytest.mark.parametrize("method", ["auto", "james_stein", "soft_threshold", "hard_threshold"])
def test_the_planned_denoiser_clips_counts(method: str) -> None:
    rng = np.random.default_rng(1)
    theta = np.zeros(60)
    theta[[5, 17, 40]] = [30.0, 12.0, 25.0]
    y = theta + 6.0 * rng.standard_normal(60)
    on = plan_denoiser(_spec(denoise={"method": method}), _Domain(60, (60,)))(y, 6.0)
    off = plan_denoiser(
        _spec(denoise={"method": method, "nonnegative": False}), _Domain(60, (60,))
    )(y, 6.0)
    assert on.params["nonnegative"] is True and np.min(on.estimate) >= 0.0
    assert "nonnegative" not in off.params
    if method != "hard_threshold":
        assert np.min(off.estimate) < 0.0
    signed = plan_denoiser(_spec(denoise={"method": method}, statistic=SIGNED), _Domain(60, (60,)))(
        y, 6.0
    )
    assert "nonnegative" not in signed.params


def test_dpgauss_denoise_flag(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from dpgauss.cli import main

    rng = np.random.default_rng(2)
    theta = np.zeros(64)
    theta[[3, 30, 31, 50]] = [20.0, 15.0, 15.0, 35.0]
    y = theta + 5.0 * rng.standard_normal(64)
    table = tmp_path / "t.csv"
    table.write_text(
        "key,released\n" + "".join(f"{i},{float(v)!r}\n" for i, v in enumerate(y)), encoding="utf-8"
    )
    outs = {}
    for flag in ("--nonnegative", "--no-nonnegative", None):
        out = tmp_path / f"out{flag}.csv"
        args = ["denoise", str(table), "--sigma", "5", "--chain", "--out", str(out)]
        assert main(args + ([flag] if flag else [])) == 0
        outs[flag] = json.loads(Path(str(out) + ".report.json").read_text())
        rows = [line.split(",") for line in out.read_text().splitlines()]
        denoised = np.array([float(r[rows[0].index("denoised")]) for r in rows[1:]])
        assert bool(denoised.min() >= 0.0) is (flag == "--nonnegative")
    assert outs["--nonnegative"]["nonnegative"] is True
    assert outs[None]["nonnegative"] is False  # a bare table: off
    assert main(["denoise", str(table), "--sigma", "5", "--method", "none", "--nonnegative",
                 "--out", str(tmp_path / "x.csv")]) == 2  # fmt: skip


@pytest.mark.slow
def test_a_count_release_is_never_negative(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    from dpgauss.release.pipeline import run_release

    from .test_pipeline import ENGINE, make_spec, small_release_data

    src, _ = small_release_data(tmp_path)
    privacy = {"epsilon": 0.05, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 5}
    cols = {}
    for flag in (None, False):
        denoise: dict = {"method": "soft_threshold"}
        if flag is not None:
            denoise["nonnegative"] = flag
        spec = make_spec(src, privacy=privacy, denoise=denoise)
        rel = run_release(spec, out=tmp_path / f"r{flag}.csv", engine=ENGINE)
        cols[flag] = rel.columns["denoised"]
        assert rel.report["denoise"]["params"].get("nonnegative") is (
            True if flag is None else None
        )
    assert np.min(cols[None]) >= 0.0
    assert np.min(rel.columns["released"]) < 0.0  # the noise made some counts negative
