"""Shared checks of the input-validation contract (see src/dpgauss/_validation.py).

Every public function validates its inputs: ``TypeError`` for non-real input, ``ValueError``
naming the argument and the allowed interval (and, for arrays, the first offending index),
``ValueError`` "argument shapes do not broadcast" for shape mismatches.  Functions are called
with keyword arguments, so the argument names of the API contract are checked too.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

import numpy as np
import pytest

#: an interval such as "(0, 1)", "[0, inf)" or "(0, 1]"
INTERVAL = re.compile(r"[\[(]\s*-?[\w.+-]+\s*,\s*-?[\w.+-]+\s*[\])]")

NOT_REAL = [
    "1.0",
    b"1.0",
    None,
    True,
    np.bool_(False),
    1 + 1j,
    np.array(["a", "b"]),
    np.array([1.0, None], dtype=object),
    [True, False],
    [1.0, "x"],
]


def _word(name: str) -> re.Pattern[str]:
    # "sensitivity" must not be satisfied by "l1_sensitivity", nor "delta" by "delta0"
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")


def _call(func: Callable[..., object], kwargs: dict[str, object]) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return func(**kwargs)


def check_bad_value_scalar(func, valid: dict[str, object], name: str, bad: object) -> None:
    kwargs = dict(valid)
    kwargs[name] = bad
    with pytest.raises(ValueError) as info:
        _call(func, kwargs)
    msg = str(info.value)
    assert _word(name).search(msg), f"{func.__name__}: message does not name {name!r}: {msg!r}"
    assert INTERVAL.search(msg), f"{func.__name__}: message gives no allowed range: {msg!r}"
    assert "at index" not in msg, msg


def check_bad_value_array(func, valid: dict[str, object], name: str, bad: object) -> None:
    good = valid[name]
    # 1-d, bad value at index 2 and again at 3: the first one is reported
    kwargs = dict(valid)
    kwargs[name] = np.array([good, good, bad, bad, good], dtype=float)
    with pytest.raises(ValueError) as info:
        _call(func, kwargs)
    msg = str(info.value)
    assert _word(name).search(msg), msg
    assert "at index (2,)" in msg, f"{func.__name__}: {msg!r}"
    # 2-d, as a nested list
    kwargs[name] = [[good, good], [bad, good]]
    with pytest.raises(ValueError) as info:
        _call(func, kwargs)
    msg = str(info.value)
    assert _word(name).search(msg), msg
    assert "at index (1, 0)" in msg, f"{func.__name__}: {msg!r}"


def check_type_errors(func, valid: dict[str, object]) -> None:
    for name in valid:
        for bad in NOT_REAL:
            kwargs = dict(valid)
            kwargs[name] = bad
            with pytest.raises(TypeError) as info:
                _call(func, kwargs)
            msg = str(info.value)
            assert _word(name).search(msg), (
                f"{func.__name__}({name}={bad!r}): TypeError does not name {name!r}: {msg!r}"
            )


def check_broadcast_mismatch(func, valid: dict[str, object]) -> None:
    names = list(valid)
    first, second = names[0], names[1]
    kwargs = dict(valid)
    kwargs[first] = np.full(3, valid[first], dtype=float)
    kwargs[second] = np.full(2, valid[second], dtype=float)
    with pytest.raises(ValueError) as info:
        _call(func, kwargs)
    msg = str(info.value)
    assert "do not broadcast" in msg, msg
    assert _word(first).search(msg) and _word(second).search(msg), msg
    # compatible shapes are fine
    kwargs[second] = np.full((2, 1), valid[second], dtype=float)
    out = _call(func, kwargs)
    assert isinstance(out, np.ndarray) and out.shape == (2, 3)
    assert np.all(np.isfinite(out))
