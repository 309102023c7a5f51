"""The sensitivity of a coarser level against brute force (sensitivity.py, *Coarser levels*)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpgauss.release.sensitivity import count_l2, level_count_l2


def _brute(parents: list[int], b: int | None, k: int | None, c: int | None) -> int:
    """max ‖A n‖₂² over every integer contribution n the bounds allow."""
    d = len(parents)
    C = c if b is None else (b if c is None else min(c, b))
    assert C is not None
    B = b if b is not None else C * d
    K = d if k is None else min(k, d)
    best = 0
    for n in itertools.product(range(C + 1), repeat=d):
        if sum(n) > B or sum(1 for x in n if x) > K:
            continue
        m = np.bincount(parents, weights=n, minlength=max(parents) + 1)
        best = max(best, round(float(np.dot(m, m))))
    return best


TREES = [
    [0, 0, 0, 0, 0],  # a total
    [0, 0, 1, 1, 2],  # irregular
    [0, 0, 1, 1],  # uniform pairs
    [0, 1, 2, 3],  # the identity: the fine level itself
    [0, 0, 0, 1, 1, 1],  # uniform triples
    [0, 1, 1, 1, 1],  # one big parent, one small
]
BOUNDS = [
    (b, k, c)
    for b in (None, 1, 2, 3, 5)
    for k in (None, 1, 2, 3)
    for c in (None, 1, 2, 3)
    if b is not None or c is not None
]


@pytest.mark.parametrize("parents", TREES)
def test_bound_is_valid_and_tight_on_uniform_trees(parents: list[int]) -> None:
    sizes = np.bincount(parents)
    s = int(sizes.max())
    tight = 0
    for b, k, c in BOUNDS:
        brute = _brute(parents, b, k, c)
        bound = level_count_l2(
            max_records_per_unit=b,
            max_keys_per_unit=k,
            max_records_per_key=c,
            domain_size=len(parents),
            max_children=s,
        )
        assert bound * bound >= brute * (1 - 1e-12), (parents, b, k, c, bound, brute)
        if np.all(sizes == s):  # uniform: every parent can reach the cap, so it is attained
            assert bound * bound == pytest.approx(brute, rel=1e-12), (parents, b, k, c)
            tight += 1
    if np.all(sizes == s):
        assert tight == len(BOUNDS)


def test_identity_tree_is_the_fine_sensitivity() -> None:
    for b, k, c in BOUNDS:
        fine, _ = count_l2(
            max_records_per_unit=b, max_keys_per_unit=k, max_records_per_key=c, domain_size=4
        )
        lvl = level_count_l2(
            max_records_per_unit=b,
            max_keys_per_unit=k,
            max_records_per_key=c,
            domain_size=4,
            max_children=1,
        )
        assert lvl == fine


def test_coarse_is_not_the_fine_one() -> None:
    # b = 5 records at 5 junctions: the fine vector moves by √5, its neighbourhood by 5.
    fine, _ = count_l2(max_records_per_unit=5, max_records_per_key=1, domain_size=100)
    coarse = level_count_l2(
        max_records_per_unit=5, max_records_per_key=1, domain_size=100, max_children=20
    )
    assert fine == pytest.approx(5**0.5)
    assert coarse == 5.0
    # k keys × c records: ≤ k·c at a total
    assert (
        level_count_l2(max_keys_per_unit=3, max_records_per_key=2, domain_size=50, max_children=50)
        == 6.0
    )


def test_spread_is_the_l1_bound() -> None:
    assert (
        level_count_l2(max_records_per_unit=4, domain_size=10, max_children=1, spread=True) == 4.0
    )
    assert (
        level_count_l2(
            max_keys_per_unit=2, max_records_per_key=3, domain_size=10, max_children=1, spread=True
        )
        == 6.0
    )


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_children must be an integer >= 1"):
        level_count_l2(max_records_per_unit=1, domain_size=3, max_children=0)
    with pytest.raises(ValueError, match="no finite sensitivity"):
        level_count_l2(max_keys_per_unit=1, domain_size=3, max_children=1)
