"""Input validation shared by every public function: one place, one message style.

Every public numeric function of dpgauss accepts Python numbers, sequences and numpy
arrays, broadcasts them against each other like a ``scipy.special`` ufunc, and returns a
Python ``float`` when every input was a scalar.  Bad input never turns into a NaN or a
warning: it raises

* ``TypeError`` when a value is not a real number (strings, ``None``, complex, booleans);
* ``ValueError`` when a value is outside its allowed range, naming the argument, the range
  and, for arrays, the first offending index;
* ``ValueError`` when the shapes of the arguments do not broadcast.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Interval",
    "as_real_array",
    "broadcast_args",
    "check_interval",
    "finish",
]


@dataclass(frozen=True)
class Interval:
    """A real interval with open or closed ends, used to describe an allowed range."""

    low: float = -math.inf
    high: float = math.inf
    low_closed: bool = False
    high_closed: bool = False

    def contains(self, x: np.ndarray) -> np.ndarray:
        """Elementwise membership; NaN is never a member."""
        above = x >= self.low if self.low_closed else x > self.low
        below = x <= self.high if self.high_closed else x < self.high
        return above & below

    def __str__(self) -> str:
        left = "[" if self.low_closed else "("
        right = "]" if self.high_closed else ")"
        return f"{left}{_fmt(self.low)}, {_fmt(self.high)}{right}"


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"


#: The types of one real number that scalar fast paths take as they are: Python's and
#: NumPy's (not ``bool``, not ``numpy.bool_``, not 0-d arrays).
REAL_SCALAR_TYPES = frozenset(
    {float, int, np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8}
    | {np.uint64, np.uint32, np.uint16, np.uint8}
)


def plain_number(value: object, allowed: Interval) -> float | None:
    """``value`` as a float if it is one real number (:data:`REAL_SCALAR_TYPES`) inside
    ``allowed``, else None: the fast check of scalar calls, whose failures go to the full
    validation (and its error messages)."""
    if type(value) not in REAL_SCALAR_TYPES:
        return None
    x = float(value)  # type: ignore[arg-type]
    return x if allowed.contains(x) else None  # type: ignore[arg-type]


REAL = Interval()
POSITIVE = Interval(0.0, math.inf)
NONNEGATIVE = Interval(0.0, math.inf, low_closed=True)
UNIT_OPEN = Interval(0.0, 1.0)


def as_real_array(value: object, name: str) -> np.ndarray:
    """Convert ``value`` to a float64 array, or raise ``TypeError`` naming ``name``."""
    if isinstance(value, bool | np.bool_) or value is None or isinstance(value, str | bytes):
        raise TypeError(
            f"{name} must be a real number or an array of real numbers; got {type(value).__name__}"
        )
    if isinstance(value, numbers.Real):
        return np.asarray(float(value), dtype=np.float64)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged sequences and the like
        raise TypeError(
            f"{name} must be a real number or an array of real numbers; "
            f"could not convert {type(value).__name__}: {exc}"
        ) from None
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be a real number or an array of real numbers; "
            f"got an array of dtype {arr.dtype}"
        )
    return arr.astype(np.float64, copy=False)


def check_interval(arr: np.ndarray, name: str, allowed: Interval, note: str = "") -> None:
    """Raise ``ValueError`` if any element of ``arr`` lies outside ``allowed``."""
    ok = allowed.contains(arr)
    if ok.all():
        return
    bad = np.argwhere(~ok)[0] if arr.ndim else ()
    value = float(arr[tuple(bad)] if arr.ndim else arr[()])
    where = f" at index {tuple(int(i) for i in bad)}" if arr.ndim else ""
    extra = f" ({note})" if note else ""
    rule = "be finite" if allowed == REAL else f"be in {allowed}"
    raise ValueError(f"{name} must {rule}{extra}; got {value!r}{where}")


def broadcast_args(**arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Broadcast the arrays against each other, naming them if the shapes do not fit."""
    try:
        return tuple(np.broadcast_arrays(*arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{k} {v.shape}" for k, v in arrays.items())
        raise ValueError(f"argument shapes do not broadcast: {shapes}") from None


def real_args(**spec: tuple[object, Interval]) -> tuple[tuple[np.ndarray, ...], bool]:
    """Validate and broadcast several real arguments in one call.

    ``spec`` maps an argument name to ``(value, allowed interval)``.  Returns the
    broadcast float64 arrays in the order given and whether every input was a scalar.
    """
    arrays = {}
    for name, (value, allowed) in spec.items():
        arr = as_real_array(value, name)
        check_interval(arr, name, allowed)
        arrays[name] = arr
    scalar = all(a.ndim == 0 for a in arrays.values())
    return broadcast_args(**arrays), scalar


def check_integral(arr: np.ndarray, name: str, why: str = "", rule: str = "an integer") -> None:
    """Raise ``ValueError`` unless every element of ``arr`` is a whole number."""
    ok = arr == np.floor(arr)
    if ok.all():
        return
    bad = tuple(int(i) for i in np.argwhere(~ok)[0]) if arr.ndim else ()
    where = f" at index {bad}" if arr.ndim else ""
    extra = f" ({why})" if why else ""
    raise ValueError(f"{name} must be {rule}{extra}; got {float(arr[bad])!r}{where}")


def elementwise(
    func: Callable[..., float], arrays: tuple[np.ndarray, ...], scalar: bool
) -> float | np.ndarray:
    """Apply a scalar function to broadcast arrays element by element (``finish``-ed)."""
    out = np.empty(arrays[0].shape)
    for idx in np.ndindex(out.shape):
        out[idx] = func(*(a[idx].item() for a in arrays))
    return finish(out, scalar)


def finish(result: np.ndarray, scalar: bool) -> float | np.ndarray:
    """Return a Python float for scalar calls, the array otherwise."""
    if scalar:
        return float(np.asarray(result)[()])
    return np.asarray(result)


def vectorised_call(func: Callable[..., np.ndarray], *arrays: np.ndarray) -> np.ndarray:
    """Run ``func`` on flattened copies of ``arrays`` and restore their common shape."""
    shape = arrays[0].shape
    flat = [np.ascontiguousarray(a, dtype=np.float64).ravel() for a in arrays]
    return func(*flat).reshape(shape)
