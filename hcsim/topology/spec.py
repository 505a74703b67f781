"""Frozen specs of the things a topology is made of, with units in the field names.

Every spec checks the type and the range of each field when it is made (a wrong type is the
same one-line :class:`~hcsim.errors.ConfigError` as a wrong value), and stores numbers as
plain Python ``int`` / ``float`` (numpy scalars are converted), so specs hash, compare and
save to YAML alike whatever made them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..compute import ComputeSpec
from ..errors import bad_value, is_int, is_real
from ..limits import MAX_NODES

NODE_KINDS = ("npu", "switch", "nic", "pcie")
"""Kinds of node a topology may hold; only NPUs run ranks."""

LINK_TIERS = ("hccs", "pcie", "roce", "ub", "sio", "eth", "ib", "nvlink", "generic")
"""Link technologies a link may be tagged with (reports group links by tier)."""

MIN_BANDWIDTH_Bps = 1e-20
MAX_BANDWIDTH_Bps = 1e30
"""Range of every bandwidth (links, NPU endpoints, reduction), in bytes per second. Far
outside anything real on both sides (calibration may scale a 1 MB/s link by e^-40), but a
1 PiB message over it still takes a finite, normal number of seconds."""

MAX_TIME_s = 1e20
"""Largest latency or overhead, in seconds: sums of millions of them stay finite."""


def real(field: str, value, allowed: str) -> float:
    """``value`` as a float if it is a real number (int, float, numpy scalar; not a bool),
    else the one-line error ``field = value: allowed``. NaN and inf pass through."""
    if not is_real(value):
        raise bad_value(field, value, allowed)
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):  # 10**400, an odd Real subclass
        raise bad_value(field, value, allowed) from None


def integer(field: str, value, minimum: int = 0, maximum: int | None = None, what: str = "an integer") -> int:
    """``value`` as an int if it is an integer (int or numpy integer, not a bool) within
    ``[minimum, maximum]``, else a one-line error."""
    allowed = f"{what} >= {minimum}" if maximum is None else f"{what} from {minimum} to {maximum:,}"
    if not is_int(value):
        raise bad_value(field, value, allowed)
    v = int(value)
    if v < minimum or (maximum is not None and v > maximum):
        raise bad_value(field, value, allowed)
    return v


def rate(field: str, value, allow_none: bool = False, allow_inf: bool = False) -> float | None:
    """A bandwidth in B/s: a real number from MIN_BANDWIDTH_Bps to MAX_BANDWIDTH_Bps
    (``inf`` too if ``allow_inf``; None if ``allow_none``)."""
    if value is None and allow_none:
        return None
    allowed = (f"a number (int or float) of B/s from {MIN_BANDWIDTH_Bps:g} to {MAX_BANDWIDTH_Bps:g}"
               + (", or inf (no limit)" if allow_inf else "") + (", or None (no limit)" if allow_none else ""))
    v = real(field, value, allowed)
    if v == math.inf and allow_inf:
        return v
    if not MIN_BANDWIDTH_Bps <= v <= MAX_BANDWIDTH_Bps:  # False for NaN
        raise bad_value(field, value, allowed)
    return v


def seconds(field: str, value) -> float:
    """A latency or overhead: a real number of seconds from 0 to MAX_TIME_s."""
    allowed = f"a number (int or float) of seconds from 0 to {MAX_TIME_s:g}"
    v = real(field, value, allowed)
    if not 0 <= v <= MAX_TIME_s:
        raise bad_value(field, value, allowed)
    return v + 0.0  # -0.0 -> 0.0


def flag(field: str, value) -> bool:
    """A boolean (Python or numpy), as a Python bool."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise bad_value(field, value, "true or false")
    return bool(value)


def choice(field: str, value, options, note: str = "") -> str:
    """One of the strings ``options``."""
    if not isinstance(value, str) or value not in options:
        raise bad_value(field, value, "one of " + ", ".join(options) + note)
    return value


def _set(obj, name, value):
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class LinkSpec:
    """One direction of a link.

    Attributes
    ----------
    bandwidth_Bps : float
        Capacity in bytes per second, shared max-min fairly by the flows crossing it
        (from :data:`MIN_BANDWIDTH_Bps` to :data:`MAX_BANDWIDTH_Bps`).
    latency_s : float
        Time from the last byte leaving to it arriving (propagation plus fixed per-hop cost),
        from 0 to :data:`MAX_TIME_s`.
    tier : str
        Technology, one of :data:`LINK_TIERS`.
    inline_reduce : bool
        The link's DMA engine reduces while it writes (SDMA on HCCS does), so a reducing
        transfer over it pays no separate reduction time at the destination.

    Examples
    --------
    >>> LinkSpec(25e9, 1e-6, "roce").bandwidth_Bps
    25000000000.0
    """

    bandwidth_Bps: float
    latency_s: float = 0.0
    tier: str = "generic"
    inline_reduce: bool = False

    def __post_init__(self):
        _set(self, "bandwidth_Bps", rate("bandwidth_Bps", self.bandwidth_Bps))
        _set(self, "latency_s", seconds("latency_s", self.latency_s))
        choice("tier", self.tier, LINK_TIERS)
        _set(self, "inline_reduce", flag("inline_reduce", self.inline_reduce))


@dataclass(frozen=True)
class NpuSpec:
    """An NPU: where it sits and what its endpoint can do.

    Attributes
    ----------
    server, pod : int
        Coordinates: server index and pod (supernode) index, from 0 to ``MAX_NODES``.
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
    compute : ComputeSpec or None
        What the NPU computes (peak FLOP/s per data type, HBM bandwidth: a roofline,
        :class:`hcsim.compute.ComputeSpec`), for workloads' compute tasks; None: not given.
        Collectives do not use it.

    Examples
    --------
    >>> NpuSpec(server=1, local_index=3).reduce_Bps
    inf
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
    compute: ComputeSpec | None = None

    def __post_init__(self):
        for name in ("server", "pod", "local_index"):
            _set(self, name, integer(name, getattr(self, name), 0, MAX_NODES))
        # the bandwidths keep the names their errors have always had (reduce_bandwidth, ...)
        _set(self, "reduce_Bps", rate("reduce_bandwidth", self.reduce_Bps, allow_inf=True))
        for key in ("injection", "ejection", "exchange", "engine"):
            _set(self, f"{key}_Bps", rate(f"{key}_bandwidth", getattr(self, f"{key}_Bps"), allow_none=True))
        _set(self, "half_duplex", flag("half_duplex", self.half_duplex))
        if self.half_duplex and self.injection_Bps is None and self.ejection_Bps is None:
            raise bad_value("half_duplex", True, "needs injection or ejection bandwidth to share")
        if self.compute is not None and not isinstance(self.compute, ComputeSpec):
            raise bad_value("compute", self.compute, "an hcsim.compute.ComputeSpec, or None")

    @property
    def duplex_Bps(self) -> float | None:
        """Capacity of the shared engine of a half-duplex NPU."""
        return self.injection_Bps if self.injection_Bps is not None else self.ejection_Bps
