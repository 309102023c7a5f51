"""One quick run of every figure, shared by the experiment tests (it is the slow part: every
test using it is marked ``slow``)."""

from __future__ import annotations

import importlib.util
import time

import pytest

from dpgauss.experiments import run

#: Figure 4 goes through the release pipeline, which needs the `data` extra.
HAVE_PIPELINE = all(importlib.util.find_spec(m) is not None for m in ("duckdb", "pyarrow"))
FIGURES = ("1", "2", "3", "4") if HAVE_PIPELINE else ("1", "2", "3")


@pytest.fixture(scope="session")
def quick_all(tmp_path_factory):
    """``dpgauss reproduce --quick --jobs 2`` of every figure: (out dir, report, seconds)."""
    out = tmp_path_factory.mktemp("reproduce_quick")
    start = time.perf_counter()
    report = run(list(FIGURES), quick=True, out=out, seed=0, jobs=2, progress=False)
    return out, report, time.perf_counter() - start
