r"""Keys not known in advance: the ``discovered`` domain (issue #30).

``[domain] kind = "discovered"`` with ``column = "…"``: the keys are the values of
``column`` that occur in the data, and only those a private selection lets through are
released (:mod:`dpgauss.release.selection`, Gaussian thresholding of
:mod:`dpgauss.privacy.partition_selection`).  What this module owns:

* **The spec's rules** (:func:`check_spec`, called by
  :class:`~dpgauss.release.spec.ReleaseSpec`, so refused before any record is read or any
  budget charged): the column's type is *declared* in ``[source] types`` — ``string``, an
  integer type (``int8`` … ``uint64``) or ``timestamp`` — never inferred from the records;
  ``[bounds] max_keys_per_unit`` (Δ₀, the number of keys one unit can create) is required;
  ``max_records_per_key`` (Δ∞) is optional (else ``max_records_per_unit`` bounds a key's
  count); the statistic is a count; ``[privacy] epsilon`` (not ``sigma``); no denoiser
  (``method = "none"``, or the default ``"auto"``, which has nothing to choose from: the
  keys have no public structure).
* **The key of a record**: its value of ``column`` in the declared type, exactly (text as
  it is, integers exactly, timestamps to the microsecond); NULL is ``invalid_domain``; no
  value is ``outside_domain``; a timestamp outside years 1 … 9999 (which no key label can
  write) is ``invalid_domain``, alone.  Bounding is the engines'
  (:mod:`dpgauss.release.engines.base`, c → k → b with the same content-keyed priorities),
  the key priority ``H(salt, 'keys', unit, value)`` hashing the key's *value*, so which
  keys a unit keeps depends on its own records and the salt only.
* **The aggregate's keys** (:func:`collect_discovered`): every key with at least one kept
  record, in a fixed order that depends on no record — sorted by value (text by code point,
  which is UTF-8 byte order; integers as numbers; timestamps in time) — and written as
  text, an integer, or ``YYYY-MM-DD HH:MM:SS[.ffffff]``.  A key none of whose records is
  kept is no candidate: a unit can then create at most Δ₀ candidates, which the selection's
  proof needs.  The number of candidates is confidential (the diagnostics only).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..schema import INTEGERS

if TYPE_CHECKING:
    from ..engines.base import Aggregate, AggregationPlan
    from ..spec import ReleaseSpec

__all__ = [
    "DISCOVERED_TYPES",
    "KIND",
    "OTHER_KEY",
    "check_spec",
    "collect_discovered",
    "key_label",
    "sorted_keys",
]

KIND = "discovered"
#: The declared types a discovered key column may have.
DISCOVERED_TYPES = (*INTEGERS, "string", "timestamp")
#: The key of the ``[domain] other = true`` bucket (records outside a public domain).
OTHER_KEY = "__other__"


def check_spec(spec: ReleaseSpec) -> None:
    """The rules of a discovered domain (module docstring); ``ValueError`` naming the key."""
    d = spec.domain
    if d.kind != KIND:
        return
    col = str(d.column)
    types = spec.source.types
    if types is None or col not in types:
        raise ValueError(
            f"[domain] kind = 'discovered' needs the type of column {col!r} declared in "
            f"[source] types (one of string, int8 … uint64, timestamp), e.g. types = {{ "
            f'{col} = "string", … }}: the keys are read in the declared type, never in one '
            "inferred from the records"
        )
    if types[col] not in DISCOVERED_TYPES:
        raise ValueError(
            f"[domain] kind = 'discovered': column {col!r} is declared {types[col]!r}; a "
            "discovered key is text (string), an integer (int8 … uint64) or a timestamp "
            "(timestamp)"
        )
    b = spec.bounds
    if b.max_keys_per_unit is None:
        raise ValueError(
            "[bounds] max_keys_per_unit is required with [domain] kind = 'discovered': it is "
            "Δ₀, the number of keys one unit can create, which the selection's threshold "
            "and its delta depend on"
        )
    if spec.statistic.kind != "count":
        raise ValueError(
            f"[statistic] kind = {spec.statistic.kind!r}: a discovered domain releases counts "
            "only (the noisy count of a key both selects it and is its released value)"
        )
    if spec.privacy.epsilon is None:
        raise ValueError(
            "[privacy] a discovered domain needs epsilon and delta (not sigma): the delta is "
            "split between the selection and the counts"
        )
    if spec.denoise.method not in ("none", "auto"):
        raise ValueError(
            f"[denoise] method = {spec.denoise.method!r} does not apply to a discovered "
            "domain: its keys have no public structure and are released as the noisy counts "
            "that passed the threshold (use method = 'none')"
        )
    if spec.series is not None and spec.series.history:
        raise ValueError(
            "[series] history does not apply to a discovered domain: the earlier periods' "
            "keys are other keys, and there is no denoiser to run on them"
        )
    if spec.denoise.params:
        raise ValueError("[denoise] params does not apply to a discovered domain (no denoiser)")
    if spec.denoise.nonnegative:
        raise ValueError(
            "[denoise] nonnegative = true does not apply to a discovered domain (no denoiser; "
            "every released count is above the threshold)"
        )


def key_label(value: Any) -> Any:
    """A key as it is written: text, an int, or a timestamp's ``YYYY-MM-DD HH:MM:SS[.f]``."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, bool):  # never: booleans are not a discovered type
        raise TypeError("a discovered key is never a boolean")
    if isinstance(value, int | np.integer):
        return int(value)
    return value


def sorted_keys(values: list[Any]) -> list[Any]:
    """The keys in their fixed order: sorted by value (module docstring), as written."""
    return [key_label(v) for v in sorted(values)]


def collect_discovered(plan: AggregationPlan, rows: list[tuple[Any, ...]]) -> Aggregate:
    """The :class:`~dpgauss.release.engines.base.Aggregate` of a discovered domain from an
    engine's rows ``(g, value, n, units, n_c, n_k)``: ``g`` = 0 for the kept records of the
    key ``value``, :data:`~dpgauss.release.engines.base.DROPPED` for in-domain records the
    bounds removed, minus the row class otherwise (``value`` then None).  The candidates are
    the keys with kept records, sorted (:func:`sorted_keys`); ``labels`` holds them."""
    from ..engines.base import AggregationPlan, EngineError, collect  # engines import this

    kept = {}
    for g, value, n, *_ in rows:
        if int(g) >= 0:
            if value is None or value in kept:  # unreachable: NULL is invalid, groups unique
                raise EngineError("internal error: a discovered key is NULL or repeated")
            kept[value] = int(n)
    order = sorted(kept)
    index = {v: i for i, v in enumerate(order)}
    groups = [
        (index[value] if int(g) >= 0 else int(g), n, units, nc, nk, None)
        for g, value, n, units, nc, nk in rows
    ]
    labels = _typed_labels(sorted_keys(order), plan.spec)
    domain = replace(plan.domain, size=len(order), labels=labels)
    sized = AggregationPlan(plan.spec, domain, plan.salt, plan.value_offset)
    agg = collect(sized, groups)
    agg.rows.candidate_keys = len(order)
    return replace(agg, labels=labels)


def _typed_labels(keys: list[Any], spec: ReleaseSpec) -> np.ndarray:
    """The keys as an array of the *declared* type's family — ``int64`` for int8 … int64,
    ``uint64`` for uint8 … uint64, text (object) for strings and timestamps — so that the
    table's key column has one type whatever keys the selection lets through (review
    finding 3: an object array of ints was typed by the writer from the keys released:
    string when none passed, uint64 only when one above 2⁶³ did)."""
    declared = (spec.source.types or {}).get(str(spec.domain.column), "string")
    if declared in INTEGERS:
        return np.array(keys, dtype=np.uint64 if declared.startswith("u") else np.int64)
    labels = np.empty(len(keys), dtype=object)
    labels[:] = keys
    return labels
