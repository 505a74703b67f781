"""Message-size regimes: a transport's per-message cost that depends on the message's size.

MPI libraries switch protocol with the message size: below the eager limit a message
goes at once, above it a rendezvous (request, clear-to-send, then the data) precedes it.
Each regime has its own fixed cost and its own rate. SimGrid's SMPI models this with
piecewise ``smpi/lat-factor`` and ``smpi/bw-factor`` tables keyed by message size
(https://simgrid.org/doc/latest/Configuring_SimGrid.html#smpi-lat-factor); here a regime
adds ``overhead_s`` to each transfer's start and makes it cost ``nbytes / efficiency`` of
every resource it crosses (so a less efficient regime also takes more of a shared link).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import bad_value


@dataclass(frozen=True)
class MessageRegimes:
    """Piecewise per-message cost by message size.

    Attributes
    ----------
    from_bytes : tuple of int
        Where each regime starts, ascending, the first 0: a message of ``n`` bytes is in
        the last regime whose ``from_bytes <= n``.
    overhead_s : tuple of float
        Seconds added to each transfer's start in that regime (on top of the step overhead).
    efficiency : tuple of float
        The fraction of its resources' rate a transfer in that regime achieves: it is
        charged ``nbytes / efficiency`` bytes.
    pair_limit : tuple of bool or None
        Whether the NPUs' pair-exchange limit (``NpuSpec.exchange_Bps``) holds in that
        regime (None: in every regime). Open MPI's TCP transport overlaps the two
        directions of an eager exchange but not of a rendezvous one, whose clear-to-send
        queues behind the peer's own data.

    Examples
    --------
    >>> r = MessageRegimes(from_bytes=(0, 65536), overhead_s=(0.0, 1e-3), efficiency=(1.0, 0.5))
    >>> extra, charged = r.costs(np.array([1000.0, 65536.0]))
    >>> extra.tolist(), charged.tolist()
    ([0.0, 0.001], [1000.0, 131072.0])
    """

    from_bytes: tuple = (0,)
    overhead_s: tuple = (0.0,)
    efficiency: tuple = (1.0,)
    pair_limit: tuple | None = None

    def __post_init__(self):
        k = len(self.from_bytes)
        if self.pair_limit is not None and (len(self.pair_limit) != k
                                            or not all(isinstance(v, (bool, np.bool_)) for v in self.pair_limit)):
            raise bad_value("message_regimes.pair_limit", self.pair_limit, f"{k} booleans, one per regime")
        if k == 0 or len(self.overhead_s) != k or len(self.efficiency) != k:
            raise bad_value("message_regimes", f"{k} starts, {len(self.overhead_s)} overheads, "
                            f"{len(self.efficiency)} efficiencies", "one of each per regime, at least one regime")
        if self.from_bytes[0] != 0:
            raise bad_value("message_regimes[0].from_bytes", self.from_bytes[0], "0 (the first regime starts at 0)")
        for i, b in enumerate(self.from_bytes):
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 0:
                raise bad_value(f"message_regimes[{i}].from_bytes", b, "an integer number of bytes >= 0")
            if i and b <= self.from_bytes[i - 1]:
                raise bad_value(f"message_regimes[{i}].from_bytes", b, f"more than the regime before ({self.from_bytes[i - 1]})")
        for i, v in enumerate(self.overhead_s):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise bad_value(f"message_regimes[{i}].overhead_s", v, "a finite number of seconds >= 0")
        for i, v in enumerate(self.efficiency):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise bad_value(f"message_regimes[{i}].efficiency", v, "a finite number > 0")

    @property
    def trivial(self) -> bool:
        """True when no regime adds a cost (the model without regimes)."""
        return (all(v == 0 for v in self.overhead_s) and all(e == 1 for e in self.efficiency)
                and (self.pair_limit is None or all(self.pair_limit)))

    def pair_limited(self, nbytes) -> np.ndarray:
        """Whether the pair-exchange limit holds for each message size."""
        if self.pair_limit is None:
            return np.ones(np.shape(nbytes), dtype=bool)
        return np.asarray(self.pair_limit, dtype=bool)[self.regime_of(nbytes)]

    def regime_of(self, nbytes) -> np.ndarray:
        """Index of the regime of each message size."""
        return np.searchsorted(np.asarray(self.from_bytes), np.asarray(nbytes, dtype=float), side="right") - 1

    def costs(self, nbytes) -> tuple[np.ndarray, np.ndarray]:
        """``(overhead_s, charged_bytes)`` for each message size in ``nbytes``."""
        n = np.asarray(nbytes, dtype=float)
        k = self.regime_of(n)
        return np.asarray(self.overhead_s, float)[k], n / np.asarray(self.efficiency, float)[k]
