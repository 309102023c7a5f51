"""The Spark session shared by every test of the Spark engine (``spark`` marker: each such
test is skipped, with its reason, where pyspark or Java is missing; ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from ..conftest import spark_missing


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
