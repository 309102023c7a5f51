"""Per-unit top-b selection without a sort: a hash-partitioned kernel, compiled with numba.

The bounding query of :mod:`dpgauss.release.engines.duckdb` keeps, for every privacy unit, the
``b`` records of smallest priority, by one global sort on (unit, priority) and a streaming
``lag``.  For the commonest release (a ``count`` whose only bound is
``max_records_per_unit``, over integer unit ids, or string ids read from files) this module
makes the *same* selection without sorting the rows (CPU time against the sort's and the
scan floor's: ``docs/benchmarks.md``).  DuckDB still reads, classifies, keys and hashes
every record (one statement of the semantics); it hands over, row by row, in Arrow batches
(of 2¹⁹ rows), the unit ``u`` (an integer id's 64-bit pattern, or the string id itself), the
record's priority ``p`` and ``k``: the key of an in-domain row, else minus the row's class
(the class codes of :mod:`dpgauss.release.engines.base`).  The kernel makes an in-domain
row's key-in-priority ``pk = (p >> kb) << kb | key``, the general path's own sort key, as
it partitions the row (in SQL, that and the class's own column took DuckDB 0.04 s more CPU
at 20 M rows: ``docs/benchmarks.md``).  Then, batch by batch as they come:

0. **String ids** are hashed to 64 bits, keyed by the salt (:func:`_hash_ids`); the hash
   only places them, their bytes decide equality (step 2).  An integer id's ``h`` is
   ``mix(u, salt)``, a bijection of ``u``.
1. **Partition** the batch's in-domain rows by the top ``bits`` bits of ``h`` (counting
   sort: a histogram, prefix sums, a scatter) into a block of memory, after the batches
   before; the batch is then let go.  A unit's rows all land in one bucket, so buckets
   are independent; ``bits`` is 12 for DuckDB's batches (fewer for a small first batch),
   about 1,200 rows a bucket at 5 M rows, small enough for what follows to stay in cache.
   A row is one record of 64-bit words, ``(h, pk)`` (and, string ids, where its id's words
   start): one stream of writes per bucket, not one per field (at 4,096 buckets, two
   arrays' 8,192 streams made the partitioning about 1.3× slower: ``docs/benchmarks.md``).
   A string id is copied along with its row, as 64-bit words (its length, then its bytes
   zero-padded), so that a bucket's ids lie together.
2. **Select** in each bucket (its part of every batch): an open-addressing table gives
   each unit a slot, which keeps the ``b`` smallest ``pk`` of the unit's rows
   (:func:`_select`); the keys they hold (``pk``'s low ``kb`` bits) are counted.

**Same records as the general path.**  The general path keeps, per unit, the ``b`` rows
first in the order of ``pk`` (rows of equal ``pk`` are interchangeable there: equal ``pk``
means equal key); step 2 keeps the ``b`` smallest ``pk`` of the unit's rows, a multiset of
keys that does not depend on how equal ``pk`` are ordered, nor on the order rows arrive in,
nor on the batches or the partition (a function of ``u`` only).  Units are the same: equal
integer ids, or string ids of equal bytes (the sort compares ``VARCHAR`` by bytes when no
collation is set, which the engine checks before it uses the kernel).  So the counts equal
the general path's bit for bit, for every source (``tests/release/engines/test_unit_topb.py``;
the neighbouring-dataset fuzzer runs this path as ``duckdb-kernel``, CSV sources included).
Nothing here looks at other units: a unit's kept rows are a function of its own records
and the salt, whatever the other units hold — other units only share its bucket or its
hash, which changes where its rows are stored, not which are kept; the number of buckets
(from the first batch's size) and of blocks only say where rows are stored.  The hash that
places units in buckets and table entries is keyed by the secret salt (for string ids,
each 8-byte word is folded in by a mixing keyed by it), so crowding a bucket or a probe
sequence on purpose needs the salt — the mixing is not a cryptographic PRF, so this is a
defence, not a proof; a crowded bucket (one unit with millions of rows, or colliding ids)
is only slower, never wrong.

Memory: one Arrow batch at a time, and the partitioned rows, 16 bytes an in-domain row
with integer ids (1.6 GB at 10⁸ rows), in blocks of :data:`BLOCK_ROWS` rows; string ids add
8 bytes of offset and the id's bytes rounded up to whole words, plus one (about 64 bytes a
row with 32-character ids: estimated, not measured).  Per-task scratch sized by the units
of a bucket, not its rows (a unit of 4 M rows took 43–59 bytes a row of it when sized by the
rows), except the gather's 16 bytes a row of the largest bucket (``b`` > 16, or a unit of
millions of rows), and a row of counters per task.  None of it is under DuckDB's ``memory_limit``.
The first call in a new environment compiles the kernels (about 10–20 s; cached on disk
after that).  No numba parallel region runs: the selection's tasks run on threads of their
own (the compiled functions let go of the GIL) and the partitioning on the caller's.  An
OpenMP team spin-waits at its barriers, which on a loaded machine (other processes on the
cores) cost more CPU than the work: a 131,072-row histogram took 22 ms of CPU in a parallel
region against 0.2 ms with a passive wait (load average 5 on 2 cores;
``docs/benchmarks.md``).  So calls may run concurrently and in a forked process (GNU
OpenMP aborted in a child forked after its parent used it).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..._optional import install_hint, numba

__all__ = ["available", "select"]

_numba = numba()  # numba is optional (the `fast` extra)

_MAX_BITS = 12  # at most 4,096 buckets
#: Rows (and, string ids, words) of a block of partitioned rows (:class:`_Blocks`).
BLOCK_ROWS = 1 << 21
BLOCK_WORDS = 1 << 23
#: Up to this many records a unit, a slot keeps its smallest ``pk`` as rows come (:func:`_select`).
_INLINE_B = 16
#: ... and while the largest bucket's rows times ``b`` are at most this many entries.
_INLINE_ENTRIES = 1 << 24
#: Slots a task's scratch holds at first (doubled as a bucket's units need).
_SLOTS0 = 1 << 14
#: Counters of the per-task counts at most (fewer tasks for a larger domain).
_COUNTERS = 1 << 22
_CLASSES = 8  # class codes 0 … 7 (engines.base: IN_DOMAIN = 0 … MALFORMED = 6)
_SORT_INLINE = 32  # segments up to this long are insertion-sorted in place


def available() -> bool:
    """Whether the compiled kernel can run: numba is installed (its functions run no
    parallel region — threads of their own, see :meth:`_Blocks.select` — so neither a fork
    nor concurrent calls stop them)."""
    return _numba is not None


def _mix(x: Any, salt: Any) -> Any:
    """A 64-bit mixing of ``x`` keyed by ``salt`` (the SplitMix64 finaliser of ``x ^ salt``)."""
    x = x ^ salt
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _id_words(size: Any) -> Any:
    """The 64-bit words an id of ``size`` bytes takes once partitioned: its length, then its
    bytes, zero-padded to whole words (equal words ⇔ equal ids)."""
    return 1 + (size + 7) // 8


def _partition(
    u: Any,
    p: Any,
    kc: Any,
    salt: Any,
    bits: int,
    kbits: int,
    off: Any,
    words: Any,
    out: Any,
    at: int,
    pids: Any,
    wat: int,
    seg: Any,
    cls: Any,
) -> tuple[int, int]:
    """Partition one batch's in-domain rows by bucket into a block, from row ``at`` (and,
    string ids, word ``wat``) on; returns the rows and words written, or ``(−1, 0)`` if a
    row's ``kc`` is neither a key below ``2**kbits`` nor minus a class code (never, from
    the engine's query: checked, not trusted; the caller raises).

    Row ``i`` is in the domain if ``kc[i] ≥ 0`` (its key), else of class ``−kc[i]``; an
    in-domain row's ``pk`` is ``(p[i] >> kbits) << kbits | kc[i]``.

    ``u`` is the batch's integer ids (their 64-bit patterns), or, for string ids (``off``,
    ``raw``, ``words`` their offsets, bytes and whole words, else empty), their salted hashes
    (:func:`_hash_ids`).  A row's bucket is the top ``bits`` bits of ``h``, ``h = mix(u,
    salt)`` for an integer id (a bijection of the id: equal ``h`` ⇔ equal ids) or the
    string id's hash; row ``q`` of the block ``out`` is its words ``w·q … w·q + w − 1``:
    ``h``, the row's ``pk`` and, for string ids (``w = 3``, else 2), where its id's words
    start in ``pids``.  Counting sort: the in-domain rows per bucket, then each row is
    written where its bucket's rows go, so that bucket ``g`` of this batch is rows
    ``[seg[g], seg[g + 1])`` of the block.  A string id is copied too, as words
    (:func:`_id_words`), from ``wat`` on in ``pids``.  ``cls[k]`` gains the batch's rows of
    class ``k`` (``cls[0]``: in the domain)."""
    n = p.size
    nb = 1 << bits
    strings = off.size > 0
    hist = np.zeros(nb, np.int64)
    wh = np.zeros(nb if strings else 0, np.int64)
    shift = np.uint64(64 - bits)
    kb = np.uint64(kbits)
    inside = 0
    keys = 0  # the in-domain rows' keys, or-ed: below 2**kbits (checked, not trusted)
    for i in range(n):
        kind = kc[i]
        if kind >= 0:
            keys |= kind
            g = (u[i] if strings else _mix(u[i], salt)) >> shift
            hist[g] += 1
            if strings:
                wh[g] += _id_words(off[i + 1] - off[i])
            inside += 1
        else:  # rare: no store on the hot path
            if kind <= -cls.size:  # not a class code: never (checked)
                return -1, 0
            cls[-kind] += 1
    if keys >> kbits != 0:  # a key beyond kbits bits: never
        return -1, 0
    cls[0] += inside
    pos = np.empty(nb, np.int64)
    wpos = np.empty(nb if strings else 0, np.int64)
    q, w = at, wat
    for g in range(nb):
        seg[g] = q
        pos[g] = q
        q += hist[g]
        if strings:
            wpos[g] = w
            w += wh[g]
    seg[nb] = q
    for i in range(n):
        kind = kc[i]
        if kind >= 0:
            x = u[i] if strings else _mix(u[i], salt)
            pk = ((p[i] >> kb) << kb) | np.uint64(kind)
            g = x >> shift
            r = pos[g]
            pos[g] = r + 1
            if strings:  # (h, pk, where the id's words start), the words after
                v = wpos[g]
                out[3 * r] = x
                out[3 * r + 1] = pk
                out[3 * r + 2] = v
                k, end = np.int64(off[i]), np.int64(off[i + 1])
                pids[v] = np.uint64(end - k)
                v += 1
                while k < end:
                    pids[v] = _load_word(words, k, end)
                    v += 1
                    k += 8
                wpos[g] = v
            else:  # (h, pk)
                out[2 * r] = x
                out[2 * r + 1] = pk
    return q - at, w - wat


def _load_word(words: Any, k: int | np.int64, end: int | np.int64) -> Any:
    """The bytes ``k … min(k + 8, end) − 1`` of the ids' buffer as a little-endian 64-bit
    word, zero-padded; ``words`` is the buffer as little-endian words with a word of zeros
    after its last byte's (:func:`_id_buffers`), so that the two words that cover the bytes
    are always there: no branch but the mask of a last, partial word.  (A byte-by-byte read
    behind a bounds test, the earlier form, made hashing 32-character ids 8× slower.)"""
    base = k >> 3
    s = np.uint64(8 * (k & 7))
    # (the high word shifted in two steps: a shift by 64 is undefined in LLVM)
    w = (words[base] >> s) | ((words[base + 1] << np.uint64(1)) << (np.uint64(63) - s))
    left = end - k
    if left < 8:
        w &= (np.uint64(1) << np.uint64(8 * left)) - np.uint64(1)
    return w


def _hash_ids(offsets: Any, words: Any, salt: Any, out: Any) -> None:
    """``out[i]``: a 64-bit hash of the bytes of string id ``i``, keyed by ``salt``.

    The id's length, then each 8-byte word (the last one zero-padded) is folded in by
    ``h ← mix(h ⊕ w, salt)``, a bijection of ``h`` for each word whose value depends on the
    secret salt, so colliding ids are hard to choose without it (not a cryptographic PRF:
    a defence, not a proof).  Equal bytes give equal
    hashes; unequal ones may collide (rarely), which costs time, never exactness
    (:func:`_select` compares the bytes)."""
    n = out.size
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        h = _mix(np.uint64(hi - lo), salt)
        k = lo
        while k < hi:
            h = _mix(h ^ _load_word(words, k, hi), salt)
            k += 8
        out[i] = h


def _select(
    blocks: Any,
    pidss: Any,
    block_of: Any,
    seg: Any,
    sizes: Any,
    b: int,
    kbits: int,
    counts: Any,
    task: int,
    tasks: int,
) -> int:
    """Task ``task`` of ``tasks``: for buckets ``g = task, task + tasks, …``, each unit's
    ``b`` smallest ``pk``, their keys counted in ``counts`` (the task's own); returns the
    number of units of those buckets.

    Bucket ``g`` is, for every batch ``j``, rows ``[seg[g, j], seg[g + 1, j])`` of block
    ``block_of[j]`` (``blocks``, and for string ids ``pidss``: lists of the blocks' arrays,
    a row as :func:`_partition` wrote it), ``sizes[g]`` rows in all.  An open-addressing
    table (an entry: the unit's ``h``, then the bucket's stamp and the slot, one cache line)
    gives each unit of the bucket a slot; for string ids a slot is a (hash, id) pair: a row
    joins a slot of equal hash only if its id's words equal those of the slot's first row
    (copied aside when the slot is made), so ids whose hashes collide get slots of their
    own.  Up to :data:`_INLINE_B` records a unit, a slot holds the ``b`` smallest ``pk`` of
    its rows so far, sorted (empty entries ``2⁶⁴ − 1``), and each row's ``v`` is merged in without a
    branch: ``top[q] ← min(max(top[q − 1], v), top[q])`` from the last entry down, then
    ``top[0] ← min(top[0], v)`` — entries below ``v`` stay, ``v`` takes the first place
    above them, the rest move up one, the last falls out; after ``n`` rows the first
    ``min(n, b)`` entries are the ``b`` smallest of the multiset (a ``pk`` of ``2⁶⁴ − 1``
    ties an empty entry: the same value, the same key).  Beyond :data:`_INLINE_B` (or when
    the largest bucket's rows times ``b`` pass :data:`_INLINE_ENTRIES`: a unit with millions
    of rows would make the slots' arrays as large, ``b`` entries a row), the
    bucket's rows are gathered by slot and a slot of more than ``b`` rows is sorted.
    The slots' scratch (the table, sizes, b smallest, ids' places) has room for
    ``min(rows of the largest bucket, _SLOTS0)`` units at first: a bucket with more units
    is passed over again, with twice the room (a fresh stamp; growing the arrays inside the
    loop made it 2–3× slower), so one unit of millions of rows takes little scratch.

    Integer ids pass ``None`` for ``pidss``: numba then compiles a form without the string
    ids' tests."""
    nb = sizes.size
    strings = pidss is not None
    units = 0
    kmask = np.uint64((1 << kbits) - 1)
    full = np.uint64(2**64 - 1)  # an empty entry of a slot's b smallest
    ub, one, two = np.uint64(b), np.uint64(1), np.uint64(2)
    width = np.uint64(3 if strings else 2)  # words a partitioned row takes (_Blocks)
    nbatch = block_of.size
    big = 1
    for g in range(task, nb, tasks):
        big = max(big, sizes[g])
    # The scratch of the slots (their sizes, b smallest, ids' places, the table) is sized
    # by the units, doubled when a bucket has more (at most _SLOTS0 at first, as many as
    # the largest bucket's rows if fewer): not by the rows, of which one unit may have
    # millions.  Only the gather takes a word or two a row of the largest bucket.
    room = min(big, _SLOTS0)
    cap = 2
    while cap < 2 * room:
        cap *= 2
    # a table entry: the unit's h, then (bucket stamp << 40 | slot): one cache line
    table = np.zeros((cap, 2), np.uint64)
    # past _INLINE_ENTRIES rows times b in a bucket, the gather instead
    inline = b <= _INLINE_B and big * b <= _INLINE_ENTRIES
    top = np.empty(room * b if inline else 0, np.uint64)
    size = np.empty(room, np.int64)
    row_slot = np.empty(0 if inline else big, np.int64)
    fill = np.empty(0 if inline else room + 1, np.int64)
    buf = np.empty(0 if inline else big, np.uint64)
    sid_at = np.empty(room + 1 if strings else 0, np.int64)
    sid = np.empty(64 if strings else 0, np.uint64)
    mine = counts
    epoch = 0
    for g in range(task, nb, tasks):
        n = sizes[g]
        if n == 0:
            continue
        while True:  # a pass over the bucket; again with twice the room if it overflows
            epoch += 1
            tag = np.uint64(epoch) << np.uint64(40)
            m = 2
            while m < 2 * n and m < cap:
                m *= 2
            mask = np.uint64(m - 1)
            slots = 0
            over = False
            stored = 0  # words of the slots' ids in `sid`
            idx = 0  # the row's place in the bucket
            cur = block_of[0]
            rows = blocks[cur]
            pw = np.empty(0, np.uint64)
            if pidss is not None:
                pw = pidss[cur]
            for j in range(nbatch):
                lo, hi = seg[g, j], seg[g + 1, j]
                if lo == hi:
                    continue
                if block_of[j] != cur:
                    cur = block_of[j]
                    rows = blocks[cur]
                    if pidss is not None:
                        pw = pidss[cur]
                if over:
                    break
                for r in range(np.uint64(lo), np.uint64(hi)):  # a slot per unit
                    rw = r * width
                    x = rows[rw]
                    h = x & mask
                    while table[h, 1] >= tag and (
                        table[h, 0] != x
                        or (
                            strings
                            and not _same_id(
                                sid, sid_at[table[h, 1] ^ tag], pw, np.int64(rows[rw + two])
                            )
                        )
                    ):
                        h = (h + np.uint64(1)) & mask
                    e = table[h, 1]
                    if e < tag:  # a new unit
                        if slots == room:  # more units than the scratch holds
                            over = True
                            break
                        e = tag | np.uint64(slots)
                        table[h, 0] = x
                        table[h, 1] = e
                        size[slots] = 0
                        if inline:  # (only then: slots * b overflows int64 for a b near 2**53)
                            for q in range(slots * b, slots * b + b):
                                top[q] = full
                        if strings:  # the id's words, aside (the next slot's start after)
                            at_id = np.int64(rows[rw + two])
                            nw = _id_words(np.int64(pw[at_id]))
                            if stored + nw > sid.size:
                                more = np.empty(2 * (stored + nw), np.uint64)
                                more[:stored] = sid[:stored]
                                sid = more
                            sid_at[slots] = stored
                            for k in range(nw):
                                sid[stored + k] = pw[at_id + k]
                            stored += nw
                        slots += 1
                    # (unsigned indices: numba tests a signed one for a negative value on
                    # every access, which made this loop twice as slow)
                    s = e ^ tag
                    v = rows[rw + one]
                    k = size[s]
                    if inline:  # the b smallest so far, sorted, v merged in (no branch)
                        size[s] = k + 1
                        base = s * ub
                        q = base + ub - one
                        while q > base:
                            top[q] = min(max(top[q - one], v), top[q])
                            q -= one
                        top[base] = min(top[base], v)
                    else:
                        row_slot[idx] = s
                        size[s] = k + 1
                        idx += 1
            if not over:
                break
            room *= 2
            size = np.empty(room, np.int64)
            top = np.empty(room * b if inline else 0, np.uint64)
            sid_at = np.empty(room + 1 if strings else 0, np.int64)
            fill = np.empty(0 if inline else room + 1, np.int64)
            while cap < 2 * room:
                cap *= 2
            if table.shape[0] < cap:
                table = np.zeros((cap, 2), np.uint64)
                epoch = 0  # (a fresh table: no stale stamps)
        units += slots
        if inline:  # a slot's first min(size, b) entries: its rows' b smallest pk
            for z in range(slots):
                for p in range(z * b, z * b + min(size[z], b)):
                    mine[top[p] & kmask] += 1
            continue
        fill[0] = 0
        for z in range(slots):  # the rows of each slot, together
            fill[z + 1] = fill[z] + size[z]
        idx = 0
        for j in range(nbatch):
            lo, hi = seg[g, j], seg[g + 1, j]
            if lo == hi:
                continue
            rows = blocks[block_of[j]]
            for r in range(lo, hi):
                z = row_slot[idx]
                buf[fill[z]] = rows[np.uint64(r) * width + one]
                fill[z] += 1
                idx += 1
        begin = 0
        for z in range(slots):
            k = size[z]
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
                mine[buf[p] & kmask] += 1
            begin += size[z]
    return units


def _same_id(sid: Any, at: int, pids: Any, p: int | np.int64) -> bool:
    """Whether the id stored from ``sid[at]`` on equals the partitioned id from ``pids[p]``
    on (the same words: the length first, then the zero-padded bytes)."""
    if sid[at] != pids[p]:  # the lengths
        return False
    for k in range(1, _id_words(np.int64(pids[p]))):
        if sid[at + k] != pids[p + k]:
            return False
    return True


if _numba is not None:  # compiled on first use, cached on disk
    _mix = _numba.njit(cache=True, inline="always")(_mix)
    _id_words = _numba.njit(cache=True, inline="always")(_id_words)
    _load_word = _numba.njit(cache=True, inline="always")(_load_word)
    _same_id = _numba.njit(cache=True, inline="always")(_same_id)
    _partition = _numba.njit(cache=True, parallel=False, nogil=True)(_partition)
    _hash_ids = _numba.njit(cache=True, parallel=False, nogil=True)(_hash_ids)
    _select = _numba.njit(cache=True, parallel=False, nogil=True)(_select)


def select(
    batches: Any, b: int, key_bits: int, d: int, salt: int, threads: int = 0
) -> tuple[np.ndarray, int, np.ndarray]:
    """Counts per key of the rows each unit keeps (its ``b`` smallest ``pk``).

    Parameters
    ----------
    batches
        An iterable of Arrow record batches with three non-null columns in this order:
        the unit (any 64-bit integer type, whose bit pattern identifies the unit, or a
        string type, whose bytes do), the priority ``p`` (``UBIGINT``) and ``k``
        (``INTEGER`` or ``BIGINT``): an in-domain row's key ``≥ 0``, else minus its class
        code.  Each is partitioned as it comes and let go (none is held past the next).
    b : int ≥ 1, records kept per unit
    key_bits : int, the low bits of ``pk`` that hold the key (``pk = (p >> key_bits) <<
        key_bits | key``: the rows a unit keeps are its ``b`` smallest ``pk``)
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
    if _numba is None:
        raise RuntimeError(
            "dpgauss: the per-unit top-b kernel needs numba: " + install_hint("fast")
        )
    if not 1 <= int(key_bits) <= max(16, int(d).bit_length() + 1) or (int(d) - 1) >> int(key_bits):
        raise RuntimeError(f"dpgauss: internal error: key_bits {key_bits} for {d} keys")
    store = _Blocks(np.uint64(salt & (2**64 - 1)), int(threads), int(key_bits))
    for batch in batches:
        store.add(batch)
        del batch  # let it go before the next is made
    return store.select(int(b), int(key_bits), int(d))


class _Blocks:
    """The in-domain rows of the batches seen so far, partitioned by bucket, in blocks.

    A block holds :data:`BLOCK_ROWS` rows (more if one batch has more), a row as consecutive
    64-bit words: the unit's ``h``, ``pk`` and, for string ids, where the row's id starts in
    the block's ``pids`` (:func:`_partition`).  A batch's rows go into one block, bucket
    after bucket; ``seg[j]`` gives where each bucket of batch ``j`` starts in its block
    ``block_of[j]``.  Blocks are numpy arrays of several MB (numpy asks the kernel for huge
    pages there, so filling fresh memory faults a 2 MB page at a time); their unused tails
    are never touched."""

    def __init__(self, salt: Any, threads: int, key_bits: int) -> None:
        self.salt = salt
        self.threads = threads
        self.key_bits = key_bits
        self.bits = 0  # decided by the first batch
        self.strings: bool | None = None
        self.blocks: list[np.ndarray] = []
        self.pidss: list[np.ndarray] = []
        self.at = self.wat = 0
        self.segs: list[np.ndarray] = []
        self.block_of: list[int] = []
        self.classes = np.zeros(_CLASSES, np.int64)
        self.hashed = np.zeros(0, np.uint64)

    def add(self, batch: Any) -> None:
        n = batch.num_rows
        if not n:
            return
        if any(batch.column(i).null_count for i in range(3)):  # the query never does
            raise RuntimeError("dpgauss: internal error: a NULL reached the unit kernel")
        unit = batch.column(0)
        strings = _is_text(unit.type)
        if self.strings is None:
            self.strings = strings
            # the buckets, from the first batch's size (2**_MAX_BITS for DuckDB's batches of
            # 2**19 rows, fewer for a small source); they decide where rows are stored only
            self.bits = min(_MAX_BITS, max(1, int(np.ceil(np.log2(max(2.0, n / 32))))))
        elif strings != self.strings:
            raise RuntimeError("dpgauss: internal error: string ids in only some batches")
        p, kc = batch.column(1).to_numpy(), batch.column(2).to_numpy()
        if p.dtype != np.uint64 or kc.dtype not in (np.int32, np.int64):
            raise RuntimeError(
                f"dpgauss: internal error: the unit kernel got {p.dtype} and {kc.dtype}"
            )
        if strings:
            off, words = _id_buffers(unit)
            need = 2 * n + (int(off[-1]) - int(off[0])) // 8
        else:
            off, words = _NONE_OFF, _NONE_WORDS
            need = 0
        if strings:
            if self.hashed.size < n:
                self.hashed = np.empty(n, np.uint64)
            u = self.hashed[:n]
            _hash_ids(off, words, self.salt, u)
        else:
            u = unit.to_numpy().view(np.uint64)
        if (
            not self.blocks
            or self.at + n > self.blocks[-1].size // (3 if strings else 2)
            or (strings and self.wat + need > self.pidss[-1].size)
        ):
            self._new_block(n, need)
        seg = np.empty((1 << self.bits) + 1, np.int64)
        pids = self.pidss[-1] if strings else _NONE_WORDS
        rows, used = _partition(
            u, p, kc, self.salt, self.bits, self.key_bits, off, words, self.blocks[-1],
            self.at, pids, self.wat, seg, self.classes,
        )  # fmt: skip
        if rows < 0:  # the query never makes one (checked, not trusted)
            raise RuntimeError(
                "dpgauss: internal error: a key or class outside the domain reached the kernel"
            )
        self.at += rows
        self.wat += used
        self.segs.append(seg)
        self.block_of.append(len(self.blocks) - 1)

    def _new_block(self, rows: int, words: int) -> None:
        size = max(BLOCK_ROWS, rows)
        self.blocks.append(np.empty(size * (3 if self.strings else 2), np.uint64))
        if self.strings:
            self.pidss.append(np.empty(max(BLOCK_WORDS, words), np.uint64))
        self.at = self.wat = 0

    def select(self, b: int, key_bits: int, d: int) -> tuple[np.ndarray, int, np.ndarray]:
        """The counts, units and classes of the rows seen (:func:`select`)."""
        if not self.segs:
            return np.zeros(d, np.int64), 0, self.classes
        # bucket-major: a bucket's starts in every batch lie together
        seg = np.ascontiguousarray(np.stack(self.segs).T)
        sizes = np.diff(seg, axis=0).sum(axis=1)
        block_of = np.asarray(self.block_of, np.int64)
        typed = _numba.typed.List
        blocks = typed(self.blocks)
        pidss = typed(self.pidss) if self.strings else None
        width = 1 << key_bits  # every value of a key's bits has a counter
        # tasks on threads of their own (the kernels let go of the GIL), each with a row of
        # counters: at most _COUNTERS in all (fewer tasks for a large domain)
        threads = self.threads or _numba.get_num_threads()
        tasks = max(1, min(threads, _COUNTERS // width, 1 << self.bits))
        counts = np.zeros((tasks, width), np.int64)
        args = (blocks, pidss, block_of, seg, sizes, b, key_bits)

        def task(t: int) -> int:
            return int(_select(*args, counts[t], t, tasks))

        if tasks == 1:
            units = task(0)
        else:
            with ThreadPoolExecutor(tasks - 1) as pool:
                others = [pool.submit(task, t) for t in range(1, tasks)]
                units = task(0) + sum(f.result() for f in others)
        total = counts.sum(axis=0)
        if total[d:].any():  # none: keys are below d by construction (checked, not trusted)
            raise RuntimeError(
                "dpgauss: internal error: a key outside the domain reached the kernel"
            )
        return total[:d].copy(), units, self.classes


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


def _id_buffers(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, words) of an Arrow string column: the id of row ``i`` is the bytes
    ``offsets[i] … offsets[i + 1] − 1`` of ``words``, the column's bytes copied into
    little-endian 64-bit words with a word of zeros after them (:func:`_load_word`);
    ``offsets`` from 0 (a sliced column's are shifted).  ``string_view`` is converted to
    ``large_string``."""
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
    first, last = int(offsets[0]), int(offsets[-1])
    return offsets.astype(np.int64) - first, _padded_words(data, first, last)


def _padded_words(data: Any, first: int, last: int) -> np.ndarray:
    """Bytes ``first … last − 1`` of the buffer ``data`` as little-endian 64-bit words (the
    native type), the last one zero-padded, and a word of zeros after them."""
    words = np.zeros((last - first) // 8 + 2, "<u8")
    if last > first:
        words.view(np.uint8)[: last - first] = np.frombuffer(data, np.uint8)[first:last]
    return words.astype(np.uint64, copy=False)  # (a copy on a big-endian machine only)


_NONE_OFF = np.zeros(0, np.int64)
_NONE_WORDS = np.zeros(0, np.uint64)
