"""Input validation shared by every public function: one place, one message style.

Every public numeric function of dpgauss accepts Python numbers, sequences and numpy
arrays, broadcasts them against each other like a ``scipy.special`` ufunc, and returns a
Python ``float`` when every input was a scalar.  Bad input never turns into a NaN or a
warning: it raises

* ``TypeError`` when a value is not a real number (strings, ``None``, complex, booleans);
* ``ValueError`` when a value is outside its allowed range, naming the argument, the range
  and, for arrays, the first offending index;
* ``ValueError`` when the shapes of the arguments do not broadcast.

One scalar argument (a level, a tolerance, a grid, a number of draws) goes through
:func:`check_scalar` (one real number in an :class:`Interval`) or :func:`check_int` (one
integer in a range); modules do not write their own, so every such message reads
``"{name} must be a number in (0, 1); got 1.5"`` / ``"{name} must be an integer >= 1; got 0"``.
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
    "check_int",
    "check_integral",
    "check_interval",
    "check_scalar",
    "finish",
    "plain_number",
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
        if (
            self.low == -math.inf
            and self.high == math.inf
            and not (self.low_closed or self.high_closed)
        ):
            return np.isfinite(x)  # the real line: one pass
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
    try:
        x = float(value)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond the float range: the full check says so
        return None
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


def check_interval(
    arr: np.ndarray, name: str, allowed: Interval, note: str = "", *, rule: str = ""
) -> None:
    """Raise ``ValueError`` if any element of ``arr`` lies outside ``allowed``.

    The message reads ``"{name} must be in {allowed}; got ..."`` (``"must be finite"`` for
    :data:`REAL`), or ``"{name} must be {rule}; got ..."`` when ``rule`` is given."""
    ok = allowed.contains(arr)
    if ok.all():
        return
    bad = np.argwhere(~ok)[0] if arr.ndim else ()
    value = float(arr[tuple(bad)] if arr.ndim else arr[()])
    where = f" at index {tuple(int(i) for i in bad)}" if arr.ndim else ""
    extra = f" ({note})" if note else ""
    if not rule:
        rule = "finite" if allowed == REAL else f"in {allowed}"
    raise ValueError(f"{name} must be {rule}{extra}; got {value!r}{where}")


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
    """Raise ``ValueError`` unless every element of ``arr`` is a whole number (finite: ±inf
    equals its own floor, but is no integer)."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(arr) & (arr == np.floor(arr))
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


# --------------------------------------------------------------------------- one scalar


def _rule(what: str, allowed: Interval) -> str:
    """``"a number in (0, 1)"``, ``"a finite number"``, ``"in (0, 1)"`` (``what=""``)..."""
    if allowed == REAL:
        return f"a finite {what}" if what else "finite"
    if not what:
        return f"in {allowed}"
    article = "an" if what[0] in "aeiou" else "a"
    return f"{article} {what} in {allowed}"


def _show(value: int) -> str:
    """An int for a message: huge ones by their size (``str`` refuses > 4300 digits)."""
    if value.bit_length() <= 128:
        return str(value)
    digits = int(value.bit_length() * math.log10(2)) + 1
    return f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"


def check_scalar(
    x: object,
    name: str,
    interval: Interval = REAL,
    integer: bool = False,
    *,
    what: str | None = None,
) -> float:
    """``x`` as a float if it is one real number inside ``interval`` (and whole, with
    ``integer``); else ``TypeError`` or ``ValueError`` naming ``name`` and the range.

    Accepted: Python and NumPy real scalars, ``fractions.Fraction`` and 0-d real arrays;
    an integer-valued float passes ``integer=True`` (use :func:`check_int` to require an
    ``int``).  Refused with ``TypeError``: ``bool`` and ``numpy.bool_`` (a flag is not a
    number), strings, ``None``, complex numbers, and arrays or sequences of any other
    shape.  Refused
    with ``ValueError``: NaN (in no interval), a value outside ``interval`` and an int too
    large for a float.  A value is judged by the float returned, so the caller always
    receives a member of ``interval``.

    Messages: ``"level must be a number in (0, 1); got 1.5"`` (``what`` replaces
    ``"number"``; ``what=""`` gives the terse ``"sigma must be in (0, inf); got 0.0"``),
    ``"level must be a real number in (0, 1); got str"``, ``"sigma must be a single
    number, not an array of shape (2,)"``.
    """
    if not integer:
        fast = plain_number(x, interval)
        if fast is not None:
            return fast
    rule = _rule(("integer" if integer else "number") if what is None else what, interval)
    kind = "an integer" if integer else "a real number"
    tail = "" if interval == REAL else f" in {interval}"
    if not isinstance(x, numbers.Real | str | bytes | np.bool_) and x is not None:
        try:  # arrays and sequences: a 0-d real array is its number
            arr = np.asarray(x)
        except (TypeError, ValueError):  # ragged sequences and the like
            arr = np.asarray(None)
        if arr.dtype.kind in "iuf":
            if arr.ndim:
                shape = arr.shape
                raise TypeError(f"{name} must be a single number, not an array of shape {shape}")
            x = arr[()]
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be {kind}{tail}; got {type(x).__name__}")
    try:
        value = float(x)
    except OverflowError:  # an int (or Fraction) beyond the float range
        shown = _show(int(x)) if isinstance(x, numbers.Integral) else "a number"
        raise ValueError(f"{name} must be {rule}; got {shown}, beyond the float range") from None
    arr = np.asarray(value, dtype=np.float64)
    check_interval(arr, name, interval, rule=rule)
    if integer:
        check_integral(arr, name, rule=rule)
    return value


def check_int(x: object, name: str, low: int, high: int | None = None) -> int:
    """``x`` as an ``int`` if it is an integer (Python or NumPy, not ``bool``) in
    ``[low, high]`` (``[low, ∞)`` without ``high``), compared exactly; else ``TypeError``
    (not an integer: floats, even whole ones, strings, ``None``, ``bool``) or ``ValueError``
    (out of range), e.g. ``"jobs must be an integer >= 1; got 0"``."""
    rule = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be {rule}; got {type(x).__name__}")
    value = int(x)
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {rule}; got {_show(value)}")
    return value
