"""What an NPU computes: a roofline of peak FLOP/s per data type and HBM bandwidth.

A :class:`ComputeSpec` is a pure cost function with no SimPy import, like the links'
specs: :meth:`ComputeSpec.time_s` turns an operation's floating-point work and the bytes
it moves through HBM into seconds,

    time_s = max(flops / (peak_flops_by_dtype[dtype] * efficiency),
                 bytes_moved / (hbm_Bps * hbm_efficiency))

(the roofline of Williams, Waterman and Patterson 2009). Two efficiencies, because the
shares of peak that real kernels reach differ between the matrix units and HBM
(``hbm_efficiency`` defaults to ``efficiency``); both are in (0, 1].

The presets carry peak figures (efficiency 1.0): a roofline at peak is a lower bound on a
kernel's time. Public figures disagree (docs/facts.md s9: 910B FP16 is quoted from 256 to
~376 TFLOPS), so every figure is a topology parameter with its source, and a measured
per-layer time should override the roofline where one exists.

Sources of the presets
----------------------
* Ascend/msmodeling, ``HWConf.create`` (the per-die hardware table of Huawei's own
  modelling tool): Ascend 910B2 cube FP16 353.8 TFLOPS, INT8 707.9 TOPS, HBM 1.6 TB/s,
  64 GB; 910B3 294.9 TFLOPS; 910B4 245.7 TFLOPS, 0.8 TB/s; the A3 pod (910C) per die
  the same as 910B2, 16 dies per 8-chip node (2 dies per 910C).
* CloudMatrix384 (Huawei / SemiAnalysis, press summaries): 300 PFLOPS dense BF16 over 384
  910C chips, about 781 TFLOPS per chip, 391 per die: 10% above msmodeling's 353.8.
* BF16 runs on the same cube units as FP16 at the same rate on 910B/910C (msmodeling
  gives one cube figure; the CloudMatrix figure is BF16).
* FP32: no vendor figure found. Assumed a quarter of FP16 (88.45 TFLOPS); a third-party
  measurement (the "limulidae" benchmark, found via code search: 910B FP32 matmul
  87 TFLOPS, BF16 328 TFLOPS) agrees within 2%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

from .dtypes import DTYPES, parse_dtype
from .errors import bad_value, is_real

TFLOPS = 1e12
TBps = 1e12

MIN_FLOPS = 1e-20
MAX_FLOPS = 1e30
"""Range of a peak rate, FLOP/s (the same far-out bounds as bandwidths)."""


def real(field_name: str, value, allowed: str) -> float:
    """``value`` as a float if it is a real number (not a bool), else the one-line error
    (the same rule as the topology specs'; kept here so topology.spec can import this module)."""
    if not is_real(value):
        raise bad_value(field_name, value, allowed)
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):
        raise bad_value(field_name, value, allowed) from None


def _efficiency(name: str, value) -> float:
    allowed = "a number in (0, 1]"
    v = real(name, value, allowed)
    if not 0 < v <= 1:  # False for NaN
        raise bad_value(name, value, allowed)
    return v


@dataclass(frozen=True)
class ComputeSpec:
    """An NPU's (or one die's) compute: peak FLOP/s per data type and HBM bandwidth.

    Attributes
    ----------
    peak_flops_by_dtype : mapping of str to float
        Peak floating-point (or integer) operations per second for each data type the
        NPU's matrix units run (keys: :data:`hcsim.dtypes.DTYPES` names, aliases such as
        ``"float16"`` accepted and normalised; values from 1e-20 to 1e30). Stored as a
        read-only mapping sorted by name.
    hbm_Bps : float
        HBM bandwidth, bytes per second (reads plus writes).
    efficiency : float
        Share of peak FLOP/s a kernel reaches, in (0, 1] (model FLOP utilisation).
    hbm_efficiency : float or None
        Share of ``hbm_Bps`` a kernel reaches, in (0, 1]; None: the same as ``efficiency``.
    source : str
        Where the figures come from.

    Examples
    --------
    >>> c = ComputeSpec({"fp16": 100e12}, hbm_Bps=1e12)
    >>> c.time_s(flops=200e12, bytes_moved=1e9, dtype="fp16")   # compute-bound
    2.0
    >>> c.time_s(flops=1e9, bytes_moved=3e12, dtype="fp16")     # memory-bound
    3.0
    """

    peak_flops_by_dtype: dict = field(default_factory=dict)
    hbm_Bps: float = math.inf
    efficiency: float = 1.0
    hbm_efficiency: float | None = None
    source: str = ""

    def __post_init__(self):
        table = self.peak_flops_by_dtype
        if not hasattr(table, "items"):
            raise bad_value("compute.peak_flops_by_dtype", table,
                            "a mapping of data type to FLOP/s, e.g. {fp16: 3.538e14}")
        peaks = {}
        for name, value in table.items():
            key = parse_dtype(name, field_name="compute.peak_flops_by_dtype")
            allowed = f"FLOP/s from {MIN_FLOPS:g} to {MAX_FLOPS:g}"
            v = real(f"compute.peak_flops_by_dtype.{key}", value, allowed)
            if not MIN_FLOPS <= v <= MAX_FLOPS:
                raise bad_value(f"compute.peak_flops_by_dtype.{key}", value, allowed)
            if key in peaks:
                raise bad_value("compute.peak_flops_by_dtype", name, f"{key} given twice")
            peaks[key] = v
        object.__setattr__(self, "peak_flops_by_dtype", MappingProxyType(dict(sorted(peaks.items()))))
        allowed = "a number (int or float) of B/s from 1e-20 to 1e30, or inf (no HBM limit)"
        hbm = real("compute.hbm_bandwidth", self.hbm_Bps, allowed)
        if not (1e-20 <= hbm <= 1e30 or hbm == math.inf):
            raise bad_value("compute.hbm_bandwidth", self.hbm_Bps, allowed)
        object.__setattr__(self, "hbm_Bps", hbm)
        object.__setattr__(self, "efficiency", _efficiency("compute.efficiency", self.efficiency))
        if self.hbm_efficiency is not None:
            object.__setattr__(self, "hbm_efficiency", _efficiency("compute.hbm_efficiency", self.hbm_efficiency))
        if not isinstance(self.source, str):
            raise bad_value("compute.source", self.source, "a string")

    def __hash__(self):
        return hash((tuple(self.peak_flops_by_dtype.items()), self.hbm_Bps, self.efficiency,
                     self.hbm_efficiency, self.source))

    def __eq__(self, other):
        if not isinstance(other, ComputeSpec):
            return NotImplemented
        return (dict(self.peak_flops_by_dtype) == dict(other.peak_flops_by_dtype) and self.hbm_Bps == other.hbm_Bps
                and self.efficiency == other.efficiency and self.hbm_efficiency == other.hbm_efficiency
                and self.source == other.source)

    def __getstate__(self):  # MappingProxyType does not pickle
        state = dict(self.__dict__)
        state["peak_flops_by_dtype"] = dict(self.peak_flops_by_dtype)
        return state

    def __setstate__(self, state):
        state = dict(state)
        state["peak_flops_by_dtype"] = MappingProxyType(state["peak_flops_by_dtype"])
        self.__dict__.update(state)

    @property
    def effective_hbm_efficiency(self) -> float:
        """``hbm_efficiency``, or ``efficiency`` when it is None."""
        return self.efficiency if self.hbm_efficiency is None else self.hbm_efficiency

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype`` (an alias is accepted); a one-line error naming the data
        types this spec knows if it has no figure for it."""
        key = parse_dtype(dtype)
        if key not in self.peak_flops_by_dtype:
            raise bad_value("dtype", dtype, "one this NPU's compute has a peak for: "
                            + (", ".join(self.peak_flops_by_dtype) or "none given"))
        return self.peak_flops_by_dtype[key]

    def time_s(self, flops: float, bytes_moved: float, dtype: str = "fp16") -> float:
        """Roofline time of an operation, in seconds.

        Parameters
        ----------
        flops : float
            Floating-point (or integer) operations, >= 0.
        bytes_moved : float
            Bytes read from and written to HBM, >= 0.
        dtype : str
            Data type the operations run in (its peak is used).

        Returns
        -------
        float
            ``max(flops / (peak * efficiency), bytes_moved / (hbm_Bps * hbm_efficiency))``;
            0 when both are 0.

        Examples
        --------
        >>> ASCEND_910B.time_s(2 * 4096**3, 3 * 2 * 4096**2, "bf16") * 1e6  # a 4096^3 GEMM, us
        388.4...
        """
        for name, v in (("flops", flops), ("bytes_moved", bytes_moved)):
            x = real(name, v, "a finite number >= 0")
            if not 0 <= x < math.inf:
                raise bad_value(name, v, "a finite number >= 0")
        compute = float(flops) / (self.peak_flops(dtype) * self.efficiency) if flops else 0.0
        memory = float(bytes_moved) / (self.hbm_Bps * self.effective_hbm_efficiency) if bytes_moved else 0.0
        return max(compute, memory)

    def to_dict(self) -> dict:
        """The YAML form: ``peak_TFLOPS`` keyed by dtype, ``hbm_GBps``, ``efficiency``,
        ``hbm_efficiency``, ``source`` (units in the keys, like the topology files' others)."""
        d = {"peak_TFLOPS": {k: v / TFLOPS for k, v in self.peak_flops_by_dtype.items()},
             "hbm_GBps": self.hbm_Bps / 1e9, "efficiency": self.efficiency}
        if self.hbm_efficiency is not None:
            d["hbm_efficiency"] = self.hbm_efficiency
        if self.source:
            d["source"] = self.source
        return d

    @classmethod
    def from_dict(cls, d, where: str = "compute") -> ComputeSpec:
        """Read the YAML form strictly: unknown keys are refused, naming ``where``."""
        known = ("peak_TFLOPS", "hbm_GBps", "efficiency", "hbm_efficiency", "source")
        if not isinstance(d, dict):
            raise bad_value(where, d, "a mapping with " + ", ".join(known))
        for k in d:
            if k not in known:
                raise bad_value(f"{where}.{k}", d[k], "unknown key; known: " + ", ".join(known))
        peaks = d.get("peak_TFLOPS", {})
        if not isinstance(peaks, dict):
            raise bad_value(f"{where}.peak_TFLOPS", peaks, "a mapping of data type to TFLOPS, e.g. {fp16: 353.8}")
        scaled = {}
        for k, v in peaks.items():
            allowed = f"TFLOPS from {MIN_FLOPS / TFLOPS:g} to {MAX_FLOPS / TFLOPS:g}"
            x = real(f"{where}.peak_TFLOPS.{k}", v, allowed)
            if not MIN_FLOPS / TFLOPS <= x <= MAX_FLOPS / TFLOPS:
                raise bad_value(f"{where}.peak_TFLOPS.{k}", v, allowed)
            scaled[k] = x * TFLOPS
        hbm = d.get("hbm_GBps")
        if hbm is not None:
            allowed = "GB/s from 1e-29 to 1e21"
            x = real(f"{where}.hbm_GBps", hbm, allowed)
            if not 1e-29 <= x <= 1e21:
                raise bad_value(f"{where}.hbm_GBps", hbm, allowed)
        hbm = math.inf if hbm is None else x * 1e9
        return cls(peak_flops_by_dtype=scaled, hbm_Bps=hbm, efficiency=d.get("efficiency", 1.0),
                   hbm_efficiency=d.get("hbm_efficiency"), source=d.get("source", ""))


_MSMODELING = "Ascend/msmodeling HWConf.create"

ASCEND_910B = ComputeSpec(
    peak_flops_by_dtype={"fp16": 353.8 * TFLOPS, "bf16": 353.8 * TFLOPS, "int8": 707.9 * TFLOPS,
                         "fp32": 353.8 * TFLOPS / 4},
    hbm_Bps=1.6 * TBps,
    source=(f"{_MSMODELING} Ascend_910b2 (cube FP16 353.8 TFLOPS, INT8 707.9 TOPS, HBM 1.6 TB/s; "
            "public FP16 figures range 256..~376 TFLOPS); BF16 = FP16 (same cube units); "
            "FP32 assumed FP16/4 (no vendor figure; a third-party matmul measures 87 TFLOPS)"),
)
"""Ascend 910B (910B2, Atlas 800T A2 / Atlas 900 A2 PoD), per NPU, at peak."""

ASCEND_910C_DIE = ComputeSpec(
    peak_flops_by_dtype={"fp16": 353.8 * TFLOPS, "bf16": 353.8 * TFLOPS, "int8": 707.9 * TFLOPS,
                         "fp32": 353.8 * TFLOPS / 4},
    hbm_Bps=1.6 * TBps,
    source=(f"{_MSMODELING} Ascend_A3Pod, per die (16 dies per 8-chip node; cube FP16 353.8 TFLOPS, "
            "HBM 1.6 TB/s, 64 GB); CloudMatrix384's 300 PFLOPS BF16 / 384 chips is ~391 per die; "
            "FP32 assumed FP16/4"),
)
"""Ascend 910C, one of its two dies (the A3 topology's NPUs are dies), at peak."""

COMPUTE_PRESETS = MappingProxyType({"910B": ASCEND_910B, "910C_die": ASCEND_910C_DIE})
"""Built-in compute specs by name."""

__all__ = ["ComputeSpec", "ASCEND_910B", "ASCEND_910C_DIE", "COMPUTE_PRESETS", "DTYPES"]
