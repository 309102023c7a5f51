r"""How a record's value becomes a key of a ``values`` or ``range`` domain — exactly, and the
same in both engines.

The rules (a record maps to at most one key, and which one is decided in exact arithmetic):

**Reading a value.**  Before it is compared with keys, a record's value is read as

* an *integer* — integer columns of every width, signed or unsigned (Parquet ``int64``,
  ``uint64``, …; DuckDB ``HUGEINT``), booleans (true = 1, false = 0) and ``DECIMAL`` columns
  of scale 0: the integer itself;
* a *double* — ``FLOAT`` and ``DOUBLE`` columns: the exact binary value (a float widened
  exactly); NaN and ±inf are invalid;
* an exact *decimal* — ``DECIMAL(p, s)`` columns with ``s > 0``: the value ``m / 10**s``;
* from *text* (CSV, string columns): surrounding whitespace (space, tab, newline, vertical
  tab, form feed, carriage return) is ignored; an *integer literal* — ``[+-]`` and digits,
  ``_`` allowed between digits — whose value is below ``10**38`` in magnitude is that integer,
  exactly; any other number (a decimal point, an exponent, a longer integer) is the double
  nearest to it (as both engines parse it); ``inf``, ``nan`` and non-numbers are invalid;
* columns of other types (timestamps, dates, binary, …) are invalid for numeric domains.

**values, numeric keys.**  A record matches the key *equal to its value as a rational
number*: ``1`` and ``1.0`` are the same key (a spec listing both is refused), the integer
``2**53 + 1`` is not the double ``2.0**53``, the key ``0.1`` is the double 0.1 (so the text
``"0.1"``, read as that double, matches it, while a ``DECIMAL`` 0.10 — exactly 1/10 — does
not).  Keys are distinct numbers, so a record matches at most one.

**values, string keys.**  A record matches the key equal to its *text*: a string column's
value as it is (no trimming); an integer column's decimal digits; a boolean's ``true`` /
``false``; a ``DECIMAL``'s digits with its scale (``1.50``); a date ``YYYY-MM-DD``; a
timestamp without time zone ``YYYY-MM-DD HH:MM:SS[.ffffff]``.  Floats and time-zoned
timestamps are invalid with string keys (the engines write them differently).

**range.**  With ``start``, ``stop`` and ``step`` taken as the exact values written in the spec
(an integer, or the exact binary value of a float), bin ``i`` is
``[start + i·step, start + (i+1)·step) ∩ [start, stop)`` for ``i = 0 … n − 1``,
``n = ⌈(stop − start)/step⌉``, except that a range whose written ``stop`` is exactly its
``n``-th written edge has ``n`` bins even when the doubles' rounding would add a sliver
``(n+1)``-th (``start = 52.5195, stop = 52.5245, step = 0.0005`` is 10 bins, though the
doubles' exact ratio is just above 10): then ``stop`` is ``start + n·step`` in the doubles'
exact values, so the range is the ``n`` whole bins.  A record's value ``x`` falls in bin
``⌊(x − start)/step⌋`` if ``start ≤ x < stop`` — all in exact rational arithmetic: a value at
a bin edge belongs to the bin above, a value just below ``stop`` to the last bin, ``stop``
itself to none.  Labels (the bins' lower edges) are integers when ``start`` and ``step`` are
integers, else the doubles nearest to the exact edges (rounded once, never accumulated).

How the engines compute it exactly
----------------------------------
Write ``step = b·2^q`` (``b`` odd).  Integer values use integer arithmetic (``HUGEINT`` in
DuckDB, ``DECIMAL(38, 0)`` in Spark): with ``lo`` the smallest integer in the range,
``⌊(x − start)/step⌋ = κ + ⌊(x − lo + ρ)/step⌋`` where ``lo − start = κ·step + ρ``; for
``q < 0`` that is ``κ + ((x − lo)·2^−q + ⌊ρ·2^−q⌋) div b``.  Decimals are integers
``m = x·10^s`` against the range scaled by ``10^s``.  Doubles: with ``start = g·2^q + φ``
(``0 ≤ φ < 2^q``, a double), ``⌊(x − start)/2^q⌋ = ⌊(x − φ)/2^q⌋ − g``; ``x − φ = w + e``
exactly (TwoSum), ``a = w·2^−q`` is exact, and ``⌊(w + e)/2^q⌋ = ⌊a⌋ + (⌊e·2^−q⌋ if a is an
integer else 0)`` because no integer lies strictly between ``a`` and ``a + e·2^−q`` (``|e|`` is
at most half a unit in the last place of ``w``); the key is ``(that − g) div b``.  The range
tests compare a double with the smallest double ``≥ start`` (and ``≥ stop``), an integer with
``⌈start⌉``.  Spec limits keep every intermediate below ``2^123``: ``|start|, |stop| ≤ 1e36``
and, for float labels, a step above the spacing of doubles at the edges (else the labels
would not be distinct).
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from ...privacy._rounding import rational_up
from ..engines.base import INT_LIMIT, Column, Dialect

__all__ = [
    "INT_LIMIT",
    "MAX_KEYS",
    "RANGE_LIMIT",
    "RangeBins",
    "WrittenFloat",
    "key_array",
    "range_key_sql",
    "value_tables",
]

MAX_KEYS = 50_000_000
#: |start| and |stop| of a range domain are at most this, the double 1e36 (< 2**120: the
#: engines' exact arithmetic stays below 2**123).
RANGE_LIMIT = Fraction(1e36)
#: An integer literal in text: read exactly (if |x| < INT_LIMIT), otherwise as a double.
#: The whitespace class is spelled out: RE2 (DuckDB) and Java (Spark) differ on ``\s``.
WS = r"[ \t\n\x0B\f\r]"
INT_LITERAL = rf"^{WS}*[+-]?[0-9]+(_[0-9]+)*{WS}*$"
#: The text of a timestamp, as both engines read it (a ``[filter]`` window, a timestamp
#: range): ``YYYY-MM-DD``, optionally ``[ T]hh:mm[:ss[.fraction][±hh[:mm]]]`` — a UTC offset
#: (which both engines ignore) only after the seconds: Spark reads no offset after
#: ``hh:mm`` (DuckDB does).  DuckDB's ``TRY_CAST`` alone also reads ``Z``, ``UTC``, ``BC``,
#: ``epoch`` and hour 24, Spark's not: only text of this grammar is cast, on both.
TIMESTAMP_TEXT = (
    rf"^{WS}*[0-9]{{4}}-[0-9]{{1,2}}-[0-9]{{1,2}}"
    r"([ T]([01]?[0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]*)?([+-][0-9]{2}(:?[0-9]{2})?)?)?)?"
    rf"{WS}*$"
)
_DBL_MAX = Fraction(sys.float_info.max)
_BIG = 2**123  # every big-integer intermediate stays below this (module docstring)


def _dyadic(q: Fraction) -> tuple[int, int]:
    """``(m, e)`` with ``q = m·2^e`` and ``m`` odd; ``q`` a non-zero dyadic rational."""
    num, den = q.numerator, q.denominator
    if den & (den - 1):
        raise ValueError(f"{q} is not a dyadic rational")
    e = -(den.bit_length() - 1)
    tz = (num & -num).bit_length() - 1
    return num >> tz, e + tz


def _ceil(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)


def _floor(q: Fraction) -> int:
    return q.numerator // q.denominator


def exact_number(where: str, key: str, value: object) -> Fraction:
    """A TOML number (int or finite float, not a bool) as an exact Fraction."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"[{where}] {key} must be a number; got {type(value).__name__} {brief(value)}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"[{where}] {key} must be a finite number; got {value!r}")
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"[{where}] {key} must be a finite number; got {value!r}")
    return Fraction(x)


class WrittenFloat(float):
    """A float read from a spec's TOML that keeps the text it was written as (``written``).

    :func:`dpgauss.release.spec.load_spec` reads every TOML float as one
    (``tomllib``'s ``parse_float``), so that a range's bin count can be taken from the
    decimals the user wrote (:meth:`RangeBins.of`).  It is a float in every other respect.
    """

    written: str

    def __new__(cls, text: str) -> WrittenFloat:
        self = super().__new__(cls, text)
        self.written = text
        return self


def written_decimal(value: object, exact: Fraction) -> Fraction:
    """The decimal a spec number was written as, exactly: a :class:`WrittenFloat`'s text,
    else a float's shortest repr (what a Python literal gives back), else ``exact`` (an
    integer's value).  ``exact`` is the number's binary value, within half a unit in its last
    place of the decimal; a text with an exponent beyond ±400 falls back to the repr."""
    if isinstance(value, float) and not isinstance(value, bool):
        text = getattr(value, "written", None)
        if text is not None:
            try:
                d = Decimal(text)
            except InvalidOperation:  # pragma: no cover - tomllib's float grammar
                d = None
            if d is not None and d.is_finite() and abs(d.adjusted()) <= 400:
                return Fraction(d)
        return Fraction(Decimal(repr(float(value))))
    return exact


def _show(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else repr(float(q))


def brief(value: object) -> str:
    """``repr(value)``, with integers of more than 30 digits described by their length."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        digits = len(str(abs(int(value))))
        if digits > 30:
            sign = "-" if value < 0 else ""
            return f"{sign}<an integer of {digits} digits>"
    return repr(value)


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"about 10^{len(str(n)) - 1}"


# ------------------------------------------------------------------------------- range


@dataclass(frozen=True)
class RangeBins:
    """The exact bins of a ``range`` domain (module docstring).

    ``start``, ``stop`` and ``step`` are exact rationals; ``size`` is
    ``⌈(stop − start)/step⌉``; ``integer_labels`` whether the labels are integers (``start``
    and ``step`` given as integers).
    """

    start: Fraction
    stop: Fraction
    step: Fraction
    size: int
    integer_labels: bool

    @classmethod
    def of(cls, start: object, stop: object, step: object, where: str = "domain") -> RangeBins:
        """Validate a spec's ``start``, ``stop``, ``step``; ``ValueError``/``TypeError`` naming
        the ``[domain]`` key (or the table ``where``) and the allowed range."""
        s = exact_number(where, "start", start)
        t = exact_number(where, "stop", stop)
        p = exact_number(where, "step", step)
        for k, v, q in (("start", start, s), ("stop", stop, t)):
            if abs(q) > RANGE_LIMIT:
                raise ValueError(
                    f"[{where}] {k} must be a number with |{k}| <= 1e36; got {brief(v)}"
                )
        if not p > 0:
            raise ValueError(f"[{where}] step must be a number > 0; got {brief(step)}")
        if not t > s:
            raise ValueError(
                f"[{where}] stop must be greater than start; got start={brief(start)}, "
                f"stop={brief(stop)}"
            )
        n = _ceil((t - s) / p)
        # The count as the user wrote it: 52.5195 to 52.5245 by 0.0005 is 10 bins, though the
        # doubles' exact ratio is just above 10.  Only that sliver bin is dropped: when the
        # written stop is exactly the n-th written edge and the doubles' rounding alone adds
        # an (n+1)-th bin; the bins keep the doubles' exact edges and end at start + n·step
        # (module docstring).
        ws, wt, wp = (written_decimal(v, q) for v, q in ((start, s), (stop, t), (step, p)))
        if wt > ws and wp > 0:
            ratio = (wt - ws) / wp
            if ratio.denominator == 1 and n == ratio.numerator + 1:
                n = ratio.numerator
                t = s + n * p
        if n > MAX_KEYS:
            raise ValueError(
                f"[{where}] the range has {_count(n)} bins (ceil((stop - start) / step)); at "
                f"most {MAX_KEYS:,} allowed"
            )
        ints = all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (start, step)
        )
        bins = cls(s, t, p, n, ints)
        if not ints and not bins._exact_edges():
            top = max(abs(s), abs(s + (n - 1) * p))
            spacing = math.ulp(rational_up(top))
            if not p > Fraction(spacing):
                raise ValueError(
                    f"[{where}] step = {step!r} is too fine for bins near {float(top):.17g}: "
                    f"their lower edges would not be distinct doubles (the spacing of doubles "
                    f"there is {spacing:.3g}); use a larger step, or integer start and step"
                )
        return bins

    # -- exact arithmetic

    def key(self, x: Fraction) -> int | None:
        """The bin of the exact value ``x``, or None."""
        if not self.start <= x < self.stop:
            return None
        return _floor((x - self.start) / self.step)

    def edge(self, i: int) -> Fraction:
        return self.start + i * self.step

    def _grid(self) -> tuple[int, int, int]:
        """``(A, B, E)``: ``edge(i) = (A + i·B)·2^E`` with integers A, B."""
        b, q = _dyadic(self.step)
        if self.start:
            a, p = _dyadic(self.start)
        else:
            a, p = 0, q
        e = min(p, q)
        return a << (p - e), b << (q - e), e

    def _exact_edges(self) -> bool:
        """Whether every edge is exactly a double (then distinct, the step being > 0)."""
        a, b, _ = self._grid()
        return max(abs(a), abs(a + (self.size - 1) * b)) <= 2**53

    def labels(self) -> Any:
        """The bins' lower edges as a numpy array: int64 (or Python ints beyond int64) for
        integer labels, else float64, each the double nearest to the exact edge."""
        import numpy as np

        n = self.size
        if self.integer_labels:
            s, p = int(self.start), int(self.step)
            if max(abs(s), abs(s + (n - 1) * p), p) < 2**63:
                return s + p * np.arange(n, dtype=np.int64)
            return np.array([s + i * p for i in range(n)], dtype=object)
        a, b, e = self._grid()
        hi = max(abs(a), abs(a + (n - 1) * b), b)
        if hi <= 2**53 or (hi < 2**62 and e >= -1022):
            # int64 → float64 rounds once (to nearest); scaling by 2^e is then exact as long
            # as no label is subnormal (e >= -1022 and |A + iB| >= 1 for non-zero labels).
            c = a + b * np.arange(n, dtype=np.int64)
            out = np.ldexp(c.astype(np.float64), e)
        else:
            scale = 1 << -e if e < 0 else None
            out = np.array(
                [
                    ((a + i * b) / scale) if scale is not None else float((a + i * b) << e)
                    for i in range(n)
                ],
                dtype=np.float64,
            )
        out = out + 0.0  # no negative zero
        return out

    # -- parameters of the engines' arithmetic

    def scaled(self, power10: int) -> RangeBins:
        """The same bins for ``x·10^power10`` (decimals as unscaled integers)."""
        f = 10**power10
        return RangeBins(self.start * f, self.stop * f, self.step * f, self.size, False)


# ------------------------------------------------------------------------- range keys


def _pow2_mul(sql: Dialect, x: str, k: int) -> str:
    """``x·2^k`` exactly (a product of at most three representable powers of two)."""
    out = x
    while k:
        step = max(-1000, min(1000, k))
        out = f"({out} * {sql.dbl(math.ldexp(1.0, step))})"
        k -= step
    return out


def _floor_big(sql: Dialect, a: str, wide: bool) -> str:
    """⌊a⌋ as a big integer for a double ``|a| < 2^123`` (BIGINT when not ``wide``)."""
    small = f"CAST(floor({a}) AS BIGINT)"
    if not wide:
        return small
    hi = f"CAST(floor({a} * {sql.dbl(2.0**-60)}) AS BIGINT)"
    lo = f"CAST({a} - CAST({hi} AS DOUBLE) * {sql.dbl(2.0**60)} AS BIGINT)"
    return (
        f"(CASE WHEN abs({a}) < {sql.dbl(2.0**62)} THEN {sql.to_big(small)} "
        f"ELSE {sql.to_big(hi)} * {sql.big_lit(2**60)} + {sql.to_big(lo)} END)"
    )


def _int_key(sql: Dialect, x: str, bins: RangeBins, lo_t: int, hi_t: int) -> str | None:
    """SQL for the key of an exact integer ``x`` (type bounds ``lo_t … hi_t``), or None if
    the arithmetic would not fit 38 digits (the caller reports it)."""
    lo = max(_ceil(bins.start), lo_t)
    hi = min(_ceil(bins.stop), hi_t + 1)  # the integers in range: lo … hi − 1
    if lo >= hi:
        return "CAST(NULL AS BIGINT)"
    if hi - lo == 1:
        k = bins.key(Fraction(lo))
        same = sql.int_lit(lo) if -(2**63) <= lo_t and hi_t < 2**63 else sql.big_lit(lo)
        return f"CASE WHEN {x} = {same} THEN {sql.int_lit(k)} END"  # type: ignore[arg-type]
    r = lo - bins.start
    kappa = _floor(r / bins.step)
    rho = r - kappa * bins.step
    b, q = _dyadic(bins.step)
    if q >= 0:
        mult, add, div = 1, _floor(rho), b << q
    else:
        mult, add, div = 1 << -q, _floor(rho * (1 << -q)), b
    top = (hi - 1 - lo) * mult + add
    # BIGINT literals for a BIGINT column (lo … hi − 1 lie within its bounds), else big ones.
    bound = sql.int_lit if -(2**63) <= lo_t and hi_t < 2**63 else sql.big_lit
    inside = f"{x} >= {bound(lo)} AND {x} <= {bound(hi - 1)}"
    if top < div:  # every integer in range is in the same bin (a step wider than the range)
        return f"CASE WHEN {inside} THEN {sql.int_lit(kappa)} END"
    if max(top, div) >= INT_LIMIT - 1:
        return None
    small = max(abs(lo), abs(hi), top, div) < 2**62
    if small:
        u = f"(CAST({x} AS BIGINT) - {sql.int_lit(lo)})"
        lit = sql.int_lit
    else:
        u = f"({sql.to_big(x)} - {sql.big_lit(lo)})"
        lit = sql.big_lit
    num = u if mult == 1 else f"{u} * {lit(mult)}"
    if add:
        num = f"{num} + {lit(add)}"
    key = num if div == 1 else sql.idiv(num, lit(div))
    if kappa:
        key = f"{key} + {sql.int_lit(kappa)}"
    return f"CASE WHEN {inside} THEN CAST({key} AS BIGINT) END"


def _double_key(sql: Dialect, x: str, bins: RangeBins) -> str:
    """SQL for the key of a double ``x`` (module docstring)."""
    s, p = bins.start, bins.step
    lo_d, hi_d = rational_up(s), rational_up(bins.stop)
    inside = f"{x} >= {sql.dbl(lo_d)} AND {x} < {sql.dbl(hi_d)}"
    if bins.size == 1:
        return f"CASE WHEN {inside} THEN {sql.int_lit(0)} END"
    b, q = _dyadic(p)
    top = max(abs(s), abs(bins.stop))
    if s.denominator == 1 and q >= 0:
        # Integer start and step: ⌊(x − s)/p⌋ = (⌊x⌋ − s) div p.
        s_i, p_i = int(s), int(p)
        wide = top + 1 >= 2**62
        lit = sql.big_lit if wide else sql.int_lit
        num = f"({_floor_big(sql, x, wide)} - {lit(s_i)})"
        key = num if p_i == 1 else sql.idiv(num, lit(p_i))
        return f"CASE WHEN {inside} THEN CAST({key} AS BIGINT) END"
    # g = trunc(start / 2^q): φ = start − g·2^q has start's sign and |φ| < 2^q, so it is
    # the low bits of |start| — a double.
    g = int(s / Fraction(2) ** q)
    phi = s - g * Fraction(2) ** q
    phi_f = float(phi)
    if Fraction(phi_f) != phi:  # pragma: no cover - excluded by the spec's checks
        raise ValueError(f"internal error: the range's start {s} has no exact split")
    if top / Fraction(2) ** q >= _BIG:  # pragma: no cover - excluded by the spec's checks
        raise ValueError("internal error: the range is too wide for exact binning")
    two_q = sql.dbl(math.ldexp(1.0, q))
    if phi_f:
        w = f"({x} - {sql.dbl(phi_f)})"
        bb = f"({w} - {x})"
        e = f"(({x} - ({w} - {bb})) + ({sql.dbl(-phi_f)} - {bb}))"
    else:
        w, e = x, None
    a = _pow2_mul(sql, w, -q)
    wide = top / Fraction(2) ** q + 2 >= 2**62 or abs(g) >= 2**62
    fa = _floor_big(sql, a, wide)
    neg1 = sql.big_lit(-1) if wide else sql.int_lit(-1)
    if q > 0:  # a = w / 2^q may underflow: w in (−2^q, 0) has ⌊w/2^q⌋ = −1 exactly
        fa = f"(CASE WHEN {w} < 0 AND {w} > -{two_q} THEN {neg1} ELSE {fa} END)"
    k = fa
    if e is not None:
        ea = _pow2_mul(sql, e, -q)
        fe = (
            f"(CASE WHEN {e} < 0 AND {e} > -{two_q} THEN {neg1} "
            f"ELSE {_floor_big(sql, ea, wide)} END)"
        )
        if q > 0:
            integral = (
                f"(CASE WHEN abs({w}) < {two_q} THEN {w} = 0 "
                f"WHEN abs({a}) >= {sql.dbl(2.0**53)} THEN true ELSE {a} = floor({a}) END)"
            )
        else:
            integral = (
                f"(CASE WHEN abs({a}) >= {sql.dbl(2.0**53)} THEN true ELSE {a} = floor({a}) END)"
            )
        k = f"({fa} + CASE WHEN {integral} THEN {fe} ELSE 0 END)"
    lit = sql.big_lit if wide else sql.int_lit
    num = f"({k} - {lit(g)})"
    key = num if b == 1 else sql.idiv(num, lit(b))
    return f"CASE WHEN {inside} THEN CAST({key} AS BIGINT) END"


def range_key_sql(sql: Dialect, bins: RangeBins, channels: dict[str, str], col: Column) -> str:
    """The key (BIGINT, NULL outside the range) of a record read as ``channels``.

    ``channels`` maps ``"int"``, ``"dbl"`` and ``"dec"`` (unscaled decimal integers) to SQL
    expressions (NULL when the record has no value of that kind).  Raises ``ValueError`` when
    a DECIMAL column's scale makes exact binning overflow 38 digits.
    """
    parts = []
    if "int" in channels:
        parts.append(_int_key(sql, channels["int"], bins, col.lo, col.hi))
    if "dec" in channels:
        lim = 10**col.precision - 1
        key = _int_key(sql, channels["dec"], bins.scaled(col.scale), -lim, lim)
        if key is None:
            raise ValueError(
                f"a range domain cannot bin a DECIMAL column of scale {col.scale} exactly with "
                f"start={_show(bins.start)}, step={_show(bins.step)} (the arithmetic needs more "
                "than 38 digits): cast the column to DOUBLE or use a coarser step"
            )
        parts.append(key)
    if "dbl" in channels:
        parts.append(_double_key(sql, channels["dbl"], bins))
    if any(p is None for p in parts):  # pragma: no cover - |start|, |stop| <= 1e36
        raise ValueError("internal error: the range is too wide for exact integer binning")
    if not parts:
        return "CAST(NULL AS BIGINT)"
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]
    return f"coalesce({', '.join(parts)})"  # type: ignore[arg-type]


# ------------------------------------------------------------------------ values keys


def value_tables(values: tuple[Any, ...], scale: int | None = None) -> dict[str, list[Any]]:
    """The lookup tables of a ``values`` domain, as ``{channel: [(value, index), …]}``.

    String keys: ``"str"``.  Numeric keys: ``"int"`` (the integral keys below 10^38 in
    magnitude, as ints), ``"dbl"`` (the keys that are exactly a double, as floats) and, when
    ``scale`` is given, ``"dec"`` (the keys with at most ``scale`` decimals, as the unscaled
    integers ``k·10^scale`` below 10^38 in magnitude — how decimal records are read).  Keys
    are distinct numbers, so each table has distinct values.
    """
    if any(isinstance(v, str) for v in values):
        return {"str": [(str(v), i) for i, v in enumerate(values)]}
    ints, dbls, decs = [], [], []
    for i, v in enumerate(values):
        q = Fraction(v)
        if q.denominator == 1 and abs(q) < INT_LIMIT:
            ints.append((int(q), i))
        if abs(q) <= _DBL_MAX and Fraction(float(q)) == q:
            dbls.append((float(q) + 0.0, i))
        if scale is not None:
            m = q * 10**scale
            if m.denominator == 1 and abs(m) < INT_LIMIT:
                decs.append((int(m), i))
    out: dict[str, list[Any]] = {"int": ints, "dbl": dbls}
    if scale is not None:
        out["dec"] = decs
    return out


def key_array(keys: list[Any]) -> Any:
    """The keys (labels) as one Arrow column that holds each exactly.

    Strings → ``string`` (nulls among them too: the regions' names, ``name_property``);
    integers → ``int64``, else ``uint64``, else ``decimal128(38, 0)``,
    else their decimal text; numbers mixing integers and floats → ``float64`` when every
    integer is exactly a double, else the text of each (``repr`` of a float, the digits of an
    integer).  (``pyarrow.array`` alone raises for integers beyond int64 and for integers a
    double cannot hold next to floats.)
    """
    import pyarrow as pa

    if all(isinstance(k, str) or k is None for k in keys):
        return pa.array(keys, pa.string())
    if any(isinstance(k, str) for k in keys):  # numbers and the "other" key: text of each
        return pa.array(
            [
                k
                if isinstance(k, str) or k is None
                else str(int(k))
                if isinstance(k, numbers.Integral)
                else repr(float(k))
                for k in keys
            ],
            pa.string(),
        )
    ints = [int(k) for k in keys if isinstance(k, numbers.Integral)]
    if len(ints) == len(keys):
        lo, hi = min(ints, default=0), max(ints, default=0)
        if -(2**63) <= lo and hi < 2**63:
            return pa.array(ints, pa.int64())
        if lo >= 0 and hi < 2**64:
            return pa.array(ints, pa.uint64())
        if max(-lo, hi) < INT_LIMIT:
            from decimal import Decimal

            return pa.array([Decimal(k) for k in ints], pa.decimal128(38, 0))
        return pa.array([str(k) for k in ints], pa.string())
    if all(abs(k) <= _DBL_MAX and Fraction(float(k)) == Fraction(k) for k in ints):
        return pa.array([float(k) for k in keys], pa.float64())
    return pa.array(
        [str(int(k)) if isinstance(k, numbers.Integral) else repr(float(k)) for k in keys],
        pa.string(),
    )
