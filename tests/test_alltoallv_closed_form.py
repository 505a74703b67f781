"""AlltoAllV's closed forms use the send matrix exactly: on a full mesh analytical equals
event-driven for any matrix (issue 12: pairwise used each step's largest block, up to 0.8%
above the engine), and both modes return a Python float."""

import numpy as np
import pytest

import hcsim
from hcsim.algorithms.cost import AlphaBetaGamma
from hcsim.algorithms.pairwise import cost_alltoallv
from hcsim.algorithms.registry import make_args
from hcsim.topology.builders import full_mesh

ISSUE_MATRIX = [[459, 164, 82, 80, 404], [511, 177, 71, 445, 104], [511, 279, 233, 21, 105],
                [9, 173, 329, 300, 109], [488, 100, 294, 62, 365]]


def both(topo, algorithm, **kw):
    return [hcsim.simulate(topo, "alltoallv", 20603, algorithm, mode=m, **kw).time_s for m in ("des", "analytical")]


def test_issue_matrix_is_exact():
    des, ana = both(full_mesh(5, 10e9, 1e-6), "pairwise", root=1, send_matrix=ISSUE_MATRIX)
    assert type(des) is float and type(ana) is float
    assert ana == pytest.approx(des, rel=1e-12)
    # the 4 steps' largest blocks: 511 + 445 + 488 + 511 bytes, above the engine's 4.1615 us
    hccl_form = 4 * 1e-6 + (511 + 445 + 488 + 511) / 10e9
    assert ana < hccl_form


@pytest.mark.parametrize("algorithm", ["pairwise", "mesh"])
def test_random_matrices_are_exact(algorithm):
    rng = np.random.default_rng(12)
    for _ in range(40):
        p = int(rng.integers(2, 11))
        matrix = rng.choice([0, 1, 513, 10**5], size=(p, p)) * rng.integers(0, 3, size=(p, p))
        matrix[0, 1 % p] += 1  # never all zeros
        kw = dict(send_matrix=matrix.tolist(), step_overhead_s=float(rng.choice([0.0, 1.02e-6, 2e-5])),
                  launch_overhead_s=float(rng.choice([0.0, 1e-5])))
        des, ana = both(full_mesh(p, 10e9, float(rng.choice([0.0, 1e-6]))), algorithm, **kw)
        assert type(ana) is float
        assert ana == pytest.approx(des, rel=1e-12), (p, kw)


def test_uniform_matrix_is_hccls_form():
    p, block = 6, 1000
    args = make_args("alltoallv", p, p * block, send_matrix=tuple((block,) * p for _ in range(p)))
    m = AlphaBetaGamma(2e-6, 1e-10, 0.0)
    assert cost_alltoallv(args, m) == pytest.approx((p - 1) * (2e-6 + block * 1e-10), rel=1e-15)
