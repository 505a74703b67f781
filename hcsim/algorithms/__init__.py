"""Algorithms: one module per algorithm, registered per collective.

Importing this package registers ring, chain (the pipelined chain broadcast and reduce), mesh, hd (recursive halving-doubling), nhr and nb
(HCCL's nonuniform algorithms), star, double_ring, multiring (k rings of coprime strides), railring (one ring per
local index, each crossing servers on its own rail), tree (binomial), bmtree (Open MPI's
binomial broadcast), rd (recursive doubling AllReduce), rabenseifner (Open MPI's
halving order), pairwise, and reduce_bcast (HCCL's 910B small-count
AllReduce), nvls (in-network AllReduce through an NVLink SHARP switch).
"""

from . import (  # noqa: F401
    ahc,
    bmtree,
    bruck,
    chain,
    double_ring,
    hd,
    hierarchy,
    mesh,
    multiring,
    neighbor,
    nonuniform,
    nvls,
    pairwise,
    pipeline,
    rabenseifner,
    railring,
    rd,
    reduce_bcast,
    ring,
    star,
    tree,
)
from .cost import AlphaBetaGamma
from .registry import (
    REGISTRY,
    AlgorithmSpec,
    algorithms_for,
    build_schedule,
    get_algorithm,
    register,
)
from .schedule import (
    BUSBW_FACTOR,
    COLLECTIVES,
    CollectiveArgs,
    LazySteps,
    Schedule,
    Step,
    concat_steps,
    make_step,
    split_bytes,
)

__all__ = [
    "BUSBW_FACTOR", "COLLECTIVES", "REGISTRY", "AlgorithmSpec", "AlphaBetaGamma", "CollectiveArgs",
    "LazySteps", "Schedule", "Step", "algorithms_for", "build_schedule", "concat_steps",
    "get_algorithm", "make_step", "register", "split_bytes",
]
