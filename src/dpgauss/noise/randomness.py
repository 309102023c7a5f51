"""Sources of randomness for the noise samplers: seeded for experiments, secure for releases.

``resolve_rng`` turns the ``rng=`` argument of every sampler into a *source*:

* a :class:`numpy.random.Generator` is used as is (its state advances);
* an ``int`` seed becomes ``numpy.random.default_rng(seed)``: reproducible experiments;
* the string ``"secure"`` becomes a :class:`SecureRandom`, which draws every bit from the
  operating system's cryptographic generator (``os.urandom``) and has no state to leak.

A seeded ``Generator`` (PCG64) is *not* cryptographically secure: its output can be
predicted from earlier output, so noise drawn from it protects nothing against an adversary
who can see other draws.  Use it for experiments and tests; use ``"secure"`` for releases.

Both kinds of source expose the one operation the samplers need,
``integers(low, high=None, size=None)``: independent uniform integers in ``[low, high)``
(elementwise bounds, ``int64`` result), with :class:`SecureRandom` mirroring the
``Generator.integers`` signature for this case.  :func:`random_below` draws a uniform
Python ``int`` below an arbitrary bound (used by the exact slow paths).  There is no
global random state anywhere in dpgauss.
"""

from __future__ import annotations

import numbers
import os
import secrets

import numpy as np
import numpy.typing as npt

__all__ = ["RandomSource", "SecureRandom", "random_below", "random_bits", "resolve_rng"]

_INT64_MAX = np.iinfo(np.int64).max


class SecureRandom:
    """Uniform integers from the operating system's CSPRNG (``os.urandom``), in bulk.

    ``integers`` draws a batch of 32- or 64-bit words with one ``os.urandom`` call, masks
    each word to the smallest power of two ``2**b >= n`` (``n = high - low``) and rejects
    the words ``>= n``; rejected positions are redrawn.  Every accepted value is therefore
    exactly uniform on ``[0, n)``: there is no modulo bias, and each attempt succeeds with
    probability ``n / 2**b > 1/2``.  The object holds no state at all: it cannot be
    seeded, and nothing about past or future output can be learned from it.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "SecureRandom()"

    def bytes(self, length: int) -> bytes:
        """``length`` bytes from ``os.urandom``."""
        return os.urandom(int(length))

    def randbits(self, k: int) -> int:
        """A uniform Python ``int`` in ``[0, 2**k)`` (``secrets.randbits``)."""
        return secrets.randbits(k) if k > 0 else 0

    def randbelow(self, n: int) -> int:
        """A uniform Python ``int`` in ``[0, n)`` for any ``n >= 1`` (``secrets.randbelow``)."""
        return secrets.randbelow(n)

    def integers(
        self,
        low: int | np.ndarray,
        high: int | np.ndarray | None = None,
        size: int | tuple[int, ...] | None = None,
        dtype: npt.DTypeLike = np.int64,
    ) -> np.ndarray:
        """Uniform ``int64`` integers in ``[low, high)`` (``[0, low)`` if ``high`` is None).

        ``low`` and ``high`` broadcast against each other and against ``size`` like
        ``Generator.integers``; every ``high - low`` must be in ``[1, 2**63 - 1]``.  Only
        ``dtype=int64`` is supported.
        """
        if np.dtype(dtype) != np.int64:
            raise TypeError(f"SecureRandom.integers supports dtype int64 only; got {dtype!r}")
        if high is None:
            low, high = 0, low
        lo = np.asarray(low, dtype=np.int64)
        hi = np.asarray(high, dtype=np.int64)
        shape = (
            np.broadcast_shapes(lo.shape, hi.shape)
            if size is None
            else ((size,) if isinstance(size, int | numbers.Integral) else tuple(size))
        )
        lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
        if not np.all(hi > lo):
            raise ValueError("integers: high must be greater than low everywhere")
        n = (hi - lo).ravel()  # int64 arithmetic wraps: a range of 2**63 or more shows as <= 0
        if not np.all(n > 0):
            raise ValueError("integers: high - low must be below 2**63")
        # Smallest all-ones mask covering n - 1, by smearing the top bit downwards.
        mask = n - 1
        for shift in (1, 2, 4, 8, 16, 32):
            mask |= mask >> shift
        out = np.empty(n.shape, dtype=np.int64)
        todo = np.arange(n.size)
        while todo.size:
            words = self._words(todo.size, wide=bool(n[todo].max(initial=1) > 2**32))
            x = words & mask[todo]
            ok = x < n[todo]
            out[todo[ok]] = x[ok]
            todo = todo[~ok]
        return (out + lo.ravel()).reshape(shape)

    @staticmethod
    def _words(count: int, *, wide: bool) -> np.ndarray:
        """``count`` uniform words as ``int64``: 64-bit words (top bit cleared) or 32-bit ones."""
        if wide:
            raw = np.frombuffer(os.urandom(8 * count), dtype=np.uint64)
            return (raw >> np.uint64(1)).astype(np.int64)
        return np.frombuffer(os.urandom(4 * count), dtype=np.uint32).astype(np.int64)


RandomSource = np.random.Generator | SecureRandom
"""What :func:`resolve_rng` returns and what the samplers accept internally."""


def resolve_rng(rng: object) -> RandomSource:
    """Turn the ``rng=`` argument of a sampler into a source of randomness.

    Parameters
    ----------
    rng
        A :class:`numpy.random.Generator` (returned unchanged, so its state advances), a
        non-negative ``int`` seed (a fresh ``numpy.random.default_rng(seed)``: reproducible,
        *not* secure), or the string ``"secure"`` (a :class:`SecureRandom` reading
        ``os.urandom``: use this for real releases).

    Raises
    ------
    TypeError
        for anything else, including ``None``, ``bool``, floats and the legacy
        ``numpy.random.RandomState`` (randomness is always injected explicitly).
    ValueError
        for a string other than ``"secure"`` or a negative seed.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, SecureRandom):
        return rng
    if isinstance(rng, str):
        if rng == "secure":
            return SecureRandom()
        raise ValueError(
            f"rng must be a numpy.random.Generator, an int seed or 'secure'; got the string {rng!r}"
        )
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool | np.bool_):
        if rng < 0:
            raise ValueError(f"rng seed must be a non-negative int; got {int(rng)}")
        return np.random.default_rng(int(rng))
    hint = ""
    if rng is None:
        hint = " (None is not accepted: pass 'secure' for OS randomness or an int seed)"
    elif isinstance(rng, np.random.RandomState):
        hint = " (the legacy RandomState is not supported: use numpy.random.default_rng)"
    raise TypeError(
        f"rng must be a numpy.random.Generator, an int seed or 'secure'; "
        f"got {type(rng).__name__}{hint}"
    )


def random_bits(source: RandomSource, k: int) -> int:
    """A uniform Python ``int`` in ``[0, 2**k)``, ``k >= 0``, from either kind of source."""
    if k <= 0:
        return 0
    if isinstance(source, SecureRandom):
        return source.randbits(k)
    chunks = -(-k // 62)
    words = source.integers(0, 1 << 62, size=chunks, dtype=np.int64)
    value = 0
    for w in words.tolist():
        value = (value << 62) | w
    return value >> (62 * chunks - k)


def random_below(source: RandomSource, n: int) -> int:
    """A uniform Python ``int`` in ``[0, n)`` for any ``n >= 1``, without modulo bias.

    ``SecureRandom`` uses ``secrets.randbelow``; a ``Generator`` draws ``n.bit_length()``
    bits (62 at a time) and rejects values ``>= n`` (each try succeeds with prob. > 1/2).
    """
    if n < 1:
        raise ValueError(f"random_below needs n >= 1; got {n}")
    if isinstance(source, SecureRandom):
        return source.randbelow(n)
    k = (n - 1).bit_length()
    while True:
        x = random_bits(source, k)
        if x < n:
            return x
