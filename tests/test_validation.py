"""The shared scalar validators of ``dpgauss._validation``: ``check_scalar`` and ``check_int``.

Properties: a value is accepted exactly when it is one real number (one integer for
``check_int``) in the interval, and the value returned is that number; everything else raises
``TypeError`` (wrong type: bools, strings, None, complex, arrays) or ``ValueError`` (NaN,
out of range, beyond the float range), with the argument's name and the range in the text.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpgauss._validation import (
    NONNEGATIVE,
    POSITIVE,
    REAL,
    UNIT_OPEN,
    Interval,
    check_int,
    check_scalar,
)

ENDS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0.0, 1.0, -1.0, 0.5]),
)


@st.composite
def intervals(draw: st.DrawFn) -> Interval:
    a, b = sorted((draw(ENDS), draw(ENDS)))
    if draw(st.booleans()):
        a = -math.inf
    if draw(st.booleans()):
        b = math.inf
    return Interval(a, b, draw(st.booleans()), draw(st.booleans()))


def _inside(x: float, allowed: Interval) -> bool:
    above = x >= allowed.low if allowed.low_closed else x > allowed.low
    below = x <= allowed.high if allowed.high_closed else x < allowed.high
    return bool(above and below)


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False).map(np.float64),
    st.floats(width=32, allow_nan=False, allow_infinity=False).map(np.float32),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.fractions(max_denominator=1000),
)


@given(x=NUMBERS, allowed=intervals())
def test_check_scalar_accepts_exactly_the_interval(x, allowed):
    value = float(x)
    if _inside(value, allowed):
        got = check_scalar(x, "x", allowed)
        assert type(got) is float and got == value
        assert check_scalar(np.asarray(value), "x", allowed) == value  # 0-d arrays too
    else:
        with pytest.raises(ValueError, match=r"^x must be (a number in |a finite number)"):
            check_scalar(x, "x", allowed)


@given(x=NUMBERS, allowed=intervals())
def test_check_scalar_integer_requires_a_whole_number(x, allowed):
    value = float(x)
    if _inside(value, allowed) and math.isfinite(value) and value == math.floor(value):
        assert check_scalar(x, "n", allowed, integer=True) == value
    else:
        with pytest.raises(ValueError, match=r"^n must be (an integer in |a finite integer)"):
            check_scalar(x, "n", allowed, integer=True)


@pytest.mark.parametrize(
    "bad",
    [True, False, np.True_, "0.5", b"1", None, 1j, [0.5], (0.5,), {}, np.array("1.0")],
)
def test_check_scalar_refuses_non_numbers_with_type_error(bad):
    with pytest.raises(TypeError, match=r"level must be a "):
        check_scalar(bad, "level", UNIT_OPEN)


def test_check_scalar_messages_name_the_argument_and_the_range():
    with pytest.raises(ValueError, match=r"^level must be a number in \(0, 1\); got 1\.5$"):
        check_scalar(1.5, "level", UNIT_OPEN)
    with pytest.raises(TypeError, match=r"^level must be a real number in \(0, 1\); got str$"):
        check_scalar("0.5", "level", UNIT_OPEN)
    with pytest.raises(TypeError, match=r"^level must be a real number in \(0, 1\); got bool$"):
        check_scalar(True, "level", UNIT_OPEN)
    with pytest.raises(TypeError, match=r"^sigma must be a single number, not an array of sh"):
        check_scalar(np.array([1.0, 2.0]), "sigma", POSITIVE)
    with pytest.raises(ValueError, match=r"^sigma must be in \(0, inf\); got 0\.0$"):
        check_scalar(0.0, "sigma", POSITIVE, what="")
    with pytest.raises(ValueError, match=r"^x must be a finite number; got nan$"):
        check_scalar(math.nan, "x", REAL)
    with pytest.raises(ValueError, match=r"^x must be a finite number; got inf$"):
        check_scalar(math.inf, "x")
    with pytest.raises(ValueError, match=r"^dim must be an integer in \[1, inf\); got 2\.5$"):
        check_scalar(2.5, "dim", Interval(1.0, math.inf, low_closed=True), integer=True)
    with pytest.raises(ValueError, match=r"^m must be a count in \[0, inf\); got -1\.0$"):
        check_scalar(-1, "m", NONNEGATIVE, what="count")


def test_check_scalar_infinity_only_where_the_interval_holds_it():
    assert check_scalar(math.inf, "t", Interval(0.0, math.inf, True, True)) == math.inf
    for allowed in (POSITIVE, NONNEGATIVE, REAL):
        with pytest.raises(ValueError, match="t must be"):
            check_scalar(math.inf, "t", allowed)
        with pytest.raises(ValueError, match="t must be"):
            check_scalar(np.float64(math.nan), "t", allowed)


@pytest.mark.parametrize(
    "huge",
    [10**400, -(10**400), 10**5000, Fraction(10**400, 3)],
    ids=["1e400", "-1e400", "1e5000", "fraction"],
)
def test_check_scalar_huge_numbers_beyond_the_float_range(huge):
    with pytest.raises(ValueError, match=r"^x must be a number in \(0, inf\); got .*beyond the"):
        check_scalar(huge, "x", POSITIVE)


def test_check_scalar_judges_the_float_it_returns():
    # 2**60 - 1 rounds to 2**60, outside [0, 2**60): the caller never receives a non-member
    with pytest.raises(ValueError, match=r"got 1\.15"):
        check_scalar(2**60 - 1, "x", Interval(0.0, 2.0**60, low_closed=True))


@given(
    x=st.one_of(
        st.integers(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
        st.integers(min_value=0, max_value=2**64 - 1).map(np.uint64),
    ),
    low=st.integers(min_value=-(2**70), max_value=2**70),
    width=st.none() | st.integers(min_value=0, max_value=2**70),
)
def test_check_int_accepts_exactly_the_range(x, low, width):
    high = None if width is None else low + width
    if int(x) >= low and (high is None or int(x) <= high):
        got = check_int(x, "n", low, high)
        assert type(got) is int and got == int(x)
    else:
        rule = rf"an integer >= {low}" if high is None else rf"an integer in \[{low}, {high}\]"
        with pytest.raises(ValueError, match=rf"^n must be {rule}; got "):
            check_int(x, "n", low, high)


@pytest.mark.parametrize(
    "bad", [True, False, np.True_, 2.0, np.float64(3.0), "2", None, Fraction(2), np.array(2)]
)
def test_check_int_refuses_non_integers_with_type_error(bad):
    with pytest.raises(TypeError, match=r"^jobs must be an integer >= 1; got "):
        check_int(bad, "jobs", 1)


def test_check_int_messages():
    with pytest.raises(ValueError, match=r"^jobs must be an integer >= 1; got 0$"):
        check_int(0, "jobs", 1)
    with pytest.raises(ValueError, match=r"^draws must be an integer in \[2, 100000\]; got 1$"):
        check_int(np.int64(1), "draws", 2, 100_000)
    with pytest.raises(ValueError, match=r"got an integer of about 5001 digits$"):
        check_int(10**5000, "draws", 2, 100_000)  # str() would refuse it
    with pytest.raises(ValueError, match=r"got a negative integer of about 5001 digits$"):
        check_int(-(10**5000), "draws", 2)
    assert check_int(10**5000, "n", 0) == 10**5000  # no float on the way


@pytest.mark.parametrize("x", [math.inf, -math.inf])
def test_an_infinity_is_no_integer(x):
    """±inf equals its own floor, but is no integer (hypothesis drew −inf in an interval
    closed at −inf: it was accepted)."""
    from dpgauss._validation import Interval

    with pytest.raises(ValueError, match=r"^n must be an integer in"):
        check_scalar(
            x, "n", Interval(-math.inf, math.inf, low_closed=True, high_closed=True), integer=True
        )
