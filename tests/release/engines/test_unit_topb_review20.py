"""Adversarial review of the packed-row kernel and the p/k handover (issue #31 item 6,
branch bound20): the kernel against an independent reference that builds
pk = (p >> kb) << kb | key and sorts, blocks filled to the brim, and the engine's kernel
against its general path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.release.engines import unit_topb
from dpgauss.release.engines.duckdb import DuckDBEngine
from dpgauss.release.pipeline import bounded_aggregate
from dpgauss.release.spec import ReleaseSpec

pytestmark = pytest.mark.skipif(not unit_topb.available(), reason="needs numba")

EXTREME_P = np.array(
    [0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64 - 2, 2**32 - 1, 2**32, 2**31],
    np.uint64,
)
EXTREME_U = np.array([-(2**63), 2**63 - 1, 0, -1, 1, -(2**31), 2**31 - 1, 2**32], np.int64)


def ref(units, p, k, b, kb, d):
    """Counts per key of each unit's b smallest pk, units, classes (independent code)."""
    counts = np.zeros(d, np.int64)
    classes = np.zeros(8, np.int64)
    per: dict = {}
    for x, pi, ki in zip(units, p.tolist(), k.tolist(), strict=True):
        if ki < 0:
            classes[-ki] += 1
            continue
        classes[0] += 1
        pk = ((pi >> kb) << kb) | ki
        per.setdefault(x, []).append(pk)
    for v in per.values():
        for pk in sorted(v)[:b]:
            counts[pk & ((1 << kb) - 1)] += 1
    return counts, len(per), classes


def make_batches(units, p, k, size, strings, ktype, large=False):
    out = []
    for lo in range(0, len(p), size):
        sl = slice(lo, lo + size)
        if strings:
            ua = pa.array(units[sl], pa.large_string() if large else pa.string())
        else:
            ua = pa.array(np.asarray(units[sl], np.int64), pa.int64())
        out.append(
            pa.record_batch(
                [ua, pa.array(p[sl], pa.uint64()), pa.array(k[sl].astype(ktype))],
                names=["u", "p", "k"],
            )
        )
    return out


STRS = ["", "\x00", "\x00\x00", "a", "a\x00", "\x00a", "A", "x" * 8, "x" * 7 + "\x00",
        "x" * 9, "y" * 64, "y" * 63 + "\x00", "é", "e\u0301", "𝄞"]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 2500),
    n_units=st.integers(1, 300),
    kb=st.integers(1, 12),
    b=st.sampled_from([1, 2, 3, 15, 16, 17, 40, 2**53]),
    size=st.sampled_from([1, 2, 3, 64, 1000, 1 << 19]),
    strings=st.booleans(),
    ktype=st.sampled_from([np.int32, np.int64]),
    extreme=st.booleans(),
    threads=st.sampled_from([1, 2, 3]),
)
def test_kernel_vs_reference(seed, n, n_units, kb, b, size, strings, ktype, extreme, threads):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(max(1, 2 ** (kb - 1)), 2**kb + 1)) if kb > 1 else int(rng.integers(1, 3))
    if strings:
        pool = STRS + [f"s{i}" * int(rng.integers(1, 5)) for i in range(n_units)]
        units = [pool[i] for i in rng.integers(0, len(pool), n)]
    else:
        pool = np.concatenate([EXTREME_U, rng.integers(-(2**63), 2**63 - 1, n_units)])
        units = pool[rng.integers(0, len(pool), n)].tolist()
    if extreme:
        p = EXTREME_P[rng.integers(0, len(EXTREME_P), n)]
        p = np.where(rng.random(n) < 0.5, p, rng.integers(0, 2**63, n).astype(np.uint64) * 2 + 1)
    else:
        p = rng.integers(0, 8, n).astype(np.uint64) << np.uint64(kb - 1)  # many ties
        p |= rng.integers(0, 2**kb, n).astype(np.uint64)  # low bits: garbage
    p = p.astype(np.uint64)
    key = rng.integers(0, d, n)
    k = np.where(rng.random(n) < 0.15, -rng.integers(1, 8, n), key).astype(np.int64)
    got = unit_topb.select(make_batches(units, p, k, size, strings, ktype), b, kb, d, seed, threads)
    want = ref(units, p, k, b, kb, d)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]
    np.testing.assert_array_equal(got[2], want[2])


def test_pk_all_ones_ties_empty_inline_entries():
    """pk = 2**64 - 1 (p all ones, key = all ones) ties the inline empty entry."""
    kb, d = 3, 8
    for b in (1, 2, 16, 17):
        for nrows in (1, 2, 5, 20):
            units = [5] * nrows + [-(2**63)] * nrows
            p = np.full(2 * nrows, 2**64 - 1, np.uint64)
            k = np.full(2 * nrows, 7, np.int64)
            k[::3] = 6
            got = unit_topb.select(make_batches(units, p, k, 1, False, np.int64), b, kb, d, 1, 2)
            want = ref(units, p, k, b, kb, d)
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1] == want[1] == 2


def test_sign_bit_of_p_orders_as_unsigned():
    """p with the sign bit set sorts after p without (UBIGINT order, as DuckDB's)."""
    kb, d = 2, 4
    units = [1, 1, 1]
    p = np.array([2**63, 2**63 - 1, 2**64 - 4], np.uint64)
    k = np.array([1, 2, 3], np.int32)
    counts, _, _ = unit_topb.select(make_batches(units, p, k, 3, False, np.int32), 1, kb, d, 0, 1)
    assert counts.tolist() == [0, 0, 1, 0]
    counts, _, _ = unit_topb.select(
        make_batches(["z"] * 3, p, k, 3, True, np.int32), 2, kb, d, 0, 1
    )
    assert counts.tolist() == [0, 1, 1, 0]


def test_one_unit_owns_other_units_unchanged():
    """Adding records to unit A never changes any other unit's kept keys (b inline/gather)."""
    rng = np.random.default_rng(3)
    n = 20_000
    kb, d = 6, 50
    units = rng.integers(0, 2_000, n).tolist()
    p = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    k = rng.integers(0, d, n).astype(np.int64)
    for b in (3, 16, 17, 100):
        base = unit_topb.select(make_batches(units, p, k, 4096, False, np.int64), b, kb, d, 9, 2)
        # unit 10**9 with 300k rows of key 0 and tiny p, then the same with strings
        extra = 300_000
        u2 = units + [10**9] * extra
        p2 = np.concatenate([p, np.zeros(extra, np.uint64)])
        k2 = np.concatenate([k, np.zeros(extra, np.int64)])
        got = unit_topb.select(make_batches(u2, p2, k2, 1 << 19, False, np.int64), b, kb, d, 9, 2)
        diff = got[0] - base[0]
        assert diff[0] == min(b, extra) and not diff[1:].any()
        assert got[1] == base[1] + 1


def make_spec(src: Path, d: int, b: int, **extra) -> ReleaseSpec:
    return ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": d, **extra},
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": b},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )


@pytest.mark.parametrize("d", [1, 2, 3, 64, 65, 70_000])
@pytest.mark.parametrize("b", [1, 16, 17, 2**53])
@pytest.mark.parametrize("ids", ["int", "str", "uint"])
def test_engine_domain_sizes(tmp_path: Path, d, b, ids):
    rng = np.random.default_rng(d + b % 1000)
    n = 5_000
    uid = rng.integers(0, 200, n)
    if ids == "int":
        col = pa.array(uid)
    elif ids == "uint":
        col = pa.array((uid.astype(np.uint64) + np.uint64(2**64 - 150)), pa.uint64())
    else:
        col = pa.array([["", "\x00", "a", "a\x00"][x % 4] * (x % 7) for x in uid.tolist()])
    src = tmp_path / "f.parquet"
    pq.write_table(pa.table({"uid": col, "key": rng.integers(-2, d + 3, n)}), src)
    spec = make_spec(src, d, b)
    for salt in (0, 2**64 - 1):
        kern = bounded_aggregate(spec, salt=salt, engine=DuckDBEngine(kernel=True))
        gen = bounded_aggregate(spec, salt=salt, engine=DuckDBEngine(kernel=False))
        np.testing.assert_array_equal(kern.counts, gen.counts)
        assert kern.rows == gen.rows


def _malformed_csv(path: Path, n: int, seed: int, *, extra_fields: bool) -> Path:
    """``n`` records ``uid,key,t``: 5 % with an unterminated quote (MALFORMED), 5 % with no
    unit, 5 % with an extra field if ``extra_fields``, the rest valid (keys -2 … 54)."""
    rng = np.random.default_rng(seed)
    lines = ["uid,key,t"]
    for i in range(n):
        r = rng.random()
        if r < 0.05:
            lines.append(f'{i % 30},"broken,{i}')
        elif r < 0.1:
            lines.append(f",{i % 50},{i % 10}")
        elif extra_fields and r < 0.15:
            lines.append(f"{i % 30},{i % 50},{i % 10},extra")
        else:
            lines.append(f"{int(rng.integers(0, 300))},{int(rng.integers(-2, 55))},{i % 10}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_engine_csv_malformed_and_filter(tmp_path: Path):
    """CSV (class MALFORMED = 6 via k = -6) and the [filter] class through the engine."""
    src = _malformed_csv(tmp_path / "f.csv", 4_000, 8, extra_fields=False)
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": 50},
            "statistic": {"kind": "count"},
            "filter": {"column": "t", "start": 1, "stop": 8},
            "bounds": {"max_records_per_unit": 2},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    kern = bounded_aggregate(spec, salt=3, engine=DuckDBEngine(kernel=True))
    gen = bounded_aggregate(spec, salt=3, engine=DuckDBEngine(kernel=False))
    np.testing.assert_array_equal(kern.counts, gen.counts)
    assert kern.rows == gen.rows


GUARD = 4096
SENTINEL = np.uint64(0xDEADBEEFDEADBEEF)


@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("batch", [1, 7, 33, 100, 250])
def test_blocks_filled_to_the_brim_are_never_overrun(monkeypatch, strings, batch):
    """Small blocks filled by several batches each (so a block's capacity test decides):
    every block (rows and ids' words) is followed by a guard region that must stay
    untouched, and the records are the reference's."""
    monkeypatch.setattr(unit_topb, "BLOCK_ROWS", 100)
    monkeypatch.setattr(unit_topb, "BLOCK_WORDS", 300)
    guards: list[tuple[np.ndarray, int]] = []
    real = unit_topb._Blocks._new_block

    def guarded(self, rows, words):
        real(self, rows, words)
        for lst in (self.blocks, self.pidss) if self.strings else (self.blocks,):
            size = lst[-1].size
            big = np.full(size + GUARD, SENTINEL, np.uint64)
            lst[-1] = big[:size]
            guards.append((big, size))

    monkeypatch.setattr(unit_topb._Blocks, "_new_block", guarded)
    rng = np.random.default_rng(batch)
    n, kb, d = 3_000, 6, 50
    if strings:
        units = [f"id{x}" * (1 + x % 4) for x in rng.integers(0, 400, n).tolist()]
    else:
        units = rng.integers(-(2**63), 2**63 - 1, 400)[rng.integers(0, 400, n)].tolist()
    p = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    k = np.where(rng.random(n) < 0.05, -3, rng.integers(0, d, n)).astype(np.int64)
    for b in (3, 20):
        guards.clear()
        got = unit_topb.select(make_batches(units, p, k, batch, strings, np.int64), b, kb, d, 5, 2)
        for big, size in guards:
            assert (big[size:] == SENTINEL).all(), "a block was written past its end"
        want = ref(units, p, k, b, kb, d)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1]


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the kernel's calls (so that a test knows the engine used it)."""
    calls: list[int] = []
    real = unit_topb.select

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(unit_topb, "select", spy)
    return calls


@pytest.mark.parametrize("batch_rows", [1, 2, 3])
@pytest.mark.parametrize("nrows", [0, 1, 2, 5, 40])
@pytest.mark.parametrize("ids", ["int", "str"])
def test_engine_tiny_sources_and_batches(
    tmp_path, monkeypatch, kernel_calls, batch_rows, nrows, ids
):
    import dpgauss.release.engines.duckdb as duckdb_engine

    rng = np.random.default_rng(nrows)
    uid = rng.integers(0, 3, nrows)
    col = (
        pa.array(uid, pa.int64()) if ids == "int" else pa.array([f"{x}" for x in uid], pa.string())
    )
    src = tmp_path / "t.parquet"
    pq.write_table(
        pa.table({"uid": col, "key": pa.array(rng.integers(-1, 6, nrows), pa.int64())}), src
    )
    spec = make_spec(src, 5, 2)
    gen = bounded_aggregate(spec, salt=1, engine=DuckDBEngine(kernel=False))
    monkeypatch.setattr(duckdb_engine, "_KERNEL_BATCH_ROWS", batch_rows)
    kern = bounded_aggregate(spec, salt=1, engine=DuckDBEngine(kernel=True))
    assert kernel_calls
    np.testing.assert_array_equal(kern.counts, gen.counts)
    assert kern.rows == gen.rows


def test_engine_csv_uses_kernel_with_malformed_lines(tmp_path, kernel_calls):
    src = _malformed_csv(tmp_path / "g.csv", 3_000, 81, extra_fields=True)
    spec = make_spec(src, 50, 2)
    kern = bounded_aggregate(spec, salt=3, engine=DuckDBEngine(kernel=True))
    assert kernel_calls
    gen = bounded_aggregate(spec, salt=3, engine=DuckDBEngine(kernel=False))
    np.testing.assert_array_equal(kern.counts, gen.counts)
    assert kern.rows == gen.rows
    assert kern.rows.malformed_lines > 0 and kern.rows.null_unit > 0


@pytest.mark.parametrize(
    "domain",
    [
        {"kind": "range", "column": "x", "start": -1.5, "stop": 3.0, "step": 0.25},
        {"kind": "range", "column": "x", "start": -1.5, "stop": 3.0, "step": 0.25, "other": True},
        {"kind": "values", "column": "s", "values": ["a", "b", "", "é", "a\u0000"]},
        {"kind": "values", "column": "s", "values": ["a", "b"], "other": True},
        {
            "kind": "product",
            "parts": [
                {"kind": "range", "column": "x", "start": -1.5, "stop": 3.0, "step": 0.5},
                {"kind": "values", "column": "s", "values": ["a", "b", ""]},
            ],
        },
    ],
)
@pytest.mark.parametrize("ids", ["int", "str"])
def test_engine_other_domains(tmp_path, kernel_calls, domain, ids):
    rng = np.random.default_rng(4)
    n = 4_000
    uid = rng.integers(0, 300, n)
    col = pa.array(uid) if ids == "int" else pa.array([f"u{x}" for x in uid])
    x = rng.normal(0.5, 2, n)
    x[rng.random(n) < 0.05] = np.nan
    s = np.array(["a", "b", "", "é", "a\u0000", "c"], dtype=object)[rng.integers(0, 6, n)]
    src = tmp_path / "o.parquet"
    pq.write_table(pa.table({"uid": col, "x": x, "s": list(s)}), src)
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": domain,
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": 3},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        }
    )
    kern = bounded_aggregate(spec, salt=2, engine=DuckDBEngine(kernel=True))
    assert kernel_calls
    gen = bounded_aggregate(spec, salt=2, engine=DuckDBEngine(kernel=False))
    np.testing.assert_array_equal(kern.counts, gen.counts)
    assert kern.rows == gen.rows
