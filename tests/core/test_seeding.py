"""Seed handling: named sub-streams are reproducible, independent and never mutate their parent."""

import numpy as np
import pytest

from planted.seeding import as_seed_sequence, describe, generator, substream


def test_substreams_equal_spawned_children_and_do_not_mutate():
    parent = np.random.SeedSequence(42)
    first = generator(parent, 3).random(5)
    second = generator(parent, 3).random(5)
    np.testing.assert_array_equal(first, second)
    assert parent.n_children_spawned == 0
    spawned = np.random.SeedSequence(42).spawn(4)[3]
    np.testing.assert_array_equal(first, np.random.Generator(np.random.PCG64(spawned)).random(5))
    assert not np.array_equal(first, generator(parent, 2).random(5))


def test_nested_keys_and_description_rebuild_the_sequence():
    seq = substream(as_seed_sequence(7), 1, 2)
    info = describe(seq)
    assert info == {"entropy": 7, "spawn_key": [1, 2]}
    rebuilt = np.random.SeedSequence(info["entropy"], spawn_key=tuple(info["spawn_key"]))
    assert rebuilt.generate_state(4).tolist() == seq.generate_state(4).tolist()


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True])
def test_bad_seeds_are_rejected(bad):
    with pytest.raises((TypeError, ValueError)):
        as_seed_sequence(bad)
