"""Double ring: two rings in opposite directions, each carrying half of every block at once.

Ring 0 runs r -> r+1 over the first half of each block, ring 1 runs r -> r-1 over the
second half, in the same steps: the multi-ring schedule with strides 1 and p-1
(:func:`hcsim.algorithms.multiring.rings_schedule`). HCCL uses it inside A3 nodes (ring 1 is ring 0 reversed;
hcomm coll_comm_executor.cc, MutliSegSlicePrepare) and on 910A's multiple 8-card rings.

Costs (b = n/p; two disjoint links per step, so each ring costs half a block):
RS (p-1)(a + (b/2) beta + b gamma) (the receiver reduces both halves); AG (p-1)(a + (b/2) beta); AR their sum. With p = 2 both rings
share the single link between the ranks, so the bandwidth term is a whole block.
"""

from __future__ import annotations

from .multiring import register_rings

SOURCE = "hcomm coll_comm_executor.cc (double ring); FACTS.md s1"


# ring 0 r -> r+1 over the first half of each block, ring 1 r -> r-1 (stride p-1) over the second; with p = 2 both
# rings share the single link between the ranks, so a step costs a whole block
register_rings("double_ring", lambda p: (1, p - 1), lambda p: 1 if p == 2 else 2,
               "two opposite rings, half of every block each", SOURCE)
