"""``benchmarks/zoo.py --unseen SEED``: shapes drawn at random, reproducible from the seed alone."""

import numpy as np

from benchmarks.zoo import _dataset_by_name, unseen_datasets


def test_unseen_shapes_are_drawn_from_the_seed_and_cover_the_zoo_ranges():
    first, again, other = unseen_datasets(11), unseen_datasets(11), unseen_datasets(12)
    assert len(first) == 12
    for a, b in zip(first, again, strict=True):
        assert a.name == b.name and np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert [s.name for s in first] != [s.name for s in other]
    kinds = {s.name.split("-")[2] for s in first}
    assert {"blobs", "aniso", "imbalanced", "quantiles", "regression", "friedman", "moons"} <= kinds
    for s in first:
        n, d = s.X.shape
        assert 150 <= n <= 20000 and 2 <= d <= 40
        assert np.all(np.isfinite(s.X)) and np.all(s.low < s.high)
        assert s.task in ("class", "reg")


def test_a_worker_rebuilds_an_unseen_set_by_its_name():
    s = unseen_datasets(11)[5]
    t = _dataset_by_name(s.name)
    assert t.name == s.name and np.array_equal(t.X, s.X)
    assert _dataset_by_name("iris").X.shape == (150, 4)
