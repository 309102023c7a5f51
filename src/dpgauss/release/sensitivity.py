r"""The L2 sensitivity of a bounded release, derived from the bounds that are enforced.

Neighbouring datasets differ by *all* the records of one privacy unit (add or remove one unit).
After bounding, the unit's contribution to the released vector is a vector ``x`` over the
``d`` keys of the domain, and the L2 sensitivity is the largest ``‖x‖₂`` any unit can reach.
Bounding (:mod:`dpgauss.release.engines.duckdb`) keeps, for each unit, a subset of its records
that depends on that unit's records only, so this is exactly the sensitivity of the bounded
aggregate.

Records, keys, and the count vector
-----------------------------------
The bounds (any of them may be absent): ``b`` records per unit in total, ``k`` keys per unit
(L0), ``c`` records per key (L∞).  A key can never hold more than ``b`` records and a unit never
has more than ``d`` keys, so let ``B = b`` (or ∞), ``C = min(c, B)``, ``K = min(k, d)``.

*One record, one key* (domains ``values`` and ``range``, graph mapping ``nearest``).  The
unit's count vector ``n`` is a non-negative integer vector with ``Σ nᵢ ≤ B``, ``nᵢ ≤ C`` and at
most ``K`` non-zero entries.  ``‖n‖₂²`` is convex, so its maximum over this set is attained by
the most concentrated vector: ``q = ⌊B/C⌋`` keys at ``C`` and one at the remainder
``r = B − qC`` (if ``q < K``), else ``K`` keys at ``C``:

.. math::  Δ_n = \sqrt{q C^2 + r^2} \quad (q < K), \qquad Δ_n = C\sqrt{K} \quad (q \ge K).

It is attained (a unit with exactly those records), so it is the tightest valid bound; it is
never above ``b`` (take ``C = B``) nor above ``c√k``, the two textbook bounds, and is strictly
below both in between (``b = 5, c = 2, k = 3``: 3 where ``min(b, c√k) = 3.46``).  Examples:
``b`` alone gives ``b`` (the paper's taxi setup: Δ₂ = 5 for 5 trips per driver); ``k`` and
``c`` give ``c√k``.

*Spread mapping* (graph mapping ``kde``: each record's unit mass is spread over several nodes,
non-negative weights summing to 1).  A unit with ``R`` kept records has a non-negative
contribution with ``‖x‖₁ = R``, so ``‖x‖₂ ≤ ‖x‖₁ = R``, attained when all the mass falls on one
node.  ``R ≤ b``, and with per-key bounds (applied to each record's *nearest* node)
``R ≤ c·k``: the spread masses of records at different nearest nodes overlap, so the ``c√k``
argument does not apply.  Hence ``Δ_n = min(B, C·K)``.

Statistics
----------
* ``count``: Δ₂ = Δ_n.
* ``sum`` of values clamped to ``[lower, upper]``: each record adds a value of magnitude at
  most ``M = max(|lower|, |upper|)`` to its key(s), so ``|xᵢ| ≤ M·nᵢ`` and
  Δ₂ = ``M · Δ_n`` (attained when all values equal ±M).
* ``mean``: released as a noisy sum over a noisy count, both computed from the same kept
  records.  The sum is *centred*: ``S' = Σ (v − m)``, ``m = (lower + upper)/2``, whose
  per-record magnitude is ``(upper − lower)/2`` — at most ``M``, and half of it for the usual
  ``lower = 0`` — so Δ_S = ``(upper − lower)/2 · Δ_n``, Δ_C = ``Δ_n``, and the mean is
  ``m + S'/C``.  The pair is released with one Gaussian mechanism on the normalised vector
  ``(S'/Δ_S, C/Δ_C)``, whose L2 sensitivity is exactly ``√2`` (both parts reach their
  bound on the same unit); the noise on the sum is ``σ·Δ_S`` and on the count ``σ·Δ_C``.
  This is the even split of the μ-GDP budget between the two parts.  (A public count, the
  alternative, is not available in general.)

The keys a unit changes, and integer counts
-------------------------------------------
Beside Δ, the secure noise uses how many keys one unit can change (``changed``): the other
keys have equal values on both neighbours, and equal noise laws, so they add nothing to the
divergence (:mod:`dpgauss.noise.lattice`).  One record adds to one key, so a unit changes
at most ``min(d, k, b)`` keys (those given); a spread (kde) record reaches at most its
``neighbors`` nearest nodes, and a unit keeps at most ``R = min(b, c·k)`` records, so it
changes at most ``min(d, R·neighbors)`` nodes.  A mean's pair changes the sum and the
count of the same keys (twice that many of its ``2d`` coordinates).  A ``count`` over
one-record-one-key mappings is integer-valued (``integer``): it is released with exact
discrete Gaussian noise calibrated at Δ itself, without rounding
(:func:`dpgauss.noise.lattice.integer_lattice_law`); a kde count is not (spread masses
are fractions).

Coarser levels (zoom levels)
----------------------------
A zoom-level release also publishes coarser vectors ``m = A n`` (``[[levels]]``,
:mod:`dpgauss.release.levels_plan`): a parent's value is the sum of its fine keys', so a
unit changes parent ``p`` by ``m_p = Σ_{i ∈ p} n_i``.  Its sensitivity is *not* the fine
one — summing concentrates a unit's records: a unit with 5 trips at 5 junctions of one
neighbourhood moves the fine vector by ``√5`` but the neighbourhood by 5.  Bounds, with
``L₁ = min(B, C·K)`` the largest ``‖n‖₁`` the bounds allow and ``s`` the largest number of
fine keys under one parent of the level (public structure):

* each parent gets at most ``M = min(L₁, C·min(K, s))`` (at most ``min(K, s)`` of its keys
  are non-zero, each ``≤ C``, and all together ``≤ L₁``), and ``Σ_p m_p = ‖n‖₁ ≤ L₁``;
* ``‖m‖₂²`` is convex, so over ``{0 ≤ m_p ≤ M, Σ m_p ≤ L₁}`` (integers) it is largest at
  the most concentrated point, ``q = ⌊L₁/M⌋`` parents at ``M`` and one at ``r = L₁ − qM``:

.. math::  Δ_m = \sqrt{q M^2 + r^2} \le L₁ .

It is attained when ``q + 1`` parents have ``s`` children each (the keys it uses,
``⌈L₁/C⌉``, are at most ``K``), e.g. always for a ``total`` level (one parent holding every
key: ``Δ = L₁``, the L1 bound) and for parents larger than ``K``: then ``Δ = L₁ = b`` for
``b`` records per unit, ``k·c`` for ``k`` keys of ``c`` records.  Otherwise it is an upper
bound (``tests/release/test_levels_sensitivity.py`` checks both against brute force over
every contribution of small trees).  For a spread (kde) mapping a record's mass may fall
under several parents whatever its nearest node, so the per-parent cap does not hold:
``Δ_m = ‖m‖₁ bound = min(B, C·K)``, as for the fine vector.  A ``sum`` multiplies by
``max(|lower|, |upper|)`` as above.  The coarse true values are the exact sums of the
fine bounded aggregate (no second pass over the records), so these bounds hold for what
is released.

Every value is rounded *up* to a double (never below the exact bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..privacy._rounding import mul_up, rational_up, sqrt_up

__all__ = ["Sensitivity", "changed_keys", "count_l2", "derive_sensitivity", "level_count_l2"]


def _check_bound(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 or None; got {value!r}")
    return value


def count_l2(
    *,
    max_records_per_unit: int | None = None,
    max_keys_per_unit: int | None = None,
    max_records_per_key: int | None = None,
    domain_size: int,
    spread: bool = False,
) -> tuple[float, tuple[tuple[str, float], ...]]:
    """The L2 sensitivity of the count vector (module docstring) and the bounds compared.

    Returns ``(Δ_n, candidates)``: the tightest bound, and ``(description, value)`` for the
    textbook bounds that apply (``b``; ``c·√k`` or, for a spread mapping, ``c·k``) and the
    exact maximum.  Raises ``ValueError`` if the bounds do not bound anything (neither ``b``
    nor ``c`` given).
    """
    b = _check_bound("max_records_per_unit", max_records_per_unit)
    k = _check_bound("max_keys_per_unit", max_keys_per_unit)
    c = _check_bound("max_records_per_key", max_records_per_key)
    if isinstance(domain_size, bool) or not isinstance(domain_size, int) or domain_size < 1:
        raise ValueError(f"domain_size must be an integer >= 1; got {domain_size!r}")
    if b is None and c is None:
        raise ValueError(
            "the bounds give no finite sensitivity: set max_records_per_unit, or "
            "max_records_per_key (with or without max_keys_per_unit)"
        )
    K = domain_size if k is None else min(k, domain_size)
    k_text = "k" if k is not None and k <= domain_size else "d"
    candidates: list[tuple[str, float]] = []
    if b is not None:
        candidates.append((f"b = {b} records per unit (L1 of the unit's records)", float(b)))
    if spread:
        if c is not None:
            value = float(c * K)
            candidates.append((f"c*{k_text} = {c}*{K} records (spread mass: L2 <= L1)", value))
        best = min(v for _, v in candidates)
        return best, tuple(candidates)
    if c is not None:
        candidates.append((f"c*sqrt({k_text}) = {c}*sqrt({K}) (L_inf and L0)", sqrt_up(c * c * K)))
    C = c if b is None else (b if c is None else min(c, b))
    assert C is not None  # b or c is given (checked above)
    if b is None:
        exact = C * C * K
    else:
        q, r = divmod(b, C)
        exact = C * C * K if q >= K else q * C * C + r * r
    value = sqrt_up(exact)
    if len(candidates) > 1 or (b is not None and value < b):
        candidates.append((f"exact maximum under all bounds = sqrt({exact})", value))
    return min(v for _, v in candidates), tuple(candidates)


@dataclass(frozen=True)
class Sensitivity:
    """The derived L2 sensitivity of a release.

    Attributes
    ----------
    statistic
        ``"count"``, ``"sum"`` or ``"mean"``.
    l2
        Δ₂ of the vector given to the Gaussian mechanism: the counts, the sums, or for a
        mean the normalised pair ``(S'/Δ_S, C/Δ_C)`` (then exactly √2).
    records_l2
        Δ_n, the bound on a unit's count vector.
    scale
        The per-record magnitude: 1 (count), ``max(|lower|, |upper|)`` (sum),
        ``(upper − lower)/2`` (the centred sum of a mean).
    parts
        The sensitivity of each released part in its own units: ``{"count": Δ}``,
        ``{"sum": Δ}`` or ``{"sum": Δ_S, "count": Δ_C}``.
    candidates
        The bounds compared for Δ_n (description, value).
    changed
        The most coordinates of the released vector one unit can change
        (:func:`changed_keys`; twice that for a mean's pair); None: all of them.
    integer
        Whether the released vector is integer-valued (a count over a one-record-one-key
        mapping), so that secure noise needs no rounding.
    """

    statistic: str
    l2: float
    records_l2: float
    scale: float
    parts: dict[str, float] = field(default_factory=dict)
    candidates: tuple[tuple[str, float], ...] = ()
    changed: int | None = None
    integer: bool = False

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "statistic": self.statistic,
            "l2": self.l2,
            "records_l2": self.records_l2,
            "scale": self.scale,
            "parts": dict(self.parts),
            "candidates": [{"bound": name, "value": v} for name, v in self.candidates],
            "changed": self.changed,
            "integer": self.integer,
        }

    def summary(self) -> str:
        """One line: the released sensitivity and where it comes from."""
        if self.statistic == "count":
            return f"L2 sensitivity {self.l2:.6g} (count vector, tightest of the bounds)"
        if self.statistic == "sum":
            return (
                f"L2 sensitivity {self.l2:.6g} = {self.scale:.6g} (max |clamp|) x "
                f"{self.records_l2:.6g} (count vector)"
            )
        return (
            f"L2 sensitivity sum {self.parts['sum']:.6g} = {self.scale:.6g} ((upper-lower)/2) x "
            f"{self.records_l2:.6g}, count {self.parts['count']:.6g}; released jointly "
            f"normalised: {self.l2:.6g}"
        )


def changed_keys(
    *,
    max_records_per_unit: int | None = None,
    max_keys_per_unit: int | None = None,
    max_records_per_key: int | None = None,
    domain_size: int,
    spread: bool = False,
    keys_per_record: int | None = None,
) -> int:
    """The most keys one unit can change (module docstring): ``min(d, k, b)`` of the bounds
    given; for a spread (kde) mapping, whose record reaches at most ``keys_per_record``
    nodes (its ``neighbors``; None: any), ``min(d, R·keys_per_record)`` with
    ``R = min(b, c·k)`` the records a unit keeps (``d`` if R is unbounded)."""
    b = _check_bound("max_records_per_unit", max_records_per_unit)
    k = _check_bound("max_keys_per_unit", max_keys_per_unit)
    c = _check_bound("max_records_per_key", max_records_per_key)
    per = _check_bound("keys_per_record", keys_per_record)
    if isinstance(domain_size, bool) or not isinstance(domain_size, int) or domain_size < 1:
        raise ValueError(f"domain_size must be an integer >= 1; got {domain_size!r}")
    if not spread:
        return min(x for x in (domain_size, k, b) if x is not None)
    records = [x for x in (b, None if c is None or k is None else c * k) if x is not None]
    if per is None or not records:
        return domain_size
    return min(domain_size, min(records) * per)


def derive_sensitivity(
    statistic: str,
    *,
    max_records_per_unit: int | None = None,
    max_keys_per_unit: int | None = None,
    max_records_per_key: int | None = None,
    domain_size: int,
    spread: bool = False,
    lower: float | None = None,
    upper: float | None = None,
    keys_per_record: int | None = None,
) -> Sensitivity:
    """The L2 sensitivity of a ``count``, ``sum`` or ``mean`` release (module docstring);
    ``keys_per_record`` (a kde mapping's ``neighbors``) bounds the keys it changes."""
    records, candidates = count_l2(
        max_records_per_unit=max_records_per_unit,
        max_keys_per_unit=max_keys_per_unit,
        max_records_per_key=max_records_per_key,
        domain_size=domain_size,
        spread=spread,
    )
    n = changed_keys(
        max_records_per_unit=max_records_per_unit,
        max_keys_per_unit=max_keys_per_unit,
        max_records_per_key=max_records_per_key,
        domain_size=domain_size,
        spread=spread,
        keys_per_record=keys_per_record,
    )
    if statistic == "count":
        return Sensitivity(
            "count", records, records, 1.0, {"count": records}, candidates, n, not spread
        )
    if statistic not in ("sum", "mean"):
        raise ValueError(f"statistic must be 'count', 'sum' or 'mean'; got {statistic!r}")
    if lower is None or upper is None:
        raise ValueError(f"a {statistic} needs the clamping bounds lower and upper")
    lo, hi = float(lower), float(upper)
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise ValueError(f"need finite lower < upper; got lower={lower!r}, upper={upper!r}")
    if statistic == "sum":
        scale = max(abs(lo), abs(hi))
        if scale == 0.0:
            raise ValueError("lower = upper = 0: the sum is always 0")
        l2 = mul_up(scale, records)
        return Sensitivity("sum", l2, records, scale, {"sum": l2}, candidates, n)
    # finite: |hi − lo|/2 is at most the largest double
    scale = rational_up((Fraction(hi) - Fraction(lo)) / 2)
    sum_l2 = mul_up(scale, records)
    return Sensitivity(
        "mean", sqrt_up(2), records, scale, {"sum": sum_l2, "count": records}, candidates, 2 * n
    )


def level_count_l2(
    *,
    max_records_per_unit: int | None = None,
    max_keys_per_unit: int | None = None,
    max_records_per_key: int | None = None,
    domain_size: int,
    max_children: int,
    spread: bool = False,
) -> float:
    """The L2 sensitivity of a coarser level's count vector ``m = A n`` (module docstring,
    *Coarser levels*): ``√(qM² + r²)`` with ``M = min(L₁, C·min(K, s))``, ``s =
    max_children`` the most fine keys under one parent; ``min(B, C·K)`` for a spread
    mapping.  Rounded up."""
    b = _check_bound("max_records_per_unit", max_records_per_unit)
    k = _check_bound("max_keys_per_unit", max_keys_per_unit)
    c = _check_bound("max_records_per_key", max_records_per_key)
    for name, v in (("domain_size", domain_size), ("max_children", max_children)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {v!r}")
    if b is None and c is None:
        raise ValueError(
            "the bounds give no finite sensitivity: set max_records_per_unit, or "
            "max_records_per_key (with or without max_keys_per_unit)"
        )
    K = domain_size if k is None else min(k, domain_size)
    C = c if b is None else (b if c is None else min(c, b))
    assert C is not None
    l1 = C * K if b is None else min(b, C * K)
    if spread:
        return float(l1) if l1 < 2**53 else sqrt_up(l1 * l1)
    cap = min(l1, C * min(K, max_children))
    q, r = divmod(l1, cap)
    return sqrt_up(q * cap * cap + r * r)
