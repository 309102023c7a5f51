"""The Spark session shared by every test of the Spark engine (``spark`` marker: each such
test is skipped, with its reason, where pyspark or Java is missing; ``tests/conftest.py``),
and ``zero_noise``: releases without noise, through the ``add_noise`` seam."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from dpgauss.noise.release import Release
from dpgauss.release import estimate
from dpgauss.release.plan import Calibration

from ..conftest import spark_missing


def _zero_noise(cal: Calibration, y: np.ndarray, seed: int | None) -> Release:
    """``estimate.add_noise`` without noise: "released" is the exact bounded aggregate, with
    the planned law's σ and label (so the intervals are those of a real release)."""
    p = cal.probe
    return Release(y.copy(), p.sigma, p.epsilon, p.delta, p.sensitivity, p.mechanism, p.noise)


@pytest.fixture
def zero_noise(monkeypatch: pytest.MonkeyPatch) -> Callable[[], contextlib.AbstractContextManager]:
    """``with zero_noise(): run_release(...)`` runs releases without noise (the report says
    ``noise_off``, NOT private), so tests compare whole releases with exact aggregates."""

    @contextlib.contextmanager
    def off() -> Iterator[None]:
        with monkeypatch.context() as m:
            m.setattr(estimate, "add_noise", _zero_noise)
            yield

    return off


@pytest.fixture(scope="module")
def spark():
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dpgauss-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
