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

What a reduction costs (how the data type and op change the work)
-----------------------------------------------------------------
HCCL reduces in one of two places (hcomm src/platform/common/device_capacity.cc):

* **inline**, by the SDMA engine as it writes (and by RDMA on RoCE), free of vector time
  (hcsim: links with ``inline_reduce``). ``IsSupportSDMAReduce`` allows it on 910B and
  910_93 for fp32, fp16, int8, int16, int32, bfp16 with sum, max, min, and on 910 (910A)
  for fp32 sum only (``IsDataTypeSupport``, ``IsRedOpSupport``; ``IsSupportRDMAReduce``
  takes the same six types and three ops). Any other pair (int64, ``prod``, fp16 on 910A)
  falls back to the vector core (TBE/CCE reduce): :func:`inline_reduce_supported`.
* on the **vector core** at ``NpuSpec.reduce_Bps``. HCCL's own cost model charges it per
  byte, the same for every data type and op: "统一按照10GB计算" (10 GB/s for all, plus
  0.6 us fixed; hcomm task_profiling.h, ``DURATION_CCE_BANDWIDTH_MB``). That agrees with
  the vector unit's width being fixed in bytes: Ascend/msmodeling gives the 910B2's
  vector rate as 22 TFLOPS fp16 and 44 TOPS int8, the same 44 TB/s of operands. So
  :func:`reduce_time_factor` is 1.0 for every pair HCCL runs (sum, max, min and prod are
  each one vector instruction per element). No figure exists for int64 (the vector unit
  has no 64-bit lanes in msmodeling's table) or for prod separately; hcsim assumes 1.0
  there too, as HCCL's estimator does, and says so here rather than invent a number.

So on an Ascend topology a data type or op changes the prediction where it moves the
reduction off the links (``-d int64``, ``-o prod``, anything but fp32 sum on 910A), and
through the element-size rules (:func:`check_elements`); the per-byte factor stays 1.0
unless a caller sets one (``EngineConfig.reduce_time_factor``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from .errors import bad_value, is_int


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


PRODUCT_REDUCE_DTYPES = MappingProxyType({
    "910A": ("int8", "int32", "int64", "fp16", "fp32"),
    "910B": ("int8", "int16", "int32", "int64", "fp16", "fp32", "bf16"),
    "910_93": ("int8", "int16", "int32", "int64", "fp16", "fp32", "bf16"),
})
"""Data types HCCL's reducing collectives (allreduce, reducescatter, reduce) take per
product (hccl_test README, CANN 8.1.RC1: "Atlas 训练系列产品" = 910A, A2 = 910B, A3 =
910_93)."""

PROD_EXCLUDED = MappingProxyType({"910A": (), "910B": ("int16", "bf16"), "910_93": ("int16", "bf16")})
"""Data types ``prod`` does not take per product (same README: "prod操作不支持int16、bfp16")."""

NON_REDUCING_BF16 = ("910B", "910_93")
"""Products whose non-reducing collectives take bfp16 (README: "bfp16数据类型仅Atlas A2 训练系列
产品、Atlas A3 训练系列产品支持")."""

INLINE_REDUCE = MappingProxyType({
    "910A": (("fp32",), ("sum",)),
    "910B": (("fp32", "fp16", "int8", "int16", "int32", "bf16"), ("sum", "max", "min")),
    "910_93": (("fp32", "fp16", "int8", "int16", "int32", "bf16"), ("sum", "max", "min")),
})
"""(data types, ops) the SDMA engine reduces inline per product (hcomm device_capacity.cc
``IsDataTypeSupport`` / ``IsRedOpSupport``)."""

REDUCE_TIME_FACTOR = MappingProxyType({(d, o): 1.0 for d in DTYPES for o in REDUCE_OPS})
"""Vector-core time per byte relative to ``reduce_Bps``, by (dtype, op): 1.0 throughout
(HCCL's estimator is per byte for every type; see the module docstring)."""

REDUCING_COLLECTIVES = ("allreduce", "reducescatter", "reduce")
COUNT_TIMES_RANKS = ("allgather", "reducescatter", "scatter", "gather", "alltoall")
"""Collectives whose size (nccl-tests' and hccl_test's convention) is count x ranks; the
others' size is the per-rank count (docs/facts.md s5)."""


def reduce_time_factor(dtype, reduce_op="sum") -> float:
    """Vector-core reduction time per byte for (dtype, op), relative to ``reduce_Bps``.

    Examples
    --------
    >>> reduce_time_factor("fp16", "max")
    1.0
    """
    return REDUCE_TIME_FACTOR[(parse_dtype(dtype), parse_reduce_op(reduce_op))]


def inline_reduce_supported(product, dtype, reduce_op="sum") -> bool:
    """Whether HCCL on ``product`` reduces (dtype, op) inline (SDMA / RDMA). A topology with
    no product keeps its links' ``inline_reduce`` as they are (True here).

    Examples
    --------
    >>> inline_reduce_supported("910B", "fp16", "max"), inline_reduce_supported("910B", "int64")
    (True, False)
    >>> inline_reduce_supported("910A", "fp16"), inline_reduce_supported(None, "int64", "prod")
    (False, True)
    """
    d, o = parse_dtype(dtype), parse_reduce_op(reduce_op)
    if product is not None and not isinstance(product, str):
        raise bad_value("product", product, "a product name such as 910B (a str), or None")
    if product not in INLINE_REDUCE:
        return True
    o = "sum" if o == "avg" else o
    dtypes, ops = INLINE_REDUCE[product]
    return d in dtypes and o in ops


def check_supported(collective: str, dtype, reduce_op="sum", product=None) -> None:
    """Refuse, in one line, a (collective, data type, op) HCCL does not run on ``product``
    (no product: anything goes).

    Examples
    --------
    >>> check_supported("allreduce", "bf16", "prod", "910B")
    Traceback (most recent call last):
    ...
    hcsim.errors.ConfigError: reduce_op = 'prod': HCCL on 910B does not take prod with bf16; prod takes int8, int32, int64, fp16, fp32
    """
    from .algorithms.registry import check_collective

    check_collective(collective)
    d, o = parse_dtype(dtype), parse_reduce_op(reduce_op)
    if product is None:
        return
    if not isinstance(product, str):
        raise bad_value("product", product, "a product name such as 910B (a str), or None")
    if collective in REDUCING_COLLECTIVES:
        allowed = PRODUCT_REDUCE_DTYPES.get(product)
        if allowed is not None and d not in allowed:
            raise bad_value("dtype", dtype, f"HCCL's {collective} on {product} takes " + ", ".join(allowed))
        excluded = PROD_EXCLUDED.get(product, ())
        if o == "prod" and d in excluded:
            ok = ", ".join(x for x in allowed if x not in excluded)
            raise bad_value("reduce_op", reduce_op, f"HCCL on {product} does not take prod with {d}; prod takes {ok}")
    elif d == "bf16" and product not in NON_REDUCING_BF16:
        raise bad_value("dtype", dtype, f"HCCL on {product} takes bfp16 only on A2/A3 (910B, 910_93)")


def _check_call(collective, p) -> int:
    """Check a call's collective and ranks; returns ``p`` as a Python int (a numpy int8's own
    arithmetic would overflow in the byte count)."""
    from .algorithms.registry import check_collective

    check_collective(collective)
    if not is_int(p) or p < 1:
        raise bad_value("p", p, "the ranks, a whole number >= 1")
    return int(p)


def size_from_count(collective: str, count, dtype, p: int) -> int:
    """Bytes (nccl-tests' convention) of a call of ``count`` elements of ``dtype`` on ``p``
    ranks: count x element size, times p where the size is count x ranks (allgather,
    reducescatter, scatter, gather, alltoall), as hccl_test prints data_size.

    Examples
    --------
    >>> size_from_count("allreduce", 1024, "fp16", 8), size_from_count("allgather", 1024, "fp16", 8)
    (2048, 16384)
    """
    p = _check_call(collective, p)
    if not is_int(count) or count < 1:
        raise bad_value("count", count, "a whole number of elements >= 1")
    return int(count) * element_size(dtype) * (p if collective in COUNT_TIMES_RANKS else 1)


def check_elements(collective: str, nbytes: int, dtype, p: int) -> int:
    """The per-rank element count of a call of ``nbytes`` (nccl-tests' convention), or a
    one-line error if it is not a whole number of elements per rank.

    Examples
    --------
    >>> check_elements("allgather", 64, "fp32", 8)
    2
    >>> check_elements("allgather", 3, "int8", 8)
    Traceback (most recent call last):
    ...
    hcsim.errors.ConfigError: size = 3: allgather of int8 on 8 ranks needs a multiple of 8 bytes (1 B x 8 ranks): a whole number of elements per rank
    """
    p = _check_call(collective, p)
    if not is_int(nbytes) or nbytes < 0:
        raise bad_value("size", nbytes, "a whole number of bytes >= 0")
    nbytes = int(nbytes)
    e = element_size(dtype)
    d = parse_dtype(dtype)
    unit = e * (p if collective in COUNT_TIMES_RANKS else 1)
    if nbytes % unit:
        how = f"{e} B x {p} ranks" if collective in COUNT_TIMES_RANKS else f"{e} B per element"
        raise bad_value("size", nbytes, f"{collective} of {d} on {p} ranks needs a multiple of {unit} bytes "
                        f"({how}): a whole number of elements per rank")
    return nbytes // unit
