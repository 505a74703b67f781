"""Alpha-beta-gamma (Hockney) cost parameters shared by every closed form.

One step that moves and reduces n bytes costs ``alpha + n*beta + n*gamma`` (HCCL's
docs, FACTS.md section 1). Closed forms are exact for sizes that split evenly into the
algorithm's chunks; otherwise chunk sizes differ by one byte and the closed form uses the
mean chunk, which is off by at most one byte per chunk (a rank pair's chunks in a step, and a
reducing rank's p-1 senders' for gamma: ``tests/test_invariants.py``). Scatter and gather
follow the uneven blocks exactly at every size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class AlphaBetaGamma:
    """Per-step cost parameters.

    Attributes
    ----------
    alpha_s : float
        Fixed cost of a step: per-step overhead plus path latency.
    beta_s_per_B : float
        Seconds per byte moved (1 / bandwidth).
    gamma_s_per_B : float
        Seconds per byte reduced at the destination (0 when the link reduces inline).
    """

    alpha_s: float
    beta_s_per_B: float
    gamma_s_per_B: float = 0.0


def log2_floor(p: int) -> int:
    return p.bit_length() - 1


def log2_ceil(p: int) -> int:
    return math.ceil(math.log2(p)) if p > 1 else 0
