"""Placement of tensor, pipeline, data and expert parallelism on world ranks.

A :class:`Layout` gives every world rank a coordinate ``(tp, pp, dp)``. ``order`` lists
the dimensions from the innermost (consecutive ranks) outwards; the default
``("tp", "pp", "dp")`` is Megatron-LM's: a tensor-parallel group is ``tp`` consecutive ranks
(inside one server when ``tp`` divides the server's NPUs, where its every-layer traffic
stays on HCCS), then pipeline stages, then data-parallel replicas. Expert parallelism
splits each data-parallel group into groups of ``ep`` replicas (Megatron-LM's
expert-model-parallel group; the replicas with the same position in their expert group form
the expert-data-parallel group that reduces the experts' gradients). ``order`` may place
``ep`` itself (``"tp-ep-dp-pp"``: expert groups are ``ep`` ranks ``tp`` apart, then
``dp`` counts the expert groups); left out, it sits just inside ``dp`` (expert groups are
consecutive replicas). Replica ``k`` of a data-parallel group is at position ``k % ep`` of
expert group ``k // ep``.

Examples
--------
>>> lay = Layout(tp=2, pp=2, dp=2)
>>> lay.tp_groups()
[(0, 1), (2, 3), (4, 5), (6, 7)]
>>> lay.dp_groups()
[(0, 4), (1, 5), (2, 6), (3, 7)]
>>> lay.pp_groups()
[(0, 2), (1, 3), (4, 6), (5, 7)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import bad_value, is_int
from .graph import Communicator

DIMENSIONS = ("tp", "pp", "dp")
"""The dimensions ``order`` arranges."""


def _degree(field_name: str, value) -> int:
    if not is_int(value) or not 1 <= value <= 1 << 20:
        raise bad_value(field_name, value, "a whole number from 1 to 1048576")
    return int(value)


@dataclass(frozen=True)
class Layout:
    """TP x PP x DP (x EP) on ranks ``0 .. tp*pp*dp - 1``.

    Attributes
    ----------
    tp, pp, dp : int
        Tensor-parallel, pipeline-parallel and data-parallel degrees.
    ep : int
        Expert-parallel degree: a divisor of ``dp`` (1: experts are replicated).
    order : tuple of str
        ``tp``, ``pp`` and ``dp`` once each, innermost first.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    order: tuple = DIMENSIONS

    def __post_init__(self):
        for f in ("tp", "pp", "dp", "ep"):
            object.__setattr__(self, f, _degree(f"layout.{f}", getattr(self, f)))
        order = self.order
        allowed = "tp, pp, dp (and ep) at most once each, innermost first (a list or 'tp-pp-dp')"
        if isinstance(order, str):
            order = tuple(x.strip() for x in order.replace(",", "-").replace(" ", "-").split("-") if x.strip())
        try:
            order = tuple(order)
        except TypeError:
            raise bad_value("layout.order", self.order, allowed) from None
        if len(set(order)) != len(order) or any(x not in (*DIMENSIONS, "ep") for x in order):
            raise bad_value("layout.order", self.order, allowed)
        order += tuple(d for d in DIMENSIONS if d not in order)
        if "ep" not in order:
            i = order.index("dp")
            order = order[:i] + ("ep",) + order[i:]
        object.__setattr__(self, "order", order)
        if self.dp % self.ep:
            raise bad_value("layout.ep", self.ep, f"a divisor of dp = {self.dp} (expert groups split data-parallel groups)")

    @classmethod
    def from_dict(cls, d, world: int | None = None) -> Layout:
        """A layout from a mapping with keys ``tp, pp, dp, ep, order`` (a scenario's
        ``layout:``); ``dp`` left out is ``world / (tp * pp)``."""
        if isinstance(d, Layout):
            return d
        if not isinstance(d, dict):
            raise bad_value("layout", d, "a Layout or a mapping with keys tp, pp, dp, ep, order")
        unknown = set(d) - {"tp", "pp", "dp", "ep", "order"}
        if unknown:
            raise bad_value("layout", sorted(unknown)[0], "a key of tp, pp, dp, ep, order")
        kw = {k: d[k] for k in ("tp", "pp", "dp", "ep", "order") if k in d}
        if world is None:
            return cls(**kw)
        return cls.for_world(world, **kw)

    @classmethod
    def for_world(cls, world: int, *, tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1,
                  order=DIMENSIONS) -> Layout:
        """The layout of ``world`` ranks; ``dp`` defaults to ``world / (tp * pp)`` and the
        product must equal ``world``."""
        world = _degree("world", world)
        tp, pp = _degree("layout.tp", tp), _degree("layout.pp", pp)
        if dp is None:
            if world % (tp * pp):
                raise bad_value("layout", f"tp={tp} pp={pp}", f"tp x pp dividing the world size {world}")
            dp = world // (tp * pp)
        lay = cls(tp, pp, dp, ep, order)
        if lay.world != world:
            raise bad_value("layout", f"tp={tp} pp={pp} dp={dp}", f"tp x pp x dp equal to the world size {world}")
        return lay

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def _sizes(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "ep": self.ep, "dp": self.dp // self.ep}

    def _grid4(self) -> np.ndarray:
        """Ranks as an array of shape ``(tp, pp, ep, dp / ep)``."""
        sizes = self._sizes()
        strides, s = {}, 1
        for d in self.order:
            strides[d] = s
            s *= sizes[d]
        axes = ("tp", "pp", "ep", "dp")
        idx = np.ix_(*(np.arange(sizes[d]) for d in axes))
        return sum(i * strides[d] for i, d in zip(idx, axes, strict=True))

    def grid(self) -> np.ndarray:
        """World ranks as an array of shape ``(tp, pp, dp)``."""
        g = self._grid4()  # (tp, pp, ep, dp/ep): replica k = (k // ep) * ep + k % ep
        return np.ascontiguousarray(g.transpose(0, 1, 3, 2)).reshape(self.tp, self.pp, self.dp)

    def rank(self, tp: int = 0, pp: int = 0, dp: int = 0) -> int:
        """The world rank at coordinate ``(tp, pp, dp)``."""
        for d, v in (("tp", tp), ("pp", pp), ("dp", dp)):
            if not is_int(v) or not 0 <= v < getattr(self, d):
                raise bad_value(f"layout.rank: {d}", v, f"an index from 0 to {getattr(self, d) - 1}")
        return int(self.grid()[tp, pp, dp])

    def coords(self, rank: int) -> dict:
        """``{"tp": i, "pp": j, "dp": k}`` of world rank ``rank``."""
        if not is_int(rank) or not 0 <= rank < self.world:
            raise bad_value("layout.coords: rank", rank, f"a rank from 0 to {self.world - 1}")
        t, p, d = (int(x[0]) for x in np.nonzero(self.grid() == rank))
        return {"tp": t, "pp": p, "dp": d}

    @staticmethod
    def _rows(a: np.ndarray, axis: int) -> list:
        rows = np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        return [tuple(int(x) for x in row) for row in rows.tolist()]

    def _groups(self, along: str) -> list:
        return self._rows(self.grid(), DIMENSIONS.index(along))

    def tp_groups(self) -> list:
        """Every tensor-parallel group (ranks in TP index order), sorted by first rank."""
        return self._groups("tp")

    def pp_groups(self) -> list:
        """Every pipeline (ranks in stage order), sorted by first rank."""
        return self._groups("pp")

    def dp_groups(self) -> list:
        """Every data-parallel group (ranks in replica order), sorted by first rank."""
        return self._groups("dp")

    def ep_groups(self) -> list:
        """Expert-parallel groups: ``ep`` replicas of a data-parallel group (positions 0 ..
        ep - 1 of one expert group), sorted by first rank."""
        return self._rows(self._grid4(), 2)

    def expert_dp_groups(self) -> list:
        """Replicas at the same position of their expert groups (they reduce the gradients of
        the same experts), sorted by first rank."""
        return self._rows(self._grid4(), 3)

    def stage_ranks(self, stage: int) -> tuple:
        """Every rank of pipeline stage ``stage`` (all TP ranks of all replicas), ascending."""
        if not is_int(stage) or not 0 <= stage < self.pp:
            raise bad_value("stage", stage, f"a stage from 0 to {self.pp - 1}")
        return tuple(sorted(int(x) for x in self.grid()[:, stage, :].ravel()))

    def communicators(self) -> dict:
        """Name -> :class:`Communicator` for every TP, DP, EP and expert-DP group with at
        least two ranks, and every adjacent stage pair of every pipeline (``pp.<first>.s<i>``:
        stage i and i + 1 of the pipeline whose first rank is ``first``)."""
        out = {}
        for kind, groups in (("tp", self.tp_groups()), ("dp", self.dp_groups()),
                             ("ep", self.ep_groups() if self.ep > 1 else []),
                             ("edp", self.expert_dp_groups() if 1 < self.ep < self.dp else [])):
            for g in groups:
                if len(g) > 1:
                    out[f"{kind}.{g[0]}"] = Communicator(f"{kind}.{g[0]}", g)
        for g in self.pp_groups():
            for i in range(len(g) - 1):
                name = f"pp.{g[0]}.s{i}"
                out[name] = Communicator(name, (g[i], g[i + 1]))
        return out

    def describe(self) -> str:
        return f"tp={self.tp} pp={self.pp} dp={self.dp} ep={self.ep} order={'-'.join(self.order)}"


__all__ = ["DIMENSIONS", "Layout"]
