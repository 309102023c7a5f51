"""The derived L2 sensitivity: known values, a brute-force check, and safe rounding."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from dpgauss.release.plan import sensitivity_of
from dpgauss.release.sensitivity import count_l2, derive_sensitivity
from dpgauss.release.spec import ReleaseSpec, load_spec

from .test_spec import BASE, EXAMPLE


def l2(b=None, k=None, c=None, d=1000, spread=False) -> float:
    return count_l2(
        max_records_per_unit=b,
        max_keys_per_unit=k,
        max_records_per_key=c,
        domain_size=d,
        spread=spread,
    )[0]


def test_known_values() -> None:
    assert l2(b=5) == 5.0  # the paper's taxi setup: 5 trips per driver
    assert l2(b=5, spread=True) == 5.0  # kde: weights sum to 1 per record
    assert l2(k=4, c=3) == 6.0  # c * sqrt(k)
    assert l2(c=2, k=9) == 6.0
    assert l2(b=5, c=2, k=3) == 3.0  # sqrt(2*4 + 1) < min(5, 2*sqrt(3))
    assert l2(b=5, c=5, k=3) == 5.0
    assert l2(b=6, c=2, k=3) == pytest.approx(math.sqrt(12), rel=1e-15)
    assert l2(b=100, c=2, k=3) == pytest.approx(math.sqrt(12), rel=1e-15)  # b no longer binds
    assert l2(c=3, d=4) == 6.0  # no k: a unit has at most d keys
    assert l2(b=5, k=2) == 5.0  # k without c changes nothing
    assert l2(b=5, c=1, k=9, spread=True) == 5.0
    assert l2(b=50, c=2, k=3, spread=True) == 6.0  # c*k: spread mass overlaps
    assert l2(c=2, k=3, spread=True) == 6.0


def test_needs_a_bound() -> None:
    with pytest.raises(ValueError, match="no finite sensitivity"):
        l2(k=3)
    with pytest.raises(ValueError, match="max_records_per_unit must be an integer"):
        l2(b=0)
    with pytest.raises(ValueError, match="domain_size"):
        l2(b=1, d=0)


def brute_force(b, k, c, d) -> float:
    """max ‖n‖₂ over non-negative integer vectors with the bounds, by enumeration."""
    cap = min(x for x in (b, c) if x is not None)
    best = 0
    for n in itertools.product(range(cap + 1), repeat=d):
        if b is not None and sum(n) > b:
            continue
        if k is not None and sum(1 for x in n if x) > k:
            continue
        best = max(best, sum(x * x for x in n))
    return math.sqrt(best)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("b", "k", "c", "d"),
    [
        (b, k, c, d)
        for d in (1, 2, 3, 4)
        for b in (None, 1, 2, 3, 5)
        for k in (None, 1, 2, 3)
        for c in (None, 1, 2, 3)
        if (b is not None or c is not None)
    ],
)
def test_exact_maximum_matches_brute_force(b, k, c, d) -> None:
    got = l2(b=b, k=k, c=c, d=d)
    want = brute_force(b, k, c, d)
    assert got == pytest.approx(want, rel=1e-15)
    assert got >= want  # never below the true maximum
    textbook = [x for x in (b, None if c is None else c * math.sqrt(min(k or d, d))) if x]
    assert got <= min(textbook) * (1 + 1e-15)  # at least as tight as min(b, c sqrt k)


def test_rounded_up() -> None:
    for c, k in itertools.product(range(1, 30), range(1, 30)):
        got = l2(c=c, k=k)
        assert Fraction(got) ** 2 >= c * c * k
        assert Fraction(math.nextafter(got, 0)) ** 2 < c * c * k or got * got == c * c * k


def test_statistics() -> None:
    s = derive_sensitivity("sum", max_records_per_unit=5, domain_size=10, lower=-3, upper=2)
    assert s.l2 == 15.0 and s.scale == 3.0 and s.parts == {"sum": 15.0}
    s = derive_sensitivity("sum", max_records_per_unit=4, domain_size=10, lower=0, upper=25)
    assert s.l2 == 100.0
    m = derive_sensitivity("mean", max_records_per_unit=4, domain_size=10, lower=0, upper=25)
    assert m.l2 == pytest.approx(math.sqrt(2), rel=1e-15)
    assert Fraction(m.l2) ** 2 >= 2
    assert m.parts == {"sum": 50.0, "count": 4.0}  # centred sum: (25 - 0)/2 * 4
    assert m.scale == 12.5
    c = derive_sensitivity("count", max_records_per_key=2, max_keys_per_unit=9, domain_size=50)
    assert c.l2 == 6.0 and c.parts == {"count": 6.0}
    assert "count vector" in c.summary() and "sum" in m.summary()
    with pytest.raises(ValueError, match="needs the clamping bounds"):
        derive_sensitivity("sum", max_records_per_unit=1, domain_size=1)
    with pytest.raises(ValueError, match="statistic must be"):
        derive_sensitivity("median", max_records_per_unit=1, domain_size=1)


def test_from_specs() -> None:
    assert sensitivity_of(load_spec(EXAMPLE)).l2 == 5.0  # kde, 5 trips per driver
    spec = ReleaseSpec.from_dict(
        {**BASE, "bounds": {"max_keys_per_unit": 2, "max_records_per_key": 3}}
    )
    assert sensitivity_of(spec).l2 == pytest.approx(3 * math.sqrt(2))
    # a values domain of 3 keys caps k at 3
    spec = ReleaseSpec.from_dict({**BASE, "bounds": {"max_records_per_key": 1}})
    assert sensitivity_of(spec).l2 == pytest.approx(math.sqrt(3))
    d = sensitivity_of(spec).as_dict()
    assert d["l2"] == sensitivity_of(spec).l2 and d["candidates"]
