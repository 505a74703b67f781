"""The neighbour exchange allgather's lazily built steps are the schedule its definition gives:
every rank forwards the pair of blocks it received last (built here step by step, by following
each pair to the rank it was sent to), and every rank ends with every block."""

import numpy as np
import pytest

from hcsim.algorithms import build_schedule


def _by_following(p: int) -> list[np.ndarray]:
    """The first block of the pair each rank sends at steps 1 .. p/2 - 1, by following the pairs."""
    r = np.arange(p)
    even = r % 2 == 0
    first, second = np.where(even, (r + 1) % p, (r - 1) % p), np.where(even, (r - 1) % p, (r + 1) % p)
    held, out = r - r % 2, []
    for i in range(1, p // 2):
        out.append(held.copy())
        dst = second if i % 2 else first
        moved = np.empty_like(held)
        moved[dst] = held  # rank dst now holds what its sender sent
        held = moved
    return out


@pytest.mark.parametrize("p", [2, 4, 6, 8, 10, 12, 16, 30, 64, 100])
def test_each_step_forwards_the_pair_received_last(p):
    n = 1000 * p + 7  # uneven blocks: every chunk's bytes checked too
    steps = list(build_schedule("allgather", "ne", p, n).steps)
    assert len(steps) == p // 2
    for step, held in zip(steps[1:], _by_following(p), strict=True):
        assert step.chunk_lo.tolist() == held.tolist() and (step.chunk_hi - step.chunk_lo == 2).all()
    has = np.eye(p, dtype=bool)  # rank x block
    for step in steps:
        for s, d, lo, hi in zip(step.src.tolist(), step.dst.tolist(), step.chunk_lo.tolist(), step.chunk_hi.tolist(),
                                strict=True):
            assert has[s, lo:hi].all()  # a rank sends only what it holds
            has[d, lo:hi] = True
    assert has.all()
