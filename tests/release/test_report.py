"""The public report's error estimate (issue #26, item 4): never a zero or negative error."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from dpgauss.release import pipeline
from dpgauss.release.report import BELOW_RESOLUTION, error_fields, rmse_text
from dpgauss.release.spec import ReleaseSpec

from ..helpers import make_ledger


@pytest.mark.parametrize("risk", [-18006.0, -1e-300, 0.0, 1e-3, float("nan")])
def test_sure_at_or_below_its_resolution_gives_the_bound_only(risk: float) -> None:
    err = error_fields(risk, 900.0, 100)
    assert err["estimated_error"] is None and err["rmse_per_key"] is None
    assert err["rmse_per_key_upper95"] == pytest.approx(3.0)
    if math.isfinite(risk):
        assert err["sure"] == risk and err["estimated_error_note"] == BELOW_RESOLUTION
    else:
        assert err["sure"] is None and "no SURE" in err["estimated_error_note"]
    assert rmse_text(err["rmse_per_key"], err["rmse_per_key_upper95"]).startswith("<= 3")


def test_sure_above_its_resolution_is_the_estimate() -> None:
    err = error_fields(400.0, 900.0, 100)
    assert err["estimated_error"] == 400.0 and err["rmse_per_key"] == pytest.approx(2.0)
    assert "estimated_error_note" not in err
    assert rmse_text(err["rmse_per_key"], err["rmse_per_key_upper95"]).startswith("2 (SURE")
    assert error_fields(9.0, 900.0, 100)["estimated_error"] is None  # 1 % of the bound
    assert error_fields(9.01, 900.0, 100)["estimated_error"] == 9.01


@pytest.mark.slow
def test_a_flat_release_reports_no_zero_error(tmp_path: Path) -> None:
    """James–Stein toward 0 on an empty map: SURE far below its resolution (often < 0).
    The report publishes the bound and the reason, never ``rmse_per_key: 0``."""
    csv = tmp_path / "s.csv"
    csv.write_text("uid,key\n")
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(csv)},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "key", "values": list(range(400))},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "james_stein"},
            "output": {"plot": False},
        }
    )
    seen = []
    for _ in range(4):  # SURE's sign varies with the noise: each draw must hold
        res = pipeline.run_release(
            spec, out=tmp_path / f"o{len(seen)}.csv", ledger=make_ledger(tmp_path, 1e3)
        )
        den = json.loads(Path(res.report_path).read_text())["denoise"]
        assert den["rmse_per_key"] is None or den["rmse_per_key"] > 0
        assert den["estimated_error"] is None or den["estimated_error"] > 0
        assert den["rmse_per_key_upper95"] > 0
        if den["estimated_error"] is None:
            assert den["estimated_error_note"] == BELOW_RESOLUTION and "<= " in res.summary
        seen.append(den["sure"])
        (tmp_path / "budget.sqlite").unlink()
    assert np.all(np.isfinite(seen))


def test_the_diagnostics_timing_line_reads_stage_by_stage() -> None:
    """``--diagnostics`` (issue #28): each stage a name and its unit, the total with the
    denoising time and share, and ``auto``'s candidates (whose names hold commas) apart."""
    from dpgauss.release.report import Diagnostics

    timing = {
        "plan_s": 0.123,
        "aggregate_s": 0.4,
        "denoise none, james_stein_s": 0.01,
        "denoise soft_threshold_s": 0.02,
        "denoise_s": 0.25,
        "noise_denoise_s": 0.3,
        "write_s": 0.05,
        "total_s": 0.9,
        "denoise_share": 0.25 / 0.9,
    }
    lines = Diagnostics(timing=timing).text().splitlines()
    assert lines[1] == (
        "timing     : plan 0.12 s, read and aggregate 0.40 s, noise and denoise 0.30 s, "
        "write 0.05 s; total 0.90 s (denoising 0.25 s, 28 % of it)"
    )
    assert lines[2] == "candidates : none, james_stein 0.01 s; soft_threshold 0.02 s"
    text = "\n".join(lines)
    assert not re.search(r"_s\b", text) and "share" not in text  # no raw keys
    only = Diagnostics(timing={"plan_s": 0.5, "other_step_s": 1.0}).text().splitlines()
    assert only[1] == "timing     : plan 0.50 s, other step 1.00 s"
    assert len(Diagnostics().text().splitlines()) == 1  # no timing, no line
