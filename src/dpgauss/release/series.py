r"""Series: one release per period of a timestamp column, bounded within the period.

A spec with a ``[series]`` table (``column``, ``period``, ``origin``) describes every period

.. math::  P_k = [\,o + k·p,\; o + (k+1)·p\,), \qquad k ∈ ℤ,

of the column, and one release publishes one of them: :func:`period_spec` turns the spec
and a period's start into the spec of that release, whose ``[filter]`` is the window
``P_k`` (intersected with the spec's own ``[filter]`` on the same column).  Everything else
is the ordinary release path, so:

* **each unit is bounded within the period.**  A record outside ``P_k`` is
  ``outside_filter`` and takes no further part; the contribution bounds apply to the
  records a unit has in ``P_k`` only.  The window is public (the spec and the period the
  publisher names), so it changes neither the sensitivity nor the totality of the release:
  a record can only fall in or out of the window of its own unit's contribution.
* **the budget.**  ``[unit] scope = "all"`` protects a unit over every period: the periods'
  releases are charged to the dataset like any release, and compose in μ-GDP as
  ``√(Σ_k μ_k²)`` (the ledger's rule).  ``scope = "period"`` protects a unit within one
  period — a unit-period is the privacy unit.  The periods hold disjoint records, so a
  unit-period's records enter only the releases of its own period (and the dataset's
  releases that are not a period's), and the guarantee of every release so far is the
  parallel composition

  .. math::  μ^2 = \sum_{c \text{ not a period's}} μ_c^2 + \max_k \sum_{c ∈ P_k} μ_c^2

  (:mod:`dpgauss.release.ledger`, ``docs/ledger.md``): a budget of scope ``"period"``
  holds for each period.  The ledger's budget says which scope, and which periods, it is
  for; a series spec must agree with it.

A period is named by its start (``"2013-01-13T09:00:00"``), which must be on the grid:
``(start − o) mod p = 0``.  The output of a period's release is the spec's path with the
period inserted before the suffix (:func:`period_path`), unless the path holds
``{period}``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

from .spec import FilterSpec, ReleaseSpec, SeriesSpec

__all__ = ["Period", "parse_period", "period_path", "period_spec"]

_EPOCH = datetime(1970, 1, 1)


@dataclasses.dataclass(frozen=True)
class Period:
    """One period ``[start, stop)`` of a series: its index ``k`` on the grid and its ends
    as ISO text (``"2013-01-13 09:00:00"``)."""

    index: int
    start: str
    stop: str

    @property
    def name(self) -> str:
        """The period in file names: ``2013-01-13T09-00-00`` (no ``:``)."""
        return self.start.replace(" ", "T").replace(":", "-")

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return {"index": self.index, "start": self.start, "stop": self.stop}


def _us(t: datetime) -> int:
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 10**6 + d.microseconds


def _at(us: int) -> str:
    return (_EPOCH + timedelta(microseconds=us)).isoformat(sep=" ")


def parse_period(series: SeriesSpec, start: object) -> Period:
    """The period of ``series`` that starts at ``start`` (a ``datetime`` or ISO text).

    Raises ``ValueError`` naming the grid when ``start`` is not a period's start, or has a
    time zone (the column's timestamps are naive, like ``[filter]``'s).
    """
    if not isinstance(series, SeriesSpec):
        raise TypeError(f"series must be a SeriesSpec; got {type(series).__name__}")
    if isinstance(start, str):
        try:
            t = datetime.fromisoformat(start.strip())
        except ValueError:
            raise ValueError(
                f"period must be a timestamp ('2013-01-13T09:00:00'); got {start!r}"
            ) from None
    elif isinstance(start, datetime):
        t = start
    else:
        raise TypeError(
            f"period must be a timestamp (ISO text or datetime); got {type(start).__name__}"
        )
    if t.tzinfo is not None:
        raise ValueError(f"period must be a timestamp without a time zone; got {start!r}")
    p, o = series.period_us, series.origin_us
    k, rest = divmod(_us(t) - o, p)
    if rest:
        raise ValueError(
            f"period {t.isoformat(sep=' ')!r} is not the start of a {series.period} period "
            f"(periods start at {series.origin} + k·{series.period}; the nearest are "
            f"{_at(o + k * p)!r} and {_at(o + (k + 1) * p)!r})"
        )
    try:
        return Period(k, _at(o + k * p), _at(o + (k + 1) * p))
    except OverflowError:
        raise ValueError(f"period {start!r} ends after the year 9999") from None


def period_spec(spec: ReleaseSpec, period: Period) -> ReleaseSpec:
    """The spec of the release of ``period``: ``spec`` with ``[filter]`` the period's window
    (intersected with the spec's own filter on the series column).  Raises ``ValueError``
    when the two windows do not meet."""
    series = spec.series
    if series is None:
        raise ValueError("a period names one release of a series: the spec has no [series]")
    start, stop = period.start, period.stop
    f = spec.filter
    if f is not None:  # on the series column (checked by the spec)
        lo, hi = f.bound("start"), f.bound("stop")  # datetimes: the spec checked the kind
        if isinstance(lo, datetime) and lo > datetime.fromisoformat(start):
            start = lo.isoformat(sep=" ")
        if isinstance(hi, datetime) and hi < datetime.fromisoformat(stop):
            stop = hi.isoformat(sep=" ")
        if not datetime.fromisoformat(stop) > datetime.fromisoformat(start):
            raise ValueError(
                f"period {period.start!r} lies outside the [filter] window "
                f"[{f.start}, {f.stop}) of {f.column!r}: nothing of it would be released"
            )
    window = FilterSpec(column=series.column, start=start, stop=stop)
    return dataclasses.replace(spec, filter=window)


def period_path(path: Path, period: Period) -> Path:
    """Where a period's table goes: ``{period}`` in the file name replaced by the period,
    else the period before the suffix (``out.csv`` → ``out.2013-01-13T09-00-00.csv``)."""
    name = path.name
    if "{period}" in name:
        return path.with_name(name.replace("{period}", period.name))
    if path.suffix:
        return path.with_name(f"{path.stem}.{period.name}{path.suffix}")
    return path.with_name(f"{name}.{period.name}")
