"""Frozen specs of the things a topology is made of, with units in the field names."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import bad_value

NODE_KINDS = ("npu", "switch", "nic", "pcie")
"""Kinds of node a topology may hold; only NPUs run ranks."""

LINK_TIERS = ("hccs", "pcie", "roce", "ub", "sio", "eth", "ib", "nvlink", "generic")
"""Link technologies a link may be tagged with (reports group links by tier)."""


def _positive(field: str, value, allow_none: bool = False, allow_inf: bool = False):
    if value is None and allow_none:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value <= 0
            or (math.isinf(value) and not allow_inf)):
        raise bad_value(field, value, "a number > 0" + ("" if allow_inf else ", finite"))


def _non_negative(field: str, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise bad_value(field, value, "a finite number >= 0")


@dataclass(frozen=True)
class LinkSpec:
    """One direction of a link.

    Attributes
    ----------
    bandwidth_Bps : float
        Capacity in bytes per second, shared max-min fairly by the flows crossing it.
    latency_s : float
        Time from the last byte leaving to it arriving (propagation plus fixed per-hop cost).
    tier : str
        Technology, one of :data:`LINK_TIERS`.
    inline_reduce : bool
        The link's DMA engine reduces while it writes (SDMA on HCCS does), so a reducing
        transfer over it pays no separate reduction time at the destination.
    """

    bandwidth_Bps: float
    latency_s: float = 0.0
    tier: str = "generic"
    inline_reduce: bool = False

    def __post_init__(self):
        _positive("bandwidth", self.bandwidth_Bps)
        _non_negative("latency", self.latency_s)
        if self.tier not in LINK_TIERS:
            raise bad_value("tier", self.tier, "one of " + ", ".join(LINK_TIERS))


@dataclass(frozen=True)
class NpuSpec:
    """An NPU: where it sits and what its endpoint can do.

    Attributes
    ----------
    server, pod : int
        Coordinates: server index and pod (supernode) index.
    local_index : int
        Device index inside its server (HCCL's inter-server traffic pairs same-index NPUs).
    reduce_Bps : float
        Rate at which the NPU reduces received data when the link did not reduce inline
        (default infinite: reduction is free unless a topology says otherwise).
    injection_Bps, ejection_Bps : float or None
        Limits on the total rate the NPU can send / receive over all its links (None: no limit).
    half_duplex : bool
        Sending and receiving share one engine: their rates together stay within
        ``injection_Bps`` (or ``ejection_Bps`` if only that is set).
    exchange_Bps : float or None
        This NPU's exchanges -- its traffic with peers that send back to it in the same
        step -- stay within this, both directions and all such peers together (Open MPI's
        TCP transport does not overlap the directions of a rendezvous exchange: each
        clear-to-send queues behind the data going the same way), while a send to one peer
        and a receive from another still overlap. None: no such limit.
    engine_Bps : float or None
        What the NPU sends and receives together, over all peers (its transport's duplex
        overlap: between ``max(injection, ejection)`` for none and their sum for full).
    """

    server: int = 0
    pod: int = 0
    local_index: int = 0
    reduce_Bps: float = math.inf
    injection_Bps: float | None = None
    ejection_Bps: float | None = None
    half_duplex: bool = False
    exchange_Bps: float | None = None
    engine_Bps: float | None = None

    def __post_init__(self):
        for name in ("server", "pod", "local_index"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise bad_value(name, v, "an integer >= 0")
        _positive("reduce_bandwidth", self.reduce_Bps, allow_inf=True)
        _positive("injection_bandwidth", self.injection_Bps, allow_none=True)
        _positive("ejection_bandwidth", self.ejection_Bps, allow_none=True)
        _positive("exchange_bandwidth", self.exchange_Bps, allow_none=True)
        _positive("engine_bandwidth", self.engine_Bps, allow_none=True)
        if self.half_duplex and self.injection_Bps is None and self.ejection_Bps is None:
            raise bad_value("half_duplex", True, "needs injection or ejection bandwidth to share")

    @property
    def duplex_Bps(self) -> float | None:
        """Capacity of the shared engine of a half-duplex NPU."""
        return self.injection_Bps if self.injection_Bps is not None else self.ejection_Bps
