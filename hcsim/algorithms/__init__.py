"""Algorithms: one module per algorithm, registered per collective.

Importing this package registers ring, mesh, hd (recursive halving-doubling), tree
(binomial) and pairwise.
"""

from . import hd, mesh, pairwise, ring, tree  # noqa: F401  (registration side effect)
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
