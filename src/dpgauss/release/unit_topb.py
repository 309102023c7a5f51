"""Per-unit top-b selection without a sort: a hash-partitioned kernel, compiled with numba.

The bounding query of :mod:`dpgauss.release.engine_duckdb` keeps, for every privacy unit, the
``b`` records of smallest priority, by one global sort on (unit, priority) and a streaming
``lag``.  For the commonest release (a ``count`` whose only bound is
``max_records_per_unit``, over an integer unit column) this module makes the *same*
selection in 0.5–0.7× the CPU time (2 M and 20 M rows), without sorting the rows.
DuckDB still reads, classifies, keys and hashes every record (one statement of the
semantics); it hands over, row by row, the unit ``u`` (its 64-bit pattern), the
key-in-priority ``pk = (p >> kb) << kb | key`` of an in-domain row (the general path's own
sort key) and the row's class ``c`` (0 in the domain, else the class code of
:mod:`dpgauss.release.engine_duckdb`).  Then:

1. **Partition** the in-domain rows by the top ``bits`` bits of a mixed hash of ``u``
   (counting sort: a histogram per chunk of rows, prefix sums, a scatter; chunks in
   parallel, each into its own disjoint ranges).  A unit's rows all land in one bucket, so
   buckets are independent; ``bits`` (at most 12) makes a bucket about 4,096 rows on
   average up to 16 M rows (larger beyond), small enough for what follows to stay in cache.
2. **Select** in each bucket (buckets in parallel): an open-addressing table gives each
   unit a slot; the bucket's rows are counted and scattered by slot; a slot with at most
   ``b`` rows keeps them all, a larger one is sorted and keeps its first ``b``.  The key of a
   kept row is ``pk``'s low ``kb`` bits.

**Same records as the general path.**  The general path keeps, per unit, the ``b`` rows
first in the order of ``pk`` (rows of equal ``pk`` are interchangeable there: equal ``pk``
means equal key); step 2 keeps the ``b`` smallest ``pk`` of the unit's rows, a multiset of
keys that does not depend on how equal ``pk`` are ordered, nor on the order rows arrive in,
nor on the partition (a function of ``u`` only).  So the counts equal the general path's
bit for bit, for every source (``tests/release/test_unit_topb.py``; the neighbouring-dataset
fuzzer runs this path as ``duckdb-kernel``).  Nothing here looks at other units: a unit's
kept rows are a function of its own records and the salt, whatever the other units hold —
other units only share its bucket, which changes where its rows are stored, not which are
kept.  The hash that places units in buckets is salted, so no id can be chosen to crowd a
bucket on purpose; a crowded bucket (one unit with millions of rows) is only slower.

Memory: the three columns (17 bytes a row) and their partitioned copy (16 bytes a row),
about 3.3 GB at 10⁸ rows (peak 3.8 GB measured, ``docs/benchmarks.md``), plus per-thread
scratch of the largest bucket; the kept keys overwrite the partitioned unit ids, so nothing
grows with the number of keys times threads.  None of it is under DuckDB's
``memory_limit``.  The first call in a new environment compiles the kernels (about 10 s;
cached on disk after that).  Calls are serialised by a lock (numba's ``workqueue`` layer
aborts on concurrent parallel regions), honour the caller's thread count, and a process
forked after its parent used the kernel does not use it (GNU OpenMP aborts in such a child):
:func:`available` is then False and the engine sorts instead, with the same result.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

__all__ = ["available", "select"]

try:  # numba is optional (the `fast` extra); without it the general query runs
    import numba as _numba
except ImportError:  # pragma: no cover - exercised in environments without numba
    _numba = None

#: Rows per bucket aimed at (a bucket's table and rows then fit in a core's cache).
BUCKET_ROWS = 4096
_MAX_BITS = 12
_CLASSES = 8  # class codes 0 … 7 (engine_duckdb: IN_DOMAIN = 0 … MALFORMED = 6)
_SORT_INLINE = 32  # segments up to this long are insertion-sorted in place
_EMPTY = 2**64 - 1  # a slot of the kept-keys array that holds no kept row
#: numba's parallel layers may not be entered from two threads at once (the ``workqueue``
#: layer aborts the process), and GNU OpenMP does not survive a fork: one call at a time,
#: and none in a child forked after the parent used the kernel.
_LOCK = threading.Lock()
_USED = False
_FORKED_AFTER_USE = False


def _after_fork_in_child() -> None:
    global _FORKED_AFTER_USE
    _FORKED_AFTER_USE = _FORKED_AFTER_USE or _USED


os.register_at_fork(after_in_child=_after_fork_in_child)


def available() -> bool:
    """Whether the compiled kernel can run: numba is installed, and this is not a process
    forked after its parent ran the kernel (GNU OpenMP aborts there; the sort serves it)."""
    return _numba is not None and not _FORKED_AFTER_USE


def _mix(x: Any, salt: Any) -> Any:
    """A 64-bit mixing of ``x`` keyed by ``salt`` (the SplitMix64 finaliser of ``x ^ salt``)."""
    x = x ^ salt
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _histogram(u: Any, c: Any, salt: Any, bits: int, chunks: int) -> tuple[Any, Any]:
    """Per chunk of rows: in-domain rows per bucket, and rows per class."""
    n = u.size
    hist = np.zeros((chunks, 1 << bits), np.int64)
    cls = np.zeros((chunks, _CLASSES), np.int64)
    shift = np.uint64(64 - bits)
    step = (n + chunks - 1) // chunks
    for j in _numba.prange(chunks):
        lo = j * step
        hi = min(n, lo + step)
        h = hist[j]
        inside = 0
        for i in range(lo, hi):
            k = c[i]
            if k == 0:
                h[_mix(u[i], salt) >> shift] += 1
                inside += 1
            else:  # rare: no store on the hot path
                cls[j, k] += 1
        cls[j, 0] = inside
    return hist, cls


def _scatter(u: Any, pk: Any, c: Any, salt: Any, bits: int, start: Any, ou: Any, op: Any) -> None:
    """Write the in-domain rows (u, pk) of one batch into ``ou``/``op``, grouped by bucket:
    ``start[j, b]`` is where the batch's chunk ``j`` writes its rows of bucket ``b``
    (ranges disjoint from every other chunk's)."""
    n = u.size
    chunks = start.shape[0]
    shift = np.uint64(64 - bits)
    step = (n + chunks - 1) // chunks
    for j in _numba.prange(chunks):
        pos = start[j].copy()
        lo = j * step
        hi = min(n, lo + step)
        for i in range(lo, hi):
            if c[i] == 0:
                x = u[i]
                b = _mix(x, salt) >> shift
                q = pos[b]
                pos[b] = q + 1
                ou[q] = x
                op[q] = pk[i]


def _select(ou: Any, op: Any, edges: Any, b: int, kbits: int, salt: Any, threads: int) -> int:
    """Per bucket ``[edges[i], edges[i+1])``: the keys of each unit's ``b`` smallest ``pk``,
    written over the bucket's own range of ``ou`` (its unit ids are not needed after its
    slots are made), the rest of the range set to :data:`_EMPTY`; returns the number of
    units.  Buckets own disjoint ranges, so threads never write to the same place."""
    nb = edges.size - 1
    units = np.zeros(threads, np.int64)
    kmask = np.uint64((1 << kbits) - 1)
    empty = np.uint64(_EMPTY)
    for t in _numba.prange(threads):
        big = 1
        for i in range(t, nb, threads):
            big = max(big, edges[i + 1] - edges[i])
        cap = 2
        while cap < 2 * big:
            cap *= 2
        keys = np.empty(cap, np.uint64)
        stamp = np.zeros(cap, np.int64)
        slot = np.empty(cap, np.int64)
        row_slot = np.empty(big, np.int64)
        size = np.empty(big, np.int64)
        fill = np.empty(big + 1, np.int64)
        buf = np.empty(big, np.uint64)
        epoch = 0
        for i in range(t, nb, threads):
            lo, hi = edges[i], edges[i + 1]
            n = hi - lo
            if n == 0:
                continue
            epoch += 1
            m = 2
            while m < 2 * n:
                m *= 2
            mask = np.uint64(m - 1)
            slots = 0
            for r in range(lo, hi):  # a slot per unit
                x = ou[r]
                h = _mix(x, ~salt) & mask
                while stamp[h] == epoch and keys[h] != x:
                    h = (h + np.uint64(1)) & mask
                if stamp[h] != epoch:
                    stamp[h] = epoch
                    keys[h] = x
                    slot[h] = slots
                    size[slots] = 0
                    slots += 1
                s = slot[h]
                row_slot[r - lo] = s
                size[s] += 1
            units[t] += slots
            fill[0] = 0
            for s in range(slots):  # the rows of each slot, together
                fill[s + 1] = fill[s] + size[s]
            for r in range(lo, hi):
                s = row_slot[r - lo]
                buf[fill[s]] = op[r]
                fill[s] += 1
            begin = 0
            out = lo
            for s in range(slots):
                k = size[s]
                if k > b:  # keep the b smallest pk: sort the segment
                    if k <= _SORT_INLINE:
                        for p in range(begin + 1, begin + k):
                            v = buf[p]
                            q = p
                            while q > begin and buf[q - 1] > v:
                                buf[q] = buf[q - 1]
                                q -= 1
                            buf[q] = v
                    else:
                        buf[begin : begin + k].sort()
                    k = b
                for p in range(begin, begin + k):
                    ou[out] = buf[p] & kmask
                    out += 1
                begin += size[s]
            for r in range(out, hi):
                ou[r] = empty
    return units.sum()


def _tally(kept: Any, d: int) -> tuple[Any, int]:
    """Rows per key of ``kept`` (:data:`_EMPTY` skipped); the number of entries ≥ ``d``
    (none: keys are below ``d`` by construction; checked, never trusted, since nothing here
    is bounds-checked)."""
    counts = np.zeros(d, np.int64)
    empty = np.uint64(_EMPTY)
    bad = 0
    for r in range(kept.size):
        x = kept[r]
        if x != empty:
            if x < d:
                counts[x] += 1
            else:
                bad += 1
    return counts, bad


if _numba is not None:  # compiled on first use, cached on disk
    _mix = _numba.njit(cache=True, inline="always")(_mix)
    _histogram = _numba.njit(cache=True, parallel=True, nogil=True)(_histogram)
    _scatter = _numba.njit(cache=True, parallel=True, nogil=True)(_scatter)
    _select = _numba.njit(cache=True, parallel=True, nogil=True)(_select)
    _tally = _numba.njit(cache=True, nogil=True)(_tally)


def select(
    batches: Any, b: int, key_bits: int, d: int, salt: int, threads: int = 0
) -> tuple[np.ndarray, int, np.ndarray]:
    """Counts per key of the rows each unit keeps (its ``b`` smallest ``pk``).

    Parameters
    ----------
    batches
        An iterable of Arrow record batches with three non-null columns in this order:
        the unit (any 64-bit integer type; its bit pattern identifies the unit), ``pk``
        (``UBIGINT``; the key in its low ``key_bits`` bits) and the class (``UTINYINT``,
        0 for an in-domain row).
    b : int ≥ 1, records kept per unit
    key_bits : int, the bits of ``pk`` that hold the key
    d : int ≥ 1, the number of keys (every key is below ``d``)
    salt : int, keys the hash that places units in buckets
    threads : int, parallel tasks (0: numba's thread count)

    Returns
    -------
    (counts, units, classes)
        ``counts[k]`` the kept rows of key ``k``, ``units`` the number of distinct units
        with an in-domain row, ``classes[c]`` the rows of class ``c`` (``classes[0]`` the
        in-domain rows, kept or not).
    """
    global _USED
    if _numba is None:
        raise RuntimeError("dpgauss: the per-unit top-b kernel needs numba (pip install numba)")
    columns = []
    for batch in batches:  # zero-copy views of DuckDB's Arrow batches (no NULLs)
        if batch.num_rows:
            if any(batch.column(i).null_count for i in range(3)):  # the query never does
                raise RuntimeError("dpgauss: internal error: a NULL reached the unit kernel")
            u = batch.column(0).to_numpy().view(np.uint64)
            columns.append((u, batch.column(1).to_numpy(), batch.column(2).to_numpy()))
    with _LOCK:
        _USED = True
        previous = _numba.get_num_threads()
        threads = min(int(threads), previous) if threads else previous
        _numba.set_num_threads(threads)  # this thread's parallel regions only
        try:
            return _select_locked(columns, b, key_bits, d, salt, threads)
        finally:
            _numba.set_num_threads(previous)


def _select_locked(
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    b: int,
    key_bits: int,
    d: int,
    salt: int,
    threads: int,
) -> tuple[np.ndarray, int, np.ndarray]:
    """:func:`select` on the batches' columns, under the lock and the thread count."""
    n = sum(u.size for u, _, _ in columns)
    # at least one bit: a shift by 64 is undefined in LLVM
    bits = min(_MAX_BITS, max(1, int(np.ceil(np.log2(max(1.0, n / BUCKET_ROWS))))))
    key = np.uint64(salt & (2**64 - 1))
    hists, classes = [], np.zeros(_CLASSES, np.int64)
    for u, _, c in columns:
        hist, cls = _histogram(u, c, key, bits, max(1, min(threads, u.size // 65536)))
        hists.append(hist)
        classes += cls.sum(axis=0)
    # where chunk j of batch i writes bucket k: after every row of the buckets below k, and
    # of bucket k in the chunks before (i, j): prefix sums in bucket-major order
    every = np.concatenate(hists) if hists else np.zeros((0, 1 << bits), np.int64)
    starts = np.cumsum(every.T.ravel()) - every.T.ravel()
    starts = starts.reshape(every.T.shape).T
    per_bucket = every.sum(axis=0)
    m = int(per_bucket.sum())
    ou, op = np.empty(m, np.uint64), np.empty(m, np.uint64)
    row = 0
    for (u, pk, c), hist in zip(columns, hists, strict=True):
        _scatter(u, pk, c, key, bits, np.ascontiguousarray(starts[row : row + len(hist)]), ou, op)
        row += len(hist)
    columns.clear()
    edges = np.concatenate(([0], np.cumsum(per_bucket))).astype(np.int64)
    units = int(_select(ou, op, edges, int(b), int(key_bits), key, threads))
    del op
    counts, bad = _tally(ou, int(d))
    if bad:
        raise RuntimeError("dpgauss: internal error: a key outside the domain reached the kernel")
    return counts, units, classes
