"""Topologies: the model, builders, YAML I/O and summaries."""

from .ascend import atlas800_9000, atlas800t_a2, atlas900_a2_pod, atlas900_a3_superpod
from .builders import full_mesh, leaf_spine, ring, single_switch, tiered_mesh, torus
from .io import (
    BUILDERS,
    builtin_names,
    load_topology,
    save_topology,
    scale_parameter,
    topology_from_dict,
)
from .model import ROUTING_POLICIES, ExecutionDefaults, Topology
from .spec import LINK_TIERS, NODE_KINDS, LinkSpec, NpuSpec

__all__ = [
    "BUILDERS", "LINK_TIERS", "NODE_KINDS", "ROUTING_POLICIES", "ExecutionDefaults", "LinkSpec",
    "NpuSpec", "Topology", "atlas800_9000", "atlas800t_a2", "atlas900_a2_pod", "atlas900_a3_superpod", "builtin_names", "full_mesh", "leaf_spine",
    "load_topology", "ring", "save_topology", "scale_parameter", "single_switch", "tiered_mesh", "topology_from_dict", "torus",
]
