"""resolve_rng, SecureRandom and the exact big-integer helpers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpgauss.noise.randomness import SecureRandom, random_below, random_bits, resolve_rng


def test_generator_is_used_as_is():
    gen = np.random.default_rng(0)
    assert resolve_rng(gen) is gen


@pytest.mark.parametrize("seed", [0, 7, np.int64(7), np.uint32(7), 2**70])
def test_int_seed_is_reproducible(seed):
    a, b = resolve_rng(seed), resolve_rng(seed)
    assert isinstance(a, np.random.Generator) and a is not b
    assert np.array_equal(a.integers(0, 100, 10), b.integers(0, 100, 10))
    assert np.array_equal(
        resolve_rng(seed).integers(0, 100, 10),
        np.random.default_rng(int(seed)).integers(0, 100, 10),
    )


def test_secure():
    src = resolve_rng("secure")
    assert isinstance(src, SecureRandom)
    assert resolve_rng(src) is src
    assert repr(src) == "SecureRandom()"
    assert len(src.bytes(16)) == 16


@pytest.mark.parametrize(
    ("rng", "error", "match"),
    [
        (None, TypeError, "None is not accepted"),
        (True, TypeError, "bool"),
        (1.0, TypeError, "float"),
        ("Secure", ValueError, "'secure'"),
        ("", ValueError, "'secure'"),
        (-1, ValueError, "non-negative"),
        (np.random.RandomState(0), TypeError, "RandomState"),
        (np.random.PCG64(0), TypeError, "PCG64"),
        ([1, 2], TypeError, "list"),
    ],
)
def test_rejects(rng, error, match):
    with pytest.raises(error, match=match):
        resolve_rng(rng)


def test_secure_integers_bounds_and_shapes():
    src = SecureRandom()
    x = src.integers(0, 7, size=10_000)
    assert x.dtype == np.int64 and x.shape == (10_000,)
    assert x.min() == 0 and x.max() == 6
    assert src.integers(5, size=(2, 3)).shape == (2, 3)
    y = src.integers(-3, 3, size=1000)
    assert y.min() >= -3 and y.max() <= 2
    highs = np.array([1, 2, 3, 2**31 + 1, 2**40, 2**62, 2**63 - 1], dtype=np.int64)
    z = src.integers(0, np.tile(highs, 200))
    assert z.shape == (1400,) and np.all((z >= 0) & (z < np.tile(highs, 200)))
    assert np.all(src.integers(0, np.ones(50, dtype=np.int64)) == 0)
    assert src.integers(0, 10, size=0).shape == (0,)
    with pytest.raises(ValueError, match="high must be greater"):
        src.integers(3, 3, size=2)
    assert src.integers(0, 4, size=3, dtype=np.int64).dtype == np.int64
    with pytest.raises(TypeError, match="int64 only"):
        src.integers(0, 4, size=3, dtype=np.int32)
    with pytest.raises(ValueError, match="below 2"):
        src.integers(-(2**62), 2**62, size=2)


@pytest.mark.parametrize("n", [3, 6, 1000, 2**32 + 3])
def test_secure_integers_are_uniform(n):
    """No modulo bias: chi-square on 20 equal-mass classes (n = 3, 6 one class per value)."""
    x = SecureRandom().integers(0, n, size=120_000)
    classes = min(n, 20)
    counts = np.bincount((x * classes // n) if n > classes else x, minlength=classes)
    sizes = np.diff([(i * n + classes - 1) // classes for i in range(classes + 1)])
    expected = sizes / n * x.size
    assert stats.chisquare(counts, expected).pvalue > 1e-6  # fresh OS randomness


@pytest.mark.parametrize("source", [SecureRandom(), np.random.default_rng(3)])
def test_random_below_and_bits(source):
    big = 2**100 + 7
    draws = [random_below(source, big) for _ in range(200)]
    assert all(0 <= d < big for d in draws)
    assert max(draws) > 2**99  # not stuck in the low words
    small = [random_below(source, 3) for _ in range(3000)]
    assert stats.chisquare(np.bincount(small, minlength=3)).pvalue > 1e-6
    assert random_below(source, 1) == 0
    bits = [random_bits(source, 70) for _ in range(200)]
    assert all(0 <= b < 2**70 for b in bits) and max(bits) > 2**69
    assert random_bits(source, 0) == 0
    with pytest.raises(ValueError):
        random_below(source, 0)


def test_generator_bits_are_reproducible():
    a = [random_bits(np.random.default_rng(5), 130) for _ in range(2)]
    assert a[0] == a[1]
