"""Options shared by the whole suite.

``--fuzz-long`` turns the neighbouring-dataset fuzzer (``tests/release/test_neighbours.py``)
from its fixed, derandomized CI slice into a long run with random seeds (thousands of
neighbouring pairs per engine); ``--fuzz-examples N`` sets the number of hypothesis examples
per test id of either mode.  The number of pairs checked per engine and source is printed at
the end of every run that ran the fuzzer.

Two hypothesis profiles, chosen by the environment variable ``HYPOTHESIS_PROFILE``:

* ``ci`` (the default, what ``.ci/run`` runs): the settings hypothesis picks by itself, every
  test's own ``max_examples`` as written;
* ``dev``: a contributor's quick pass, a tenth of the examples (at least one) of every
  property test, those with their own ``@settings(max_examples=...)`` included.

The ``slow`` marker (``pyproject.toml``) names the tests the contributor's loop,
``python3 -m pytest -m "not slow"``, leaves to CI; the full ``python3 -m pytest`` runs them.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil

import pytest
from hypothesis import settings

#: The fraction of the examples the ``dev`` profile runs (of every test's own number too).
DEV_FRACTION = 0.1

# ``ci``: today's settings (hypothesis's own default, or its built-in CI profile on a CI
# machine), copied before any profile is loaded; ``dev``: fewer examples.
settings.register_profile("ci", settings())
settings.register_profile(
    "dev", settings(), max_examples=max(1, math.ceil(settings().max_examples * DEV_FRACTION))
)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(HYPOTHESIS_PROFILE)

#: engine/source → [pairs checked, seconds, rows read, rows in the domain, aggregations,
#: aggregations where a bound dropped rows, pairs not checked because a frame was refused
#: by its declared schema]; filled by the fuzzer, printed at the end.
FUZZ_PAIRS = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpgauss")
    group.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help="run the neighbouring-dataset fuzzer long, with random seeds",
    )
    group.addoption(
        "--fuzz-examples",
        type=int,
        default=None,
        metavar="N",
        help="hypothesis examples per fuzzer test id (default: a CI slice, or the long run's)",
    )


def spark_missing() -> str | None:
    """Why the Spark engine's tests cannot run here (a missing pyspark or Java), or None.

    Those tests carry the ``spark`` marker (every test using the ``spark`` session fixture
    gets it too) and, where Spark cannot run, are each reported as skipped with this reason:
    ``pip install -e '.[test,spark]'`` and a Java 17+ runtime run them (``.ci/run`` does).
    """
    if importlib.util.find_spec("pyspark") is None:
        return "the Spark engine needs pyspark: pip install -e '.[test,spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "the Spark engine needs a Java 17+ runtime (java on PATH or JAVA_HOME)"
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "spark: runs the Spark engine (pyspark and Java 17+; pip install -e '.[spark]')"
    )


def _fewer_examples(items: list[pytest.Item]) -> None:
    """The ``dev`` profile: a tenth of each property test's own ``max_examples`` (once per
    function; parametrized items share it).  Hypothesis reads the attribute when it runs."""
    done: set[int] = set()
    for item in items:
        func = getattr(item, "function", None)
        own = getattr(func, "_hypothesis_internal_use_settings", None)
        if own is None or id(func) in done:
            continue
        done.add(id(func))
        fewer = max(1, math.ceil(own.max_examples * DEV_FRACTION))
        func._hypothesis_internal_use_settings = settings(own, max_examples=fewer)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HYPOTHESIS_PROFILE == "dev":
        _fewer_examples(items)
    reason = spark_missing()
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.slow)  # a JVM to start: not in the contributor's loop
        if reason is not None and item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def fuzz_pairs(request: pytest.FixtureRequest) -> dict:
    """The per-engine/source counters of the neighbouring-dataset fuzzer."""
    return request.config.stash.setdefault(FUZZ_PAIRS, {})


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    pairs = config.stash.get(FUZZ_PAIRS, None)
    if not pairs:
        return
    write = terminalreporter.write_line
    terminalreporter.section("neighbouring-dataset fuzzer")
    long = config.getoption("--fuzz-long")
    write(f"mode: {'long run, random seeds' if long else 'CI slice, derandomized'}")
    totals: dict[str, list[float]] = {}
    for key in sorted(pairs):
        n, seconds, read, in_domain, aggs, bit, *rest = pairs[key]
        refused = f"; {rest[0]} pairs not checked: a frame refused by its schema" if rest else ""
        write(
            f"{key:<24} {n:>7} pairs checked in {seconds:7.1f} s ({aggs} aggregations; "
            f"{in_domain / max(read, 1):.0%} of rows in the domain, a bound dropped rows in "
            f"{bit / max(aggs, 1):.0%}{refused})"
        )
        engine = key.split("/")[0]
        for name in {engine, engine.split("-")[0]}:
            total = totals.setdefault(name, [0, 0.0])
            total[0] += n
            total[1] += seconds
    for name, (n, seconds) in sorted(totals.items()):
        write(f"{name + ' (all sources)':<24} {n:>7} pairs checked in {seconds:7.1f} s")
