"""HCCL's data types and reduce operations, and what a reduction costs per byte.

Data types (HCCL's ``HcclDataType``, hccl_types.h) with their element sizes, the spellings
hccl_test's ``-d`` accepts, and which (collective, data type, reduce op) HCCL runs, from
the hccl_test README of CANN 8.1.RC1 (tools/hccl_test/README.md, ``-d`` and its notes):

* allreduce, reducescatter, reduce: Atlas training (910A) int8, int32, int64, fp16, fp32;
  Atlas A2 (910B) and A3 (910_93) also int16 and bfp16, but ``prod`` takes neither int16
  nor bfp16;
* broadcast, allgather, alltoall(v), scatter (no reduction): int8, int16, int32, fp16,
  fp32, int64, uint64, uint8, uint16, uint32, fp64, and bfp16 on A2/A3 only.

Reduce operations: HCCL's ``HcclReduceOp`` is sum, prod, max, min (hccl_test ``-o``).
``avg`` is not an HCCL operation; hcsim accepts it in the API as NCCL defines ``ncclAvg``:
a sum whose 1/n scale is applied in the same pass (NCCL pre-multiplies floats by 1/n), so
its cost is the sum's. hccl_test cannot ask for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from .errors import bad_value


@dataclass(frozen=True)
class DType:
    """One data type.

    Attributes
    ----------
    name : str
        hcsim's name (``"fp16"``, ``"bf16"``, ``"int8"``...).
    size_bytes : int
        Bytes per element.
    hccl_name : str
        HCCL's enum name (``HCCL_DATA_TYPE_BFP16``).
    hccl_test_name : str
        The spelling hccl_test's ``-d`` takes (``bfp16``).
    is_float : bool
        Floating point (else integer).

    Examples
    --------
    >>> DTYPES["bf16"].size_bytes
    2
    """

    name: str
    size_bytes: int
    hccl_name: str
    hccl_test_name: str
    is_float: bool


def _d(name, size, hccl, test, is_float):
    return name, DType(name, size, "HCCL_DATA_TYPE_" + hccl, test, is_float)


DTYPES = MappingProxyType(dict([
    _d("int8", 1, "INT8", "int8", False),
    _d("int16", 2, "INT16", "int16", False),
    _d("int32", 4, "INT32", "int32", False),
    _d("int64", 8, "INT64", "int64", False),
    _d("uint8", 1, "UINT8", "uint8", False),
    _d("uint16", 2, "UINT16", "uint16", False),
    _d("uint32", 4, "UINT32", "uint32", False),
    _d("uint64", 8, "UINT64", "uint64", False),
    _d("fp16", 2, "FP16", "fp16", True),
    _d("bf16", 2, "BFP16", "bfp16", True),
    _d("fp32", 4, "FP32", "fp32", True),
    _d("fp64", 8, "FP64", "fp64", True),
]))
"""The data types HCCL supports (HcclDataType, without the newer int128 / fp8 / hif8), by
hcsim name."""

DTYPE_ALIASES = MappingProxyType({
    "bfp16": "bf16", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
    "float": "fp32", "float64": "fp64", "double": "fp64",
})
"""Other spellings accepted (hccl_test's ``bfp16``; the float16/float32/float64/bfloat16
names HCCL's own tools print)."""

REDUCE_OPS = ("sum", "prod", "max", "min", "avg")
"""Reduce operations: HCCL's four, plus ``avg`` (a sum scaled by 1/n in the same pass)."""

HCCL_REDUCE_OPS = ("sum", "prod", "max", "min")
"""The reduce operations HCCL (and hccl_test's ``-o``) has."""


def parse_dtype(value, field_name: str = "dtype") -> str:
    """hcsim's name of a data type given by name or alias (case-insensitive).

    Examples
    --------
    >>> parse_dtype("bfp16"), parse_dtype("FP32")
    ('bf16', 'fp32')
    """
    if isinstance(value, DType):
        return value.name
    if isinstance(value, str):
        key = value.strip().lower()
        key = DTYPE_ALIASES.get(key, key)
        if key in DTYPES:
            return key
    raise bad_value(field_name, value, "one of " + ", ".join(DTYPES) + " (or bfp16, float16, float32, bfloat16, ...)")


def parse_reduce_op(value, field_name: str = "reduce_op") -> str:
    """A reduce operation's name (case-insensitive)."""
    if isinstance(value, str) and value.strip().lower() in REDUCE_OPS:
        return value.strip().lower()
    raise bad_value(field_name, value, "one of " + ", ".join(REDUCE_OPS))


def element_size(dtype) -> int:
    """Bytes per element of ``dtype``.

    Examples
    --------
    >>> element_size("fp16"), element_size("int64")
    (2, 8)
    """
    return DTYPES[parse_dtype(dtype)].size_bytes
