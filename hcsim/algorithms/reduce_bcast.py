"""Reduce-broadcast AllReduce: every rank reduces its whole buffer into rank 0, which then
gives the result back to every rank; two steps of the whole buffer.

What HCCL runs for a small op-by-op AllReduce inside one 910B server (hcomm
``src/algorithm/base/alg_template/temp_all_reduce/all_reduce_reduce_broadcast.cc``,
``AllReduceReduceBcast``, the template ``TEMPLATE_ALL_REDUCE_REDUCE_BCAST`` that
``CollAllReduceMeshSmallCountExecutor::KernelRun`` takes when HCCL_DETERMINISTIC is off;
selection in :func:`hcsim.hccl.selection.select_algorithm`):

* reduce (``RunReduce``): rank 0 copies its input into its CCL output buffer; every other rank
  writes its whole input into rank 0's output buffer with an SDMA inline reduce
  (``HcclReduceAsync`` to the peer's remote output memory), all p-1 at once, rank 0 waiting on
  one stream per peer (``RunAllReduceBDReduceReceive``);
* broadcast (``RunBroadcast``): every other rank reads rank 0's output buffer, the whole
  result, into its own output (``RunAllReduceBDMemcpyReceive``), all at once.

The local copies at rank 0 are not modelled (hcsim models no local copies). Rank 0 is the
root: HCCL's is local rank 0 of the server's mesh communicator.

Cost (Hockney, as :mod:`.star`'s Reduce plus Broadcast): 2a + 2 n beta + (p-1) n gamma
(gamma 0 where the links reduce inline, as HCCS's SDMA does).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, block_bytes, make_step

SOURCE = ("hcomm src/algorithm/base/alg_template/temp_all_reduce/all_reduce_reduce_broadcast.cc "
          "(AllReduceReduceBcast); coll_all_reduce_mesh_small_count_executor.cc")
ROOT = 0
"""The rank everything is reduced into: local rank 0 of HCCL's level-0 mesh communicator."""


def _reduce_bcast(args: CollectiveArgs) -> Schedule:
    p, n = args.p, args.nbytes
    space = ChunkSpace(block_bytes(args))  # one chunk: the whole buffer
    others = np.arange(p, dtype=np.int64)
    others = others[others != ROOT]
    root = np.full(p - 1, ROOT, dtype=np.int64)
    steps = [make_step(others, root, n, True, 0, 1),   # inline-reduce writes into rank 0
             make_step(root, others, n, False, 0, 1)]  # every rank reads the result back
    return Schedule(args, space.count, steps, space.chunk_bytes, "reduce_bcast")


def cost_allreduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    """Closed form: ``2 alpha + 2 n beta + (p-1) n gamma`` seconds.

    Examples
    --------
    >>> from hcsim.algorithms import AlphaBetaGamma, CollectiveArgs
    >>> round(cost_allreduce(CollectiveArgs("allreduce", 8, 1000), AlphaBetaGamma(1e-6, 1e-9)) * 1e6, 3)
    4.0
    """
    n = args.nbytes
    return 2 * m.alpha_s + 2 * n * m.beta_s_per_B + (args.p - 1) * n * m.gamma_s_per_B


register(AlgorithmSpec("reduce_bcast", "allreduce", _reduce_bcast, cost_allreduce,
                       "every rank reduces its buffer into rank 0, which sends the result back: 2 steps "
                       "of the whole buffer (HCCL's 910B small-count AllReduce)", SOURCE))
