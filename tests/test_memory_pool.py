"""The output pool: large outputs come back from recently freed blocks, the newest are kept
when it is full, and it never holds more than its limit."""
import numpy as np
import pytest

import tfcompat as T
from tfcompat import _memory

MIB = 2 ** 20


@pytest.fixture
def pool():
    T.release_memory()
    T.set_memory_pool_limit(1024 * MIB)
    yield
    T.release_memory()
    T.set_memory_pool_limit(1024 * MIB)


def test_a_freed_output_is_handed_out_again(pool):
    before = T.memory_pool_stats()
    a = _memory.empty(2 * MIB, np.uint8)
    del a
    assert T.memory_pool_stats()["cached_bytes"] >= 2 * MIB
    b = _memory.empty(2 * MIB, np.uint8)
    after = T.memory_pool_stats()
    assert after["hits"] == before["hits"] + 1
    assert after["misses"] == before["misses"] + 1
    b[:] = 7  # the memory is usable
    assert int(b.sum()) == 7 * 2 * MIB


def test_small_arrays_bypass_the_pool(pool):
    before = T.memory_pool_stats()
    a = _memory.empty(1000, np.float32)
    del a
    assert T.memory_pool_stats() == before


def test_full_pool_keeps_the_newest_blocks(pool):
    # nine distinct sizes, freed oldest first: the pool (8 slots) keeps the last eight
    arrays = [_memory.empty((k + 1) * MIB, np.uint8) for k in range(9)]
    while arrays:
        arrays.pop(0)
    stats = T.memory_pool_stats()
    assert stats["cached_bytes"] >= sum(k * MIB for k in range(2, 10))
    assert stats["cached_bytes"] < sum(k * MIB for k in range(1, 10))
    hits = stats["hits"]
    newest = _memory.empty(9 * MIB, np.uint8)  # a hit: the newest block was kept
    assert T.memory_pool_stats()["hits"] == hits + 1
    del newest


def test_limit_is_respected_and_zero_disables(pool):
    T.set_memory_pool_limit(5 * MIB)
    a, b = _memory.empty(3 * MIB, np.uint8), _memory.empty(3 * MIB, np.uint8)
    del a, b
    assert T.memory_pool_stats()["cached_bytes"] <= 5 * MIB
    T.set_memory_pool_limit(0)
    assert T.memory_pool_stats()["cached_bytes"] == 0
    c = _memory.empty(3 * MIB, np.uint8)
    del c
    assert T.memory_pool_stats()["cached_bytes"] == 0


def test_release_memory_frees_everything(pool):
    a = _memory.empty(4 * MIB, np.uint8)
    del a
    assert T.release_memory() >= 4 * MIB
    assert T.memory_pool_stats()["cached_bytes"] == 0


def test_limit_argument_is_checked(pool):
    with pytest.raises(ValueError, match="nbytes"):
        T.set_memory_pool_limit(-1)
    with pytest.raises(TypeError, match="nbytes"):
        T.set_memory_pool_limit(1.5)
    T.set_memory_pool_limit(2 ** 70)      # was an OverflowError: a cap that caps nothing
    assert T.memory_pool_stats()["limit_bytes"] == 2 ** 63


@pytest.mark.parametrize("start,new", [(100, 300), (300, 100), (100, MIB), (MIB, 100),
                                       (MIB, 3 * MIB), (3 * MIB, MIB)])
def test_in_place_resize_keeps_the_data(pool, start, new):
    # ndarray.resize reallocates through the array's own handler (ours): the bytes both sizes
    # share must survive, small (malloc) and pooled blocks alike, growing and shrinking
    a = _memory.empty(start, np.uint8)
    a[:] = np.arange(start) % 251
    a.resize(new, refcheck=False)
    keep = min(start, new)
    assert np.array_equal(a[:keep], np.arange(keep) % 251)
    a[:] = 1  # the whole new size is writable
    assert int(a.sum()) == new


@pytest.mark.parametrize("nbytes", [1, 100, 4096 + 8, MIB - 1, 3 * MIB + 24])
def test_every_array_starts_on_a_cache_line(pool, nbytes):
    # the conv takes its filter taps from here, so that each vector load of them lies in one
    # cache line
    arrays = [_memory.empty(nbytes, np.uint8) for _ in range(4)]
    assert all(a.ctypes.data % 64 == 0 for a in arrays)
