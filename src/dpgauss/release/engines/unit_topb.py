"""Per-unit top-b selection without a sort: a hash-partitioned kernel, compiled with numba.

The bounding query of :mod:`dpgauss.release.engines.duckdb` keeps, for every privacy unit, the
``b`` records of smallest priority, by one global sort on (unit, priority) and a streaming
``lag``.  For the commonest release (a ``count`` whose only bound is
``max_records_per_unit``, over integer unit ids, or string ids read from files) this module
makes the *same* selection without sorting the rows, in 0.36–0.7× the sort's CPU time with
integer ids and 0.58× with 32-character string ids (2 M and 20 M rows,
``python benchmarks/bench_pipeline.py [--string-units]``).  DuckDB still reads, classifies,
keys and hashes every record (one statement of the semantics); it hands over, row by row,
the unit ``u`` (an integer id's 64-bit pattern, or the string id itself), the
key-in-priority ``pk = (p >> kb) << kb | key`` of an in-domain row (the general path's own
sort key) and the row's class ``c`` (0 in the domain, else the class code of
:mod:`dpgauss.release.engines.duckdb`).  Then:

0. **String ids** are hashed to 64 bits, keyed by the salt (:func:`_hash_ids`); the hash
   only places them, their bytes decide equality (step 2).
1. **Partition** the in-domain rows by the top ``bits`` bits of a mixed hash of ``u``
   (counting sort: a histogram per chunk of rows, prefix sums, a scatter; chunks in
   parallel, each into its own disjoint ranges).  A unit's rows all land in one bucket, so
   buckets are independent; ``bits`` (at most 12) makes a bucket about 4,096 rows on
   average up to 16 M rows (larger beyond), small enough for what follows to stay in cache.
   A string id is copied along with its row, as 64-bit words (its length, then its bytes
   zero-padded), so that a bucket's ids lie together.
2. **Select** in each bucket (buckets in parallel): an open-addressing table gives each
   unit a slot — for string ids a slot is a (hash, id) pair: a row joins a slot of equal
   hash only if its id's words equal those of the slot's first row, so ids whose hashes
   collide are never merged; the bucket's rows are counted and scattered by slot; a slot
   with at most ``b`` rows keeps them all, a larger one is sorted and keeps its first ``b``.
   The key of a kept row is ``pk``'s low ``kb`` bits.

**Same records as the general path.**  The general path keeps, per unit, the ``b`` rows
first in the order of ``pk`` (rows of equal ``pk`` are interchangeable there: equal ``pk``
means equal key); step 2 keeps the ``b`` smallest ``pk`` of the unit's rows, a multiset of
keys that does not depend on how equal ``pk`` are ordered, nor on the order rows arrive in,
nor on the partition (a function of ``u`` only).  Units are the same: equal integer ids,
or string ids of equal bytes (the sort compares ``VARCHAR`` by bytes when no collation is
set, which the engine checks before it uses the kernel).  So the counts equal the general
path's bit for bit, for every source (``tests/release/engines/test_unit_topb.py``; the
neighbouring-dataset fuzzer runs this path as ``duckdb-kernel``, CSV sources included).
Nothing here looks at other units: a unit's kept rows are a function of its own records
and the salt, whatever the other units hold — other units only share its bucket or its
hash, which changes where its rows are stored, not which are kept.  The hash that places
units in buckets is keyed by the secret salt (for string ids, each 8-byte word is folded
in by a mixing keyed by it), so crowding a bucket or a probe sequence on purpose needs
the salt — the mixing is not a cryptographic PRF, so this is a defence, not a proof; a
crowded bucket (one unit with millions of rows, or colliding ids) is only slower, never
wrong.

Memory: the three columns (17 bytes a row) and their partitioned copy (16 bytes a row),
about 3.3 GB at 10⁸ rows with integer ids (peak 3.8 GB measured, ``docs/benchmarks.md``);
string ids add the ids as DuckDB hands them over (their bytes and 4 of offset), their
hash (8) and, partitioned, 16 bytes and the id's bytes rounded up to whole words: about
125 bytes a row with 32-character ids, 12.5 GB at 10⁸ rows (estimated, not measured).
The batches are let go once all are partitioned; per-thread scratch
of the largest bucket; the kept keys overwrite the partitioned unit ids, so nothing grows
with the number of keys times threads.  None of it is under DuckDB's ``memory_limit``.
The first call in a new environment compiles the kernels (about 10–20 s; cached on disk
after that).  Calls are serialised by a lock (numba's ``workqueue`` layer aborts on
concurrent parallel regions), honour the caller's thread count, and a process forked after
its parent used the kernel does not use it (GNU OpenMP aborts in such a child):
:func:`available` is then False and the engine sorts instead, with the same result.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np

from ..._optional import install_hint, numba

__all__ = ["available", "select"]

_numba = numba()  # numba is optional (the `fast` extra)

#: Rows per bucket aimed at (a bucket's table and rows then fit in a core's cache).
BUCKET_ROWS = 4096
_MAX_BITS = 12
_CLASSES = 8  # class codes 0 … 7 (engines.base: IN_DOMAIN = 0 … MALFORMED = 6)
_SORT_INLINE = 32  # segments up to this long are insertion-sorted in place
_EMPTY = 2**64 - 1  # a slot of the kept-keys array that holds no kept row
#: numba's parallel layers may not be entered from two threads at once (the ``workqueue``
#: layer aborts the process), and GNU OpenMP does not survive a fork: one call at a time,
#: and none in a child forked after the parent used the kernel.
_LOCK = threading.Lock()
_USED = False
_FORKED_AFTER_USE = False


def _after_fork_in_child() -> None:
    # A child has one thread: a lock held at the fork by another thread of the parent
    # would never be let go there.  Its holder had run no parallel region if ``_USED`` was
    # still False (else the child does not use the kernel), so a new lock is safe.
    global _FORKED_AFTER_USE, _LOCK
    _FORKED_AFTER_USE = _FORKED_AFTER_USE or _USED
    _LOCK = threading.Lock()


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


def _histogram(u: Any, c: Any, off: Any, salt: Any, bits: int, chunks: int) -> tuple[Any, Any, Any]:
    """Per chunk of rows: in-domain rows per bucket, rows per class, and (string ids, ``off``
    their offsets, else empty) the words their in-domain rows take per bucket
    (:func:`_id_words`)."""
    n = u.size
    hist = np.zeros((chunks, 1 << bits), np.int64)
    strings = off.size > 0
    words = np.zeros((chunks, 1 << bits) if strings else (chunks, 0), np.int64)
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
                g = _mix(u[i], salt) >> shift
                h[g] += 1
                if strings:
                    words[j, g] += _id_words(off[i + 1] - off[i])
                inside += 1
            else:  # rare: no store on the hot path
                cls[j, k] += 1
        cls[j, 0] = inside
    return hist, cls, words


def _id_words(size: int) -> int:
    """The 64-bit words an id of ``size`` bytes takes once partitioned: its length, then its
    bytes, zero-padded to whole words (equal words ⇔ equal ids)."""
    return 1 + (size + 7) // 8


def _scatter(
    u: Any,
    pk: Any,
    c: Any,
    salt: Any,
    bits: int,
    start: Any,
    ou: Any,
    op: Any,
    off: Any,
    raw: Any,
    words: Any,
    word_start: Any,
    poff: Any,
    pids: Any,
) -> None:
    """Write the in-domain rows (u, pk) of one batch into ``ou``/``op``, grouped by bucket:
    ``start[j, b]`` is where the batch's chunk ``j`` writes its rows of bucket ``b``
    (ranges disjoint from every other chunk's).  With string ids (``off``/``raw`` their
    offsets and bytes, ``words`` the bytes as words, else empty) also the id as words
    (:func:`_id_words`), from ``word_start[j, b]`` on in ``pids``, and where they start in
    ``poff``: the words follow the rows' order, so row ``q``'s id is
    ``pids[poff[q]:poff[q + 1]]``."""
    n = u.size
    chunks = start.shape[0]
    shift = np.uint64(64 - bits)
    step = (n + chunks - 1) // chunks
    strings = off.size > 0
    for j in _numba.prange(chunks):
        pos = start[j].copy()
        at = word_start[j].copy() if strings else pos
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
                if strings:
                    w = at[b]
                    poff[q] = w
                    k, end = np.int64(off[i]), np.int64(off[i + 1])
                    pids[w] = np.uint64(end - k)
                    w += 1
                    while k < end:
                        pids[w] = _load_word(raw, words, k, end)
                        w += 1
                        k += 8
                    at[b] = w


def _load_word(raw: Any, words: Any, k: int | np.int64, end: int | np.int64) -> Any:
    """The bytes ``raw[k:min(k + 8, end)]`` as a little-endian 64-bit word, zero-padded.
    ``words`` is ``raw``'s whole words (``raw`` viewed as ``uint64``; empty on a big-endian
    machine): two aligned loads and shifts where they cover the bytes, else byte by byte."""
    base, shift = k >> 3, k & 7
    left = end - k
    if base + 1 < words.size:
        if shift == 0:
            w = words[base]
        else:
            s = np.uint64(8 * shift)
            w = (words[base] >> s) | (words[base + 1] << (np.uint64(64) - s))
        if left < 8:
            w &= (np.uint64(1) << np.uint64(8 * left)) - np.uint64(1)
        return w
    w = np.uint64(0)
    for t in range(min(8, left)):
        w |= np.uint64(raw[k + t]) << np.uint64(8 * t)
    return w


def _same_id(a: int, b: int, poff: Any, pids: Any) -> bool:
    """Whether partitioned rows ``a`` and ``b`` have the same string id (the same words:
    the length first, then the zero-padded bytes)."""
    sa, ea = poff[a], poff[a + 1]
    sb = poff[b]
    if pids[sa] != pids[sb]:  # the lengths
        return False
    for k in range(1, ea - sa):
        if pids[sa + k] != pids[sb + k]:
            return False
    return True


def _hash_ids(offsets: Any, data: Any, words: Any, salt: Any, out: Any) -> None:
    """``out[i]``: a 64-bit hash of the bytes of string id ``i``, keyed by ``salt``.

    The id's length, then each 8-byte word (the last one zero-padded) is folded in by
    ``h ← mix(h ⊕ w, salt)``, a bijection of ``h`` for each word whose value depends on the
    secret salt, so colliding ids are hard to choose without it (not a cryptographic PRF:
    a defence, not a proof).  Equal bytes give equal
    hashes; unequal ones may collide (rarely), which costs time, never exactness
    (:func:`_select` compares the bytes)."""
    n = out.size
    for i in _numba.prange(n):
        lo, hi = offsets[i], offsets[i + 1]
        h = _mix(np.uint64(hi - lo), salt)
        k = lo
        while k < hi:
            h = _mix(h ^ _load_word(data, words, k, hi), salt)
            k += 8
        out[i] = h


def _select(
    ou: Any,
    op: Any,
    poff: Any,
    pids: Any,
    edges: Any,
    b: int,
    kbits: int,
    salt: Any,
    threads: int,
) -> int:
    """Per bucket ``[edges[i], edges[i+1])``: the keys of each unit's ``b`` smallest ``pk``,
    written over the bucket's own range of ``ou`` (its unit ids are not needed after its
    slots are made), the rest of the range set to :data:`_EMPTY`; returns the number of
    units.  Buckets own disjoint ranges, so threads never write to the same place.

    With string ids (``poff`` not empty) ``ou`` holds a salted hash of the id
    (:func:`_hash_ids`), and a slot is a (hash, id) pair: a row joins a slot of equal hash
    only if its id (``pids[poff[r]:poff[r + 1]]``) equals that of the slot's first row, so
    ids whose hashes collide get slots of their own."""
    nb = edges.size - 1
    strings = poff.size > 0
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
        first = np.empty(cap if strings else 0, np.int64)
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
                while stamp[h] == epoch and (
                    keys[h] != x or (strings and not _same_id(first[h], r, poff, pids))
                ):
                    h = (h + np.uint64(1)) & mask
                if stamp[h] != epoch:
                    stamp[h] = epoch
                    keys[h] = x
                    if strings:
                        first[h] = r
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
    _load_word = _numba.njit(cache=True, inline="always")(_load_word)
    _same_id = _numba.njit(cache=True, inline="always")(_same_id)
    _id_words = _numba.njit(cache=True, inline="always")(_id_words)
    _hash_ids = _numba.njit(cache=True, parallel=True, nogil=True)(_hash_ids)
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
        the unit (any 64-bit integer type, whose bit pattern identifies the unit, or a
        string type, whose bytes do), ``pk`` (``UBIGINT``; the key in its low
        ``key_bits`` bits) and the class (``UTINYINT``, 0 for an in-domain row).
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
        raise RuntimeError(
            "dpgauss: the per-unit top-b kernel needs numba: " + install_hint("fast")
        )
    columns, ids = _columns(batches)
    with _LOCK:
        _USED = True
        previous = _numba.get_num_threads()
        threads = min(int(threads), previous) if threads else previous
        _numba.set_num_threads(threads)  # this thread's parallel regions only
        try:
            return _select_locked(columns, ids, b, key_bits, d, salt, threads)
        finally:
            _numba.set_num_threads(previous)


def _columns(batches: Any) -> tuple[list[Any], list[Any]]:
    """The batches' columns (u, pk, c) and, for string ids, their buffers
    (:func:`_id_buffers`), as zero-copy numpy views of the Arrow batches (no NULLs).  A
    function of its own so that no batch outlives it but through these views, which
    :func:`_select_locked` lets go once every batch is partitioned."""
    columns: list[Any] = []
    ids: list[Any] = []
    for batch in batches:
        if batch.num_rows:
            if any(batch.column(i).null_count for i in range(3)):  # the query never does
                raise RuntimeError("dpgauss: internal error: a NULL reached the unit kernel")
            unit = batch.column(0)
            if _is_text(unit.type):
                ids.append(_id_buffers(unit))
                u = None  # hashed under the lock (compiled, in parallel)
            else:
                u = unit.to_numpy().view(np.uint64)
            columns.append((u, batch.column(1).to_numpy(), batch.column(2).to_numpy()))
    if ids and len(ids) != len(columns):
        raise RuntimeError("dpgauss: internal error: string ids in only some batches")
    return columns, ids


def _is_text(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or _is_string_view(arrow_type)
    )


def _is_string_view(arrow_type: Any) -> bool:
    """Whether ``arrow_type`` is ``string_view`` (a type of pyarrow 16 on; before it, no
    array can be one)."""
    import pyarrow as pa

    test = getattr(pa.types, "is_string_view", None)
    return bool(test is not None and test(arrow_type))


def _id_buffers(column: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, bytes, words) of an Arrow string column, as zero-copy numpy views: the id
    of row ``i`` is ``bytes[offsets[i]:offsets[i + 1]]`` (64-bit offsets: ``large_string``,
    and ``string_view``, which is converted to it); ``words``: the bytes' whole 64-bit words
    (empty on a big-endian machine or an unaligned buffer: then bytes are read one by one,
    which gives the same words, see :func:`_load_word`)."""
    import pyarrow as pa

    if _is_string_view(column.type):
        column = column.cast(pa.large_string())
    if pa.types.is_large_string(column.type):
        offset_type: type[np.int64 | np.int32] = np.int64
    elif pa.types.is_string(column.type):
        offset_type = np.int32
    else:
        raise RuntimeError(f"dpgauss: internal error: unit ids of type {column.type}")
    _, off, data = column.buffers()
    offsets = np.frombuffer(off, offset_type)[column.offset : column.offset + len(column) + 1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    words = np.zeros(0, np.uint64)
    if sys.byteorder == "little" and raw.size >= 8 and raw.ctypes.data % 8 == 0:
        words = raw[: raw.size // 8 * 8].view(np.uint64)
    return offsets, raw, words


def _select_locked(
    columns: list[Any],
    ids: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    b: int,
    key_bits: int,
    d: int,
    salt: int,
    threads: int,
) -> tuple[np.ndarray, int, np.ndarray]:
    """:func:`select` on the batches' columns, under the lock and the thread count; the
    columns (and string ids) are let go once every batch is partitioned."""
    n = sum(pk.size for _, pk, _ in columns)
    # at least one bit: a shift by 64 is undefined in LLVM
    bits = min(_MAX_BITS, max(1, int(np.ceil(np.log2(max(1.0, n / BUCKET_ROWS))))))
    key = np.uint64(salt & (2**64 - 1))
    none = (np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint64))
    # (no loop variable below may hold a batch's column past the partitioning, after which
    # the batches are let go)
    for i in range(len(ids)):  # string ids: their salted hashes
        hashed = np.empty(ids[i][0].size - 1, np.uint64)
        _hash_ids(*ids[i], key, hashed)
        columns[i] = (hashed, columns[i][1], columns[i][2])
        del hashed
    hists, sizes, classes = [], [], np.zeros(_CLASSES, np.int64)
    for i in range(len(columns)):
        u, c = columns[i][0], columns[i][2]
        chunks = max(1, min(threads, u.size // 65536))
        hist, cls, used = _histogram(u, c, ids[i][0] if ids else none[0], key, bits, chunks)
        del u, c
        hists.append(hist)
        sizes.append(used)
        classes += cls.sum(axis=0)
    # where chunk j of batch i writes bucket k: after every row of the buckets below k, and
    # of bucket k in the chunks before (i, j): prefix sums in bucket-major order (the ids'
    # words likewise, so that they lie in the rows' order)
    starts, per_bucket = _starts(hists, bits)
    m = int(per_bucket.sum())
    ou, op = np.empty(m, np.uint64), np.empty(m, np.uint64)
    if ids:
        word_starts, per_bucket_words = _starts(sizes, bits)
        poff = np.empty(m + 1, np.int64)
        poff[m] = int(per_bucket_words.sum())
        pids = np.empty(int(poff[m]), np.uint64)
    else:
        word_starts = np.zeros((len(starts), 0), np.int64)
        poff, pids = none[0], np.zeros(0, np.uint64)
    row = 0
    for i, hist in enumerate(hists):
        u, pk, c = columns[i]
        off, raw, words = ids[i] if ids else none
        rows = slice(row, row + len(hist))
        start, word_start = starts[rows], word_starts[rows]
        _scatter(
            u,
            pk,
            c,
            key,
            bits,
            np.ascontiguousarray(start),
            ou,
            op,
            off,
            raw,
            words,
            np.ascontiguousarray(word_start),
            poff,
            pids,
        )
        row += len(hist)
    # Let go of the batches only now: freeing them between the scatters made the scatters
    # of string ids 2.5x slower (their page faults, 20 M rows).
    if hists:
        del u, pk, c, off, raw, words, start, word_start
    columns.clear()
    ids.clear()
    edges = np.concatenate(([0], np.cumsum(per_bucket))).astype(np.int64)
    units = int(_select(ou, op, poff, pids, edges, int(b), int(key_bits), key, threads))
    del op, poff, pids
    counts, bad = _tally(ou, int(d))
    if bad:
        raise RuntimeError("dpgauss: internal error: a key outside the domain reached the kernel")
    return counts, units, classes


def _starts(hists: list[np.ndarray], bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each (batch chunk, bucket) starts, from the per-chunk sizes in ``hists``: after
    every bucket below, and the earlier chunks of its own bucket; and the bucket totals."""
    every = np.concatenate(hists) if hists else np.zeros((0, 1 << bits), np.int64)
    flat = every.T.ravel()
    starts = (np.cumsum(flat) - flat).reshape(every.T.shape).T
    return starts, every.sum(axis=0)
