"""Hypothesis strategies for fuzzing hcsim: sizes, API arguments, topology files, measured
files, HCCL_ALGO strings and CLI argument lists.

Every case carries a ``repro``: one line of Python (or a shell command) that reproduces it.
Valid inputs are kept SMALL (a few ranks, sizes up to 64 KiB) so that valid cases run in
milliseconds; the point is breadth. Files a case needs are written under :data:`CASE_DIR`
(named by a hash of their content) so that the reproducer can name them.
"""

from __future__ import annotations

import decimal
import fractions
import functools
import hashlib
import math
import os
import random as _random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
CASE_DIR = Path(os.environ.get("HCSIM_FUZZ_CASE_DIR", Path(tempfile.gettempdir()) / "hcsim_fuzz_cases"))
OUT_DIR = CASE_DIR / "out"

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "scatter", "gather", "alltoall",
               "alltoallv", "sendrecv")


def write_case_file(data: bytes | str, suffix: str) -> Path:
    """Write ``data`` to CASE_DIR/<hash><suffix> (content-addressed: a reproducer can name it)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    CASE_DIR.mkdir(parents=True, exist_ok=True)
    path = CASE_DIR / f"{hashlib.sha1(raw).hexdigest()[:16]}{suffix}"
    if not path.exists():
        tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
        tmp.write_bytes(raw)
        tmp.replace(path)
    return path


def out_path(name: str) -> str:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    return str(OUT_DIR / name)


class Expr:
    """A value with the Python expression that makes it (for reproducers)."""

    def __init__(self, value, expr: str):
        self.value, self.expr = value, expr

    def __repr__(self):
        return self.expr


class Fresh(Expr):
    """An Expr whose value is made anew each time it is used (iterators are used up)."""

    def __init__(self, expr: str):
        super().__init__(None, expr)

    @property
    def value(self):
        import itertools  # noqa: F401

        return eval(self.expr)  # noqa: S307 - expressions written in this module

    @value.setter
    def value(self, _):
        pass


def show(v) -> str:
    """repr() for reproducers (Expr prints its expression; huge powers as 10**k / 2**k)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**20:
        sign, a = ("-" if v < 0 else ""), abs(v)
        for base in (10, 2):
            k = round(math.log(a, base))
            for d in (0, 1, -1):
                if base ** k + d == a:
                    return f"{sign}({base}**{k}{'+1' if d == 1 else '-1' if d == -1 else ''})"
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, list | tuple):
        inner = ", ".join(show(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{show(k)}: {show(x)}" for k, x in v.items()) + "}"
    return repr(v)


def unwrap(v):
    if isinstance(v, Expr):
        return v.value
    if isinstance(v, list):
        return [unwrap(x) for x in v]
    if isinstance(v, tuple):
        return tuple(unwrap(x) for x in v)
    return v


# ---- sizes --------------------------------------------------------------------------------

UNITS = ("", "K", "M", "G", "T", "KiB", "MiB", "GiB", "TiB", "kB", "MB", "GB", "TB", "B", "b", "k", "m", "g",
         "kib", "KB", "Kb", "mb", "gb", "KIB", "iB", "P", "PiB", "PB", "E", "bytes", "Ki", "k B")
SMALL_UNITS = {"": 1, "K": 1024, "KiB": 1024, "kB": 1000, "k": 1024, "kib": 1024, "B": 1, "b": 1}

valid_small_size = st.one_of(
    st.integers(1, 65536),
    st.builds(lambda n, u: f"{n}{u}", st.integers(1, 64), st.sampled_from(sorted(SMALL_UNITS))),
    st.sampled_from(["8", "64", "1K", "4K", "64K", "1KiB", "2kB", " 16 ", "8\t", "0.5K", "1.5K", "1M"]),
)
"""Sizes that are valid and small (the runs stay in milliseconds)."""

_UNICODE_DIGITS = ("１２", "٣", "۴", "०", "①", "²", "߁", "๑๒", "𝟖", "८K", "1２", "Ⅻ", "½", "৪K")
_SPECIAL_SIZE_TEXT = (
    "", " ", "\t", "\n", "8\n", "\n8", "8 K", "8  K", " 8K ", "\u00a08", "8\u00a0K", "8\u2009K", "8\x00", "\x008",
    "+8", "-8", "-1K", "0", "0K", "00", "0.0", "0x10", "0o10", "0b10", "1_000", "1,000", "1.000,5", "1e3", "1E3",
    "1e-3", "8e9999", "1e308", "1.5e3K", ".5K", "5.", "5.K", "0.5", "0.5B", "1.5", "1.5B", "0.001K", "0.0009765625K",
    "1.999999999999999999G", "2.0000000000000000001G", "9007199254740993", "9007199254740992",
    "1125899906842624", "1125899906842625", "1024T", "1025T", "1P", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "9" * 30, "9" * 64, "9" * 65, "1" + "0" * 5000, "inf", "Inf", "infinity", "nan", "NaN",
    "None", "null", "true", "8KK", "K8", "K", "KiB", "8Kib", "8KIB", "8kiB", "8 KiB", "8KiB ", "8ki", "8Bi", "8bB",
    "64MiB", "1GiB", "1GB", "1G", "4G", "8\r", "8\v", "8\f", "８K", "8Ｋ", "8µ", "8ǅ", "٨", "1.", ".", "..", "1..2",
    "--8", "8-", "(8)", "'8'", "[8]", "8;", "8 # c", "0.1", "0.25K", "1.0000000000000000000000000000001K",
)


def _size_specials():
    return [0, -1, -8, 1, 7, 8, 2**31 - 1, 2**31, 2**32, 2**50, 2**50 + 1, 2**53, 2**53 + 1, 9007199254740993,
            2**62, 2**63 - 1, 2**63, -(2**63), 2**64, 2**64 + 1, 10**100, -(10**100), True, False,
            0.0, -0.0, 0.5, 1.0, 8.0, 8.5, 1e-300, 5e-324, 1e300, 2.0**53, 2.0**63, 2.0**64, float("nan"),
            float("inf"), float("-inf"), -8.0, None, [8], (8,), (8, 16), {8}, {"size": 8}, b"8", bytearray(b"8"),
            Expr(fractions.Fraction(17, 2), "fractions.Fraction(17, 2)"),
            Expr(fractions.Fraction(16, 2), "fractions.Fraction(16, 2)"),
            Expr(decimal.Decimal("8"), "decimal.Decimal('8')"), Expr(decimal.Decimal("8.5"), "decimal.Decimal('8.5')"),
            Expr(decimal.Decimal("NaN"), "decimal.Decimal('NaN')"), Expr(decimal.Decimal("1e400"), "decimal.Decimal('1e400')"),
            Expr(complex(8, 0), "complex(8, 0)"), Expr(object(), "object()"),
            Expr(np.int64(8), "np.int64(8)"), Expr(np.int32(-1), "np.int32(-1)"), Expr(np.uint64(2**64 - 1), "np.uint64(2**64 - 1)"),
            Expr(np.int8(127), "np.int8(127)"), Expr(np.float64(8.0), "np.float64(8.0)"), Expr(np.float64("nan"), "np.float64('nan')"),
            Expr(np.float32(8.5), "np.float32(8.5)"), Expr(np.bool_(True), "np.bool_(True)"),
            Expr(np.array(8), "np.array(8)"), Expr(np.array([8]), "np.array([8])"), Expr(np.uint8(255), "np.uint8(255)")]


any_size = st.one_of(
    valid_small_size,
    st.sampled_from(_SPECIAL_SIZE_TEXT),
    st.sampled_from(_UNICODE_DIGITS),
    st.sampled_from(_size_specials()),
    st.integers(),
    st.integers(min_value=2**40, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.builds(lambda n, u, sp: f"{sp[0]}{n}{sp[1]}{u}{sp[2]}", st.integers(-5, 2**66),
              st.sampled_from(UNITS), st.tuples(*[st.sampled_from(["", " ", "\t", "  "])] * 3)),
    st.builds(lambda a, b, u: f"{a}.{b}{u}", st.integers(0, 10**6), st.text("0123456789", min_size=1, max_size=25),
              st.sampled_from(UNITS)),
    st.builds(lambda m, e, u: f"{m}e{e}{u}", st.integers(-9, 99), st.integers(-400, 400), st.sampled_from(UNITS)),
    st.text(alphabet=st.sampled_from(list("0123456789.KMGTiBbkmg +-e_,x\t\n") + ["١", "２", "\u00a0"]), max_size=20),
    st.text(max_size=12),
)
"""Any size, right or wrong, of any type."""


def reference_size(value):
    """What a size means, computed independently of hcsim: an exact int, or None when the
    value is not an unambiguous whole byte count (then parse_size must refuse it)."""
    if isinstance(value, Expr):
        value = value.value
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return int(value) if math.isfinite(value) and float(value).is_integer() else None
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"[ \t]*([0-9]+)(?:\.([0-9]+))?[ \t]*([A-Za-z]*)[ \t]*", value, re.ASCII)
    if not m:
        return None
    whole, frac, unit = m.groups()
    binary = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "kib": 2**10, "mib": 2**20,
              "gib": 2**30, "tib": 2**40}
    dec = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
    if len(unit) == 2 and unit.endswith("B") and unit.lower() in dec:
        mult = dec[unit.lower()]
    else:
        mult = binary.get(unit.lower())
    if mult is None:
        return None
    frac = frac or ""
    v = fractions.Fraction(int(whole + frac), 10 ** len(frac)) * mult
    return int(v) if v.denominator == 1 else None


# ---- HCCL_ALGO ----------------------------------------------------------------------------

ALGO_NAMES = ("null", "ring", "pipeline", "fullmesh", "H-D_R", "pairwise", "NHR", "NHR_V1", "AHC", "AHC_BROKE",
              "NB", "NA")
OPERATORS = ("broadcast", "allreduce", "reduce", "send", "receive", "allgather", "reducescatter", "alltoall",
             "gather", "scatter", "sendrecv", "others")
LEVELS = ("level0", "level1", "level2", "level3")

valid_hccl_algo = st.one_of(
    st.sampled_from(["level0:NA;level1:H-D_R", "level0:NA;level1:ring", "level0:NA;level1:NHR", "level0:NA;level1:NB",
                     "level0:NA;level1:pipeline", "level1:fullmesh", "level0:NA;level1:pairwise", "level1:AHC",
                     "allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:NHR", "others=level0:NA;level1:NB",
                     "", "  ", " level0 : NA ; level1 : H-D_R ", "level0:NA;level1:ring;level2:NHR"]),
    st.builds(lambda a: f"level0:NA;level1:{a}", st.sampled_from(ALGO_NAMES)),
)

_HCCL_TOKENS = (ALGO_NAMES + OPERATORS + LEVELS + (":", ";", "/", "=", " ", "\t", "\n", "level", "Level0", "LEVEL1",
                                                    "ring ", "h-d_r", "hd", "mesh", "alltoallv", "level9", "level-1",
                                                    "", "::", ";;", "//", "==", "\u00a0", "\x00", "é", "𝟘"))


@st.composite
def hccl_algo_text(draw):
    """HCCL_ALGO strings: valid ones, token soup from its grammar, structural mutations, junk."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(valid_hccl_algo)
    if kind == 1:
        return "".join(draw(st.lists(st.sampled_from(_HCCL_TOKENS), max_size=14)))
    if kind == 2:  # well-formed shape, random names
        n_ops = draw(st.integers(0, 3))

        def levels():
            items = draw(st.lists(st.tuples(st.sampled_from(LEVELS + ("level4", "lvl1", "")),
                                            st.sampled_from(ALGO_NAMES + ("", "ring2", "Ring"))), min_size=0, max_size=4))
            return ";".join(f"{lv}:{a}" for lv, a in items)

        if n_ops == 0:
            return levels()
        return "/".join(f"{draw(st.sampled_from(OPERATORS + ('alltoallv', 'allReduce', '')))}={levels()}"
                        for _ in range(n_ops))
    if kind == 3:  # mutate a valid one
        base = draw(valid_hccl_algo)
        if not base:
            return base
        i = draw(st.integers(0, len(base)))
        op = draw(st.integers(0, 2))
        ins = draw(st.sampled_from([":", ";", "/", "=", " ", "x", "level1:ring", "\n", ";level1:ring"]))
        if op == 0:
            return base[:i] + ins + base[i:]
        if op == 1:
            return base[:i] + base[i + 1:]
        return base[:i]
    return draw(st.one_of(st.text(max_size=30), st.sampled_from([None, 1, 0, b"level1:ring", ["level1:ring"],
                                                                    1.5, True, "x" * 5000])))


# ---- topologies for API calls ------------------------------------------------------------

@functools.cache
def _topology(expr: str):
    import hcsim  # noqa: F401
    from hcsim import load_topology  # noqa: F401
    from hcsim.topology import ascend, builders  # noqa: F401

    return eval(expr)  # noqa: S307 - expressions from SMALL_TOPOLOGIES below


SMALL_TOPOLOGIES = (
    "'atlas800t-a2'", "'atlas800-9000'", "load_topology('atlas900-a2-pod', servers=2)",
    "load_topology('atlas900-a3-superpod', nodes=1)", "builders.full_mesh(4, 10e9, 1e-6)",
    "builders.full_mesh(3, 10e9, 1e-6)", "builders.ring(5, 10e9, 1e-6)", "builders.single_switch(4, 10e9, 1e-6)",
    "builders.leaf_spine(2, 2, 2, 10e9, 1e-6)", "builders.torus((2, 3), 10e9, 1e-6)",
    "builders.tiered_mesh((2, 2), (20e9, 5e9), (1e-6, 2e-6))", "builders.tiered_mesh((2, 2, 2), 10e9, 1e-6)",
    "builders.full_mesh(8, 10e9, 1e-6, npus_per_server=4)", "builders.ring(2, 1e9)",
    "ascend.atlas800t_a2(npus_per_server=4)",
)


def topology_value(expr: str):
    """(value to pass, its number of NPUs): built-in names stay strings; the rest are objects."""
    t = _topology(expr)
    if isinstance(t, str):
        from hcsim import load_topology

        return Expr(t, expr), load_topology(t).num_npus
    return Expr(t, expr), t.num_npus


_BAD_TOPOLOGY = ("None", "1", "''", "' '", "'nonexistent'", "'atlas800t-a2 '", "'ATLAS800T-A2'", "'../topologies/atlas800t-a2'",
                 "'/'", "'/nonexistent/x.yaml'", "'/dev/null'", "'/etc/passwd'", "['atlas800t-a2']", "b'atlas800t-a2'",
                 "'topologies'", "'atlas800t-a2.yaml'", "'topologies/atlas800t-a2.yaml'", "'\\x00'", "'a' * 5000")


# ---- API arguments ------------------------------------------------------------------------

class UserAlgorithm:
    """A user ``build(args)`` callable that returns something wrong (or a schedule for another call)."""

    def __init__(self, kind: str):
        self.kind = kind

    def __call__(self, args):
        import hcsim
        from hcsim.algorithms.registry import get_algorithm

        if self.kind == "none":
            return None
        if self.kind == "int":
            return 1
        if self.kind == "list":
            return []
        if self.kind == "other_call":  # a valid schedule, for another size
            import dataclasses
            return get_algorithm(args.collective, "ring" if args.collective != "alltoall" else "pairwise").build(
                dataclasses.replace(args, nbytes=args.nbytes + 1))
        if self.kind == "ring":  # the built-in ring, as a user callable: must run
            name = {"alltoall": "pairwise", "alltoallv": "pairwise", "broadcast": "tree", "reduce": "tree"}.get(
                args.collective, "ring")
            return get_algorithm(args.collective, name).build(args)
        if self.kind == "empty":  # no steps: the postcondition cannot hold
            return hcsim.Schedule(args=args, num_chunks=1, steps=[], chunk_bytes=np.array([args.nbytes], dtype=np.int64))
        return self._tampered(args)

    def _tampered(self, args):
        """A valid built-in schedule, then broken in one way (the verifier must say so in one line)."""
        import dataclasses

        from hcsim.algorithms.registry import get_algorithm
        from hcsim.algorithms.schedule import LazySteps, Step

        name = {"alltoall": "pairwise", "alltoallv": "pairwise", "broadcast": "tree", "reduce": "tree"}.get(
            args.collective, "ring")
        good = get_algorithm(args.collective, name).build(args)
        steps = list(good.steps)
        s0 = steps[0]

        def step(**change):
            fields = {f.name: getattr(s0, f.name) for f in dataclasses.fields(Step)}
            fields.update(change)
            return Step(**fields)

        k = self.kind
        if k == "self_transfer":
            steps[0] = step(dst=s0.src.copy())
        elif k == "rank_out_of_range":
            steps[0] = step(dst=np.full_like(s0.dst, args.p))
        elif k == "negative_rank":
            steps[0] = step(src=np.full_like(s0.src, -1))
        elif k == "negative_bytes":
            steps[0] = step(nbytes=-s0.nbytes - 1)
        elif k == "float_arrays":
            steps[0] = step(nbytes=s0.nbytes.astype(float) + 0.5, src=s0.src.astype(float))
        elif k == "ragged_step":
            steps[0] = step(dst=s0.dst[:-1])
        elif k == "not_steps":
            steps = [1, "x", None]
        elif k == "huge_chunk_count":
            return dataclasses.replace(good, num_chunks=2**40)
        elif k == "float_chunk_bytes":
            return dataclasses.replace(good, chunk_bytes=np.asarray(good.chunk_bytes, dtype=float) + 0.25)
        elif k == "many_lazy_steps":  # 10^9 steps, each the first one: must be refused, not walked
            return dataclasses.replace(good, steps=LazySteps(10**9, lambda i: s0))
        elif k == "other_collective":
            other = "allgather" if args.collective != "allgather" else "allreduce"
            return get_algorithm(other, "ring").build(dataclasses.replace(args, collective=other, send_matrix=None))
        else:
            raise AssertionError(k)
        return dataclasses.replace(good, steps=steps)

    def __repr__(self):
        return f"UserAlgorithm({self.kind!r})"


def algorithm_choices(collective: str) -> list:
    from hcsim.algorithms.registry import REGISTRY

    names = list(REGISTRY.get(collective, {}))
    return names + ["auto", "best", None, "mesh/ring", "mesh/nhr", "ring/hd", "mesh/nb", "ring/ring",
                    "mesh/ring/ring", "mesh/hd/nhr"]


_WEIRD_ALGORITHMS = ["", " ", "  ", "\t", "Ring", "RING", "ring ", " ring", "ring\n", "nonexistent", "H-D_R", "fullmesh",
                     "NA", "auto/ring", "best/ring", "ring/auto", "ring/", "/ring", "ring//ring", "ring/ring/ring/ring",
                     "mesh/ring/ring/ring", "mesh/", "a" * 5000, "ring;mesh", "ring,mesh", 0, 1, -1, 1.5, True, [],
                     ["ring"], ("ring",), {"ring"}, {"name": "ring"}, b"ring", Expr(object(), "object()"),
                     UserAlgorithm("none"), UserAlgorithm("int"), UserAlgorithm("list"), UserAlgorithm("other_call"),
                     UserAlgorithm("ring"), UserAlgorithm("empty"), UserAlgorithm("self_transfer"),
                     UserAlgorithm("rank_out_of_range"), UserAlgorithm("negative_rank"), UserAlgorithm("negative_bytes"),
                     UserAlgorithm("float_arrays"), UserAlgorithm("ragged_step"), UserAlgorithm("not_steps"),
                     UserAlgorithm("huge_chunk_count"), UserAlgorithm("float_chunk_bytes"),
                     UserAlgorithm("many_lazy_steps"), UserAlgorithm("other_collective"), "pipeline", "ahc", "rd", "rabenseifner", "bmtree",
                     "double_ring", "tree", "star", "pairwise", "nb", "nhr", "hd", "mesh", "ring"]
_WEIRD_COLLECTIVES = ["", " ", "  ", "AllReduce", "ALLREDUCE", "allreduce ", " allreduce", "all_reduce", "allreduce\n",
                      "all-reduce", "send", "recv", "barrier", "alltoallvc", "others", None, 0, 1, True, ["allreduce"],
                      ("allreduce",), b"allreduce", {"allreduce": 1}, "a" * 5000, "\x00", "ａｌｌｒｅｄｕｃｅ"]


def _bad_ranks(p):
    return [0, 1, -1, -2, p + 1, 10**6, 2**63, 2**64, 10**30, True, False, 1.5, float(p), float("nan"), "3", "all", "",
            [], [0], [0, 0], [0, 1, 0], [-1, 0], [0, p], [0, 10**30], [True, False], [0.0, 1.0], ["npu0", "npu0"],
            ["npu0", 1], ["npu0", "npu1"], ["npu99", "npu0"], ["sw0", "npu0"], ["nic0", "npu0"], ["leaf0", "npu0"],
            [[0], [1]], [None, 1], (0, 1), {0, 1}, "01", "npu0,npu1", b"\x00\x01",
            Expr(range(10**12), "range(10**12)"), Expr(range(2), "range(2)"), Expr(range(p + 5), f"range({p + 5})"),
            Expr(np.int64(2), "np.int64(2)"), Expr(np.array([0, 1]), "np.array([0, 1])"),
            Expr(np.array([[0, 1]]), "np.array([[0, 1]])"), Expr(np.uint8(2), "np.uint8(2)"),
            Expr(np.float64(2.0), "np.float64(2.0)"), Fresh("iter([0, 1])"),
            Fresh("itertools.count()"), {"a": 1}, None]


_BAD_ROOT = [None, "3", "0", -1, -(2**63), 2**63, 10**30, True, False, 1.0, 0.5, float("nan"), [0], (0,), b"\x00",
             Expr(np.int64(1), "np.int64(1)"), Expr(np.int32(-1), "np.int32(-1)"), Expr(np.uint64(0), "np.uint64(0)")]
_BAD_MODE = ["DES", "Des", "analytic", "analytical ", "", " ", None, 0, 1, True, ["des"], "event", "des\n", b"des"]
_BAD_ROUTING = ["ECMP", "Spray", "ecmp ", "", None, 0, ["ecmp"], "random", "shortest", b"ecmp"]
_BAD_SEED = [None, "x", "0", -1, 2**32, 2**32 - 1, 2**63, 2**64, 10**100, True, 1.5, float("nan"), [0],
             Expr(np.int64(5), "np.int64(5)"), Expr(np.uint64(2**64 - 1), "np.uint64(2**64 - 1)")]
_BAD_OVERHEAD = [float("nan"), float("inf"), float("-inf"), -1.0, -1e-9, -0.0, 0.0, 1e300, 1e308, 5e-324, 1e-300, 10.0,
                 1e6, "1", "1e-6", None, True, False, [1e-6], 1, 2**70, 10**400,
                 Expr(np.float64("nan"), "np.float64('nan')"), Expr(np.float32(1e-6), "np.float32(1e-6)"),
                 Expr(decimal.Decimal("1e-6"), "decimal.Decimal('1e-6')"), Expr(fractions.Fraction(1, 10**6), "fractions.Fraction(1, 10**6)"),
                 Expr(complex(1e-6, 0), "complex(1e-6, 0)")]
_BAD_FLAG = ["yes", "no", 1, 0, None, "True", "auto ", "", 2, 1.0, [True], Expr(np.bool_(True), "np.bool_(True)")]
_BAD_QPS = [0, 9, -1, 2**63, "1", 1.0, True, None, float("nan"), Expr(np.int64(2), "np.int64(2)")]
_BAD_MAX_TRANSFERS = [0, -1, 1, 2, 5, 2**63, 2**70, 10**100, "x", None, 1.5, True, float("inf"), Expr(np.int64(10), "np.int64(10)")]


def _hccl_configs():
    from hcsim.hccl.selection import HcclConfig

    return [Expr(HcclConfig(), "HcclConfig()"), Expr(HcclConfig(buffer_bytes=4096), "HcclConfig(buffer_bytes=4096)"),
            Expr(HcclConfig(buffer_bytes=1), "HcclConfig(buffer_bytes=1)"),
            Expr(HcclConfig(buffer_bytes=1000), "HcclConfig(buffer_bytes=1000)"),
            Expr(HcclConfig(deterministic=True), "HcclConfig(deterministic=True)"),
            Expr(HcclConfig(qps_per_connection=4), "HcclConfig(qps_per_connection=4)"),
            Expr(HcclConfig(expansion_mode="AIV"), "HcclConfig(expansion_mode='AIV')"),
            Expr(HcclConfig(expansion_mode="HOST"), "HcclConfig(expansion_mode='HOST')")]


_BAD_HCCL = [1, "x", {}, {"buffer_bytes": 1}, True, [], "HcclConfig()", 0]


@st.composite
def send_matrix(draw, p: int):
    """AlltoAllV send matrices: valid small ones and ragged, negative, non-integer, huge ones."""
    kind = draw(st.integers(0, 5))
    if kind <= 1:
        return [[draw(st.integers(0, 4096)) for _ in range(p)] for _ in range(p)]
    if kind == 2:
        rows = draw(st.integers(0, p + 2))
        return [[draw(st.integers(0, 64)) for _ in range(draw(st.integers(0, p + 2)))] for _ in range(rows)]
    if kind == 3:
        m = [[draw(st.integers(0, 64)) for _ in range(p)] for _ in range(p)]
        i, j = draw(st.integers(0, p - 1)), draw(st.integers(0, p - 1))
        m[i][j] = draw(st.sampled_from([-1, -(2**63), 2**63, 2**50, 2**50 + 1, 10**30, 1.5, 2.0, float("nan"),
                                        float("inf"), "8", "8K", None, True, [1], Expr(np.int64(3), "np.int64(3)"),
                                        Expr(np.float64(2.5), "np.float64(2.5)"), Expr(np.uint64(2**64 - 1), "np.uint64(2**64 - 1)")]))
        return m
    if kind == 4:
        return [[0] * p for _ in range(p)]
    return draw(st.sampled_from([None, 1, "x", [], [[]], [1, 2], "0" * p, b"\x00" * p,
                                 Expr(np.zeros((p, p), dtype=np.int64), f"np.zeros(({p}, {p}), dtype=np.int64)"),
                                 Expr(np.ones((p, p)) * 8, f"np.ones(({p}, {p})) * 8"),
                                 Expr(np.ones((p, p, 1), dtype=int), f"np.ones(({p}, {p}, 1), dtype=int)"),
                                 Expr(np.full((p, p), -1), f"np.full(({p}, {p}), -1)"),
                                 Expr(np.full((p, p), 2**62), f"np.full(({p}, {p}), 2**62)"),
                                 Expr(np.ones((p, p), dtype=bool), f"np.ones(({p}, {p}), dtype=bool)"),
                                 {i: [1] * p for i in range(p)}, [{}] * p, ["abcd"] * p]))


@dataclass
class Call:
    """One API call: function name, positional and keyword arguments (Expr-wrapped where needed)."""

    fn: str
    args: list
    kwargs: dict = field(default_factory=dict)
    expect_ranks: int | None = None

    def real(self):
        return [unwrap(a) for a in self.args], {k: unwrap(v) for k, v in self.kwargs.items()}

    def repro(self) -> str:
        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"{self.fn}({', '.join(parts)})"


@st.composite
def simulate_call(draw, fn: str = "hcsim.simulate", max_mutations: int = 3):
    """A ``simulate`` call: a valid, small base, then 0-3 arguments replaced by odd or wrong values."""
    topo, n = topology_value(draw(st.sampled_from(SMALL_TOPOLOGIES)))
    coll = draw(st.sampled_from(COLLECTIVES))
    p = draw(st.one_of(st.just(None), st.integers(2, min(n, 8))))
    p_eff = n if p is None else p
    args = [topo, coll, draw(valid_small_size)]
    kw: dict = {}
    algo = draw(st.sampled_from(algorithm_choices(coll)))
    if algo is not None:
        kw["algorithm"] = algo
    if p is not None:
        kw["ranks"] = draw(st.sampled_from([p, list(range(p)), [f"npu{i}" for i in range(p)],
                                            list(range(n - p, n)), sorted(_random.Random(p * 7 + n).sample(range(n), p))]))
    if coll in ("broadcast", "reduce", "scatter", "gather") or draw(st.booleans()):
        kw["root"] = draw(st.integers(0, p_eff - 1))
    if coll == "alltoallv":
        kw["send_matrix"] = [[draw(st.integers(0, 2048)) for _ in range(p_eff)] for _ in range(p_eff)]
        if draw(st.booleans()):
            args[2] = None
    for key, strat in (("mode", st.sampled_from(["des", "analytical"])), ("routing", st.sampled_from(["ecmp", "spray"])),
                       ("ecmp_seed", st.integers(0, 2**32 - 1)), ("step_overhead_s", st.sampled_from([0.0, 1e-6, 2.5e-5])),
                       ("launch_overhead_s", st.sampled_from([0.0, 1e-6, 3e-5])),
                       ("record", st.sampled_from(["auto", True, False])), ("verify", st.sampled_from(["auto", True, False])),
                       ("qps", st.integers(1, 8))):
        if draw(st.integers(0, 3)) == 0:
            kw[key] = draw(strat)
    if draw(st.integers(0, 5)) == 0:
        kw["hccl"] = draw(st.sampled_from(_hccl_configs()))
    if draw(st.integers(0, 4)) == 0:
        kw.pop("algorithm", None)
        kw["hccl_algo"] = draw(valid_hccl_algo)
        if draw(st.booleans()):
            kw["algorithm"] = "auto"
    valid_ranks = p_eff
    # mutations
    mutable = ["topology", "collective", "size", "algorithm", "ranks", "root", "mode", "routing", "ecmp_seed",
               "step_overhead_s", "launch_overhead_s", "record", "verify", "send_matrix", "hccl_algo", "hccl", "qps",
               "max_transfers"]
    n_mut = min(max_mutations, draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3])))
    for key in draw(st.lists(st.sampled_from(mutable), min_size=n_mut, max_size=n_mut, unique=True)):
        valid_ranks = None if key in ("ranks", "topology") else valid_ranks
        if key == "topology":
            e = draw(st.sampled_from(_BAD_TOPOLOGY))
            args[0] = Expr(eval(e), e)  # noqa: S307 - literals above
        elif key == "collective":
            args[1] = draw(st.one_of(st.sampled_from(_WEIRD_COLLECTIVES), st.sampled_from(COLLECTIVES), st.text(max_size=8)))
        elif key == "size":
            args[2] = draw(any_size)
        elif key == "algorithm":
            kw["algorithm"] = draw(st.one_of(st.sampled_from(_WEIRD_ALGORITHMS), st.text(max_size=10),
                                             st.sampled_from(algorithm_choices("allreduce"))))
        elif key == "ranks":
            kw["ranks"] = draw(st.one_of(st.sampled_from(_bad_ranks(n)), st.integers(-3, n + 3),
                                         st.lists(st.integers(-1, n), max_size=n + 2)))
        elif key == "root":
            kw["root"] = draw(st.one_of(st.sampled_from(_BAD_ROOT), st.integers(-2, p_eff + 2)))
        elif key == "mode":
            kw["mode"] = draw(st.sampled_from(_BAD_MODE))
        elif key == "routing":
            kw["routing"] = draw(st.sampled_from(_BAD_ROUTING))
        elif key == "ecmp_seed":
            kw["ecmp_seed"] = draw(st.one_of(st.sampled_from(_BAD_SEED), st.integers()))
        elif key in ("step_overhead_s", "launch_overhead_s"):
            kw[key] = draw(st.one_of(st.sampled_from(_BAD_OVERHEAD), st.floats()))
        elif key in ("record", "verify"):
            kw[key] = draw(st.sampled_from(_BAD_FLAG))
        elif key == "send_matrix":
            kw["send_matrix"] = draw(send_matrix(p_eff))
        elif key == "hccl_algo":
            kw["hccl_algo"] = draw(hccl_algo_text())
        elif key == "hccl":
            kw["hccl"] = draw(st.sampled_from(_BAD_HCCL + _hccl_configs()))
        elif key == "qps":
            kw["qps"] = draw(st.sampled_from(_BAD_QPS))
        elif key == "max_transfers":
            kw["max_transfers"] = draw(st.sampled_from(_BAD_MAX_TRANSFERS))
    return Call(fn, args, kw, expect_ranks=valid_ranks)


@st.composite
def sweep_call(draw):
    """A ``sweep`` call: small valid sizes and algorithm lists, then odd sizes/factor/algorithms."""
    base = draw(simulate_call("hcsim.sweep", max_mutations=1))
    topo, coll, _ = base.args
    kw = {k: v for k, v in base.kwargs.items() if k not in ("algorithm",)}
    sizes = draw(st.one_of(
        st.tuples(valid_small_size, valid_small_size).map(lambda t: (t[0], t[1])),
        st.lists(valid_small_size, min_size=1, max_size=3),
        valid_small_size,
    ))
    algos = draw(st.one_of(st.none(), st.lists(st.sampled_from(algorithm_choices(coll) if isinstance(coll, str) else ["ring"]),
                                               min_size=1, max_size=3)))
    if algos is None and coll in ("allreduce", "allgather", "reducescatter", "broadcast") and not draw(st.integers(0, 3)) == 0:
        algos = ["ring"]
    for key in draw(st.lists(st.sampled_from(["sizes", "factor", "algorithms", "sizes", "algorithm_kw"]), max_size=2,
                             unique=True)):
        if key == "algorithm_kw":  # sweep passes **kwargs to simulate, which has its own algorithm
            kw["algorithm"] = draw(st.sampled_from(["ring", None, "auto"]))
        elif key == "sizes":
            sizes = draw(st.one_of(
                st.tuples(any_size, any_size), st.lists(any_size, max_size=4), any_size,
                st.sampled_from([(), (8,), (8, 16, 32), [], {8, 16}, {"a": 8}, None, ("8", "64K", "2"),
                                 ("64K", "8"), ("1", "1"), ("1", "2**20"), Expr(range(1, 4), "range(1, 4)"),
                                 Fresh("iter([8, 16])"), Expr(np.array([8, 16]), "np.array([8, 16])"),
                                 Expr([8] * 5000, "[8] * 5000"), ("1", "1P"), (1, 2**50)])))
        elif key == "factor":
            kw["factor"] = draw(st.sampled_from([0, 1, -2, 1.5, 2.0, True, "2", None, 2**63, 10**30, 1024, 3, 2**50,
                                                 float("nan"), Expr(np.int64(2), "np.int64(2)")]))
        elif key == "algorithms":
            algos = draw(st.sampled_from([[], (), "ring", "auto", ["ring", "nonexistent"], [None], [1], 5, {"ring"},
                                          ["ring", "ring"], [UserAlgorithm("ring")], UserAlgorithm("none"), [""],
                                          Fresh("iter(['ring'])"), ["best", "auto"], {"ring": 1}]))
    args = [topo, coll, sizes]
    if algos is not None:
        args.append(algos)
    return Call("hcsim.sweep", args, kw, expect_ranks=base.expect_ranks)


SELECT_TOPOLOGIES = ("'atlas800t-a2'", "load_topology('atlas900-a2-pod', servers=2)", "'atlas800-9000'",
                     "load_topology('atlas900-a3-superpod', nodes=1)", "builders.full_mesh(4, 10e9, 1e-6)",
                     "builders.leaf_spine(2, 2, 2, 10e9, 1e-6)")


@st.composite
def select_call(draw):
    """A ``select`` call on a small Ascend topology with small sizes, then odd arguments."""
    topo, n = topology_value(draw(st.sampled_from(SELECT_TOPOLOGIES)))
    coll = draw(st.sampled_from(COLLECTIVES))
    lo = draw(st.sampled_from(["8", "1K", "4K", 64, "16K"]))
    hi = draw(st.sampled_from(["8", "4K", "16K", "64K", 4096]))
    sizes = (lo, hi) if draw(st.booleans()) else [lo, hi]
    kw: dict = {}
    if draw(st.booleans()):
        kw["mode"] = draw(st.sampled_from(["des", "analytical"]))
    if draw(st.integers(0, 3)) == 0:
        kw["hccl_algo"] = draw(valid_hccl_algo)
    if draw(st.integers(0, 3)) == 0:
        kw["hccl"] = draw(st.sampled_from(_hccl_configs()))
    if draw(st.integers(0, 3)) == 0:
        kw["ranks"] = draw(st.integers(2, min(n, 8)))
    if coll == "alltoallv":
        p = kw.get("ranks", n)
        kw["send_matrix"] = [[64] * p for _ in range(p)]
    args = [topo, coll, sizes]
    for key in draw(st.lists(st.sampled_from(["collective", "sizes", "factor", "mode", "hccl_algo", "hccl", "ranks",
                                              "root", "topology", "algorithm", "routing"]), max_size=2, unique=True)):
        if key == "collective":
            args[1] = draw(st.sampled_from(_WEIRD_COLLECTIVES))
        elif key == "sizes":
            args[2] = draw(st.one_of(st.tuples(any_size, any_size), st.lists(any_size, max_size=3), any_size))
        elif key == "factor":
            kw["factor"] = draw(st.sampled_from([0, 1, -2, 1.5, True, "2", None, 2**63, 4]))
        elif key == "mode":
            kw["mode"] = draw(st.sampled_from(_BAD_MODE))
        elif key == "hccl_algo":
            kw["hccl_algo"] = draw(hccl_algo_text())
        elif key == "hccl":
            kw["hccl"] = draw(st.sampled_from(_BAD_HCCL))
        elif key == "ranks":
            kw["ranks"] = draw(st.sampled_from(_bad_ranks(n)))
        elif key == "root":
            kw["root"] = draw(st.sampled_from(_BAD_ROOT + [1, n - 1]))
        elif key == "topology":
            e = draw(st.sampled_from(_BAD_TOPOLOGY))
            args[0] = Expr(eval(e), e)  # noqa: S307 - literals above
        elif key == "algorithm":  # select has no algorithm: it goes to simulate's **kwargs
            kw["algorithm"] = "ring"
        elif key == "routing":
            kw["routing"] = draw(st.sampled_from(_BAD_ROUTING + ["spray"]))
    return Call("hcsim.select", args, kw, expect_ranks=None)


# ---- topology files -----------------------------------------------------------------------

BUILTIN_TOPOLOGY_FILES = sorted((REPO / "topologies").glob("*.yaml"))

SMALL_BUILDER_DOCS = [
    {"name": "t-ring", "builder": "ring", "params": {"n": 4, "bandwidth_GBps": 10, "latency_us": 1}},
    {"name": "t-mesh", "builder": "full_mesh", "params": {"n": 3, "bandwidth_GBps": 25, "latency_us": 0.5}},
    {"name": "t-switch", "builder": "single_switch", "params": {"n": 4, "bandwidth_GBps": 12.5, "latency_us": 1,
                                                                "npus_per_server": 2}},
    {"name": "t-ls", "builder": "leaf_spine", "params": {"leaves": 2, "npus_per_leaf": 2, "spines": 2,
                                                         "bandwidth_GBps": 25, "latency_us": 1, "oversubscription": 2}},
    {"name": "t-torus", "builder": "torus", "params": {"dims": [2, 3], "bandwidth_GBps": 10}},
    {"name": "t-tiered", "builder": "tiered_mesh", "params": {"dims": [2, 2], "bandwidth_GBps": [20, 5],
                                                              "latency_us": [1, 2]}},
    {"name": "t-a2", "builder": "atlas800t_a2", "product": "910B", "params": {"npus_per_server": 4},
     "defaults": {"step_overhead_us": 1.02, "launch_overhead_us": 10,
                  "launch_overhead_by_collective_us": {"allreduce": 20, "alltoall": 40}}},
    {"name": "t-pod", "builder": "atlas900_a2_pod", "product": "910B", "params": {"servers": 2, "npus_per_server": 2}},
    {"name": "t-a3", "builder": "atlas900_a3_superpod", "product": "910_93", "params": {"nodes": 1, "npus_per_node": 2}},
    {"name": "t-910a", "builder": "atlas800_9000", "product": "910A", "params": {"servers": 1}},
    {"name": "t-regimes", "builder": "single_switch", "params": {"n": 4, "bandwidth_GBps": 0.0125},
     "defaults": {"step_overhead_us": 50, "message_regimes": [
         {"from_bytes": 0, "overhead_us": 0, "efficiency": 0.9},
         {"from_bytes": 65536, "overhead_us": 200, "efficiency": 0.95, "pair_limit": False,
          "overhead_when": "receiver_sending", "new_peer_efficiency": 0.8, "many_peer_efficiency": 0.7}]}},
]

SMALL_EXPLICIT_DOCS = [
    {"name": "x-pair", "npus": [{"name": "a"}, {"name": "b"}],
     "links": [{"src": "a", "dst": "b", "bandwidth_GBps": 10, "latency_us": 1}]},
    {"name": "x-star", "description": "three NPUs on a switch",
     "npus": [{"name": "a", "server": 0}, {"name": "b", "server": 0}, {"name": "c", "server": 1, "local_index": 0}],
     "nodes": [{"name": "sw", "kind": "switch"}],
     "links": [{"src": n, "dst": "sw", "bandwidth_GBps": 25, "latency_us": 0.5, "tier": "roce"} for n in "abc"]},
    {"name": "x-oneway", "npus": [{"name": "a", "reduce_GBps": 5, "injection_GBps": 8, "ejection_GBps": 8},
                                 {"name": "b", "half_duplex": True, "exchange_GBps": 3, "engine_GBps": 6}],
     "links": [{"src": "a", "dst": "b", "bandwidth_GBps": 10, "bidirectional": False, "inline_reduce": True},
               {"src": "b", "dst": "a", "bandwidth_GBps": 5, "latency_us": 2, "bidirectional": False}],
     "defaults": {"step_overhead_us": 1, "launch_overhead_us": 5}},
    {"name": "x-nic", "product": "910B", "npus": [{"name": f"n{i}", "server": i // 2, "local_index": i % 2} for i in range(4)],
     "nodes": [{"name": "nic0", "kind": "nic"}, {"name": "pcie", "kind": "pcie"}, {"name": "sw", "kind": "switch"}],
     "links": [{"src": "n0", "dst": "n1", "bandwidth_GBps": 20, "tier": "hccs", "inline_reduce": True},
               {"src": "n2", "dst": "n3", "bandwidth_GBps": 20, "tier": "hccs"},
               {"src": "n0", "dst": "nic0", "bandwidth_GBps": 20}, {"src": "nic0", "dst": "sw", "bandwidth_GBps": 20},
               {"src": "n1", "dst": "pcie", "bandwidth_GBps": 27}, {"src": "pcie", "dst": "sw", "bandwidth_GBps": 27},
               {"src": "n2", "dst": "sw", "bandwidth_GBps": 20}, {"src": "n3", "dst": "sw", "bandwidth_GBps": 20}]},
]

_HOSTILE_VALUES = [None, 0, -1, -0.0, 1, 2, 0.5, 1e-320, 5e-324, 1e308, 1.7976931348623157e308, float("inf"),
                   float("-inf"), float("nan"), True, False, "", " ", "1", "x", "10 GB/s", [], [1], [1, 2, 3, 4],
                   [[1]], {}, {"a": 1}, 2**31, 2**63, 10**30, 10**6, 100000, 131073, 4096, 3, "npu0", "\x00",
                   "a" * 300, "910B", "HOST"]


def _paths(node, prefix=(), _open=None):
    """Every (path, value) in a YAML tree; a mutation that put a container inside itself (a
    cycle) is walked once, not forever (a RecursionError in the generator, make fuzz 2026-11-24)."""
    yield prefix, node
    if not isinstance(node, (dict, list)) or len(prefix) > 64:
        return
    _open = set() if _open is None else _open
    if id(node) in _open:
        return
    _open.add(id(node))
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for k, v in items:
        yield from _paths(v, prefix + (k,), _open)
    _open.discard(id(node))


def _set(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def _delete(doc, path):
    node = doc
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]


def _copy(doc):
    return yaml.safe_load(yaml.safe_dump(doc)) if doc is not None else None


_TOPO_KEYS = ["name", "description", "builder", "params", "defaults", "npus", "nodes", "links", "provenance", "product",
              "servers", "n", "dims", "bandwidth_GBps", "latency_us", "src", "dst", "kind", "tier", "server", "pod",
              "local_index", "reduce_GBps", "step_overhead_us", "message_regimes", "from_bytes", "efficiency",
              "bandwidth_Bps", "latency_s", "npus_per_server", "oversubscription", "half_duplex", "bidirectional",
              "leaves", "spines", "nodes_", "expansion_mode", "modes", "HOST", "AIV", "overhead_when", "pair_limit"]


@st.composite
def topology_doc(draw):
    """(text or bytes, what it came from): a topology file, valid or mutated."""
    source = draw(st.integers(0, 2))
    if source == 0 and BUILTIN_TOPOLOGY_FILES:
        path = draw(st.sampled_from(BUILTIN_TOPOLOGY_FILES))
        origin = f"topologies/{path.name}"
        doc = yaml.safe_load(path.read_text())
        # keep runs quick: the pods get small unless a mutation says otherwise
        if doc.get("builder") == "atlas900_a2_pod":
            doc["params"]["servers"] = 2
        if doc.get("builder") == "atlas900_a3_superpod":
            doc["params"]["nodes"] = 1
        text_source = path.read_text()
    elif source == 1:
        doc = _copy(draw(st.sampled_from(SMALL_BUILDER_DOCS)))
        origin = f"builder-form {doc['name']}"
        text_source = None
    else:
        doc = _copy(draw(st.sampled_from(SMALL_EXPLICIT_DOCS)))
        origin = f"explicit-form {doc['name']}"
        text_source = None
    ops = draw(st.lists(st.integers(0, 9), max_size=3))
    desc = []
    for op in ops:
        paths = [p for p, _ in _paths(doc) if p]
        if op <= 3 and paths:  # replace a value
            path = draw(st.sampled_from(paths))
            value = draw(st.one_of(st.sampled_from(_HOSTILE_VALUES), st.integers(), st.floats(), st.text(max_size=6)))
            _set(doc, path, value)
            desc.append(f"{'.'.join(map(str, path))}={value!r}")
        elif op == 4 and paths:  # delete a key or item
            path = draw(st.sampled_from(paths))
            _delete(doc, path)
            desc.append(f"del {'.'.join(map(str, path))}")
        elif op == 5:  # add a key somewhere
            dicts = [p for p, v in _paths(doc) if isinstance(v, dict)]
            if dicts:
                path = draw(st.sampled_from(dicts))
                key = draw(st.sampled_from(_TOPO_KEYS))
                value = draw(st.sampled_from(_HOSTILE_VALUES))
                _set(doc, path + (key,), value) if path else doc.__setitem__(key, value)
                desc.append(f"add {'.'.join(map(str, path + (key,)))}={value!r}")
        elif op == 6:  # duplicate a list item
            lists = [p for p, v in _paths(doc) if isinstance(v, list) and v]
            if lists:
                path = draw(st.sampled_from(lists))
                node = doc
                for k in path:
                    node = node[k]
                node.append(_copy(node[0]) if isinstance(node[0], dict | list) else node[0])
                desc.append(f"dup {'.'.join(map(str, path))}[0]")
        elif op == 7:  # scale a builder parameter way up (refused up front, or small enough)
            if isinstance(doc, dict) and isinstance(doc.get("params"), dict) and doc["params"]:
                key = draw(st.sampled_from(sorted(doc["params"], key=str)))
                value = draw(st.sampled_from([1000, 10**5, 10**6, 10**9, 2**40, 300, 70, [1000, 1000], [1000, 1000, 1000],
                                              [2, 2, 2, 2], [1, 1], [0, 5], [65536, 2], [512, 512]]))
                doc["params"][key] = value
                desc.append(f"params.{key}={value!r}")
        elif op == 8:  # the whole document replaced by another type
            doc = draw(st.sampled_from([None, [], [doc], "atlas800t-a2", 42, {"builder": None}, {"npus": []}, {}]))
            desc.append(f"doc={doc!r}"[:60])
        else:  # rename a key
            dicts = [p for p, v in _paths(doc) if isinstance(v, dict) and v]
            if dicts:
                path = draw(st.sampled_from(dicts))
                node = doc
                for k in path:
                    node = node[k]
                old = draw(st.sampled_from(sorted(node, key=str)))
                new = draw(st.sampled_from(_TOPO_KEYS + [old.upper() if isinstance(old, str) else "X", f"{old}_"]))
                node[new] = node.pop(old)
                desc.append(f"rename {old}->{new}")
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True) if not (text_source and not ops) else text_source
    raw: bytes = text.encode("utf-8")
    # text-level mutations
    tmode = draw(st.integers(0, 12))
    if tmode == 0:
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut]
        desc.append(f"truncated at {cut}")
    elif tmode == 1:
        i = draw(st.integers(0, len(raw)))
        junk = draw(st.sampled_from([b"\xff\xfe", b"\x80", b"\xc3\x28", b"\x00", b"\xef\xbb\xbf", b"\t", b"\r",
                                     b"\x1b[31m", b"{", b"[", b"*", b"&a", b"!!python/object:os.system ",
                                     b": :", b"\n  - ", b"'", b'"', b"%YAML 1.1\n", b"---\n", b"...\n"]))
        raw = raw[:i] + junk + raw[i:]
        desc.append(f"inserted {junk!r} at {i}")
    elif tmode == 2:
        raw = draw(st.sampled_from([b"", b"\n", b"---", b"null", b"[]", b"{}", b"\xff\xfe\x00\x00", b"\x00" * 16,
                                    "名前: 値".encode(), "name: x\nbuilder: ring\nparams: {n: ４, bandwidth_GBps: 1}\n".encode(),
                                    b"name: x\nname: y\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: 1}\n",
                                    b"!!python/object/apply:os.system ['true']\n",
                                    b"name: !!binary aGVsbG8=\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: 1, latency_us: 2001-12-14}\n",
                                    b"name: x\nbuilder: ring\nparams: !!set {n, bandwidth_GBps}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 0x10, bandwidth_GBps: .inf}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 1e3, bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: .nan}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: 1e-320}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: 1e300, latency_us: 1e300}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 2, bandwidth_GBps: 1, latency_us: 1e-320}\n",
                                    b"name: x\nbuilder: torus\nparams: {dims: [1000, 1000, 1000], bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: ring\nparams: {n: 100000000, bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: full_mesh\nparams: {n: 100000, bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: leaf_spine\nparams: {leaves: 100000, npus_per_leaf: 100000, spines: 100000, bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: tiered_mesh\nparams: {dims: [100000, 100000], bandwidth_GBps: 1}\n",
                                    b"name: x\nbuilder: atlas900_a2_pod\nparams: {servers: 1000000}\n",
                                    b"name: x\nbuilder: atlas900_a3_superpod\nparams: {nodes: 100000, superpods: 1000}\n",
                                    b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                                    b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nname: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
                                    b"name: x\nbuilder: ring\nparams: &p {n: 2, bandwidth_GBps: 1, extra: *p}\n",
                                    b"name: x\nnpus: &n [{name: a}, {name: b}]\nlinks: [{src: a, dst: b, bandwidth_GBps: 1}]\nnodes: *n\n",
                                    b"[" * 5000 + b"]" * 5000, b"- " * 3000,
                                    b"name: x\r\nbuilder: ring\r\nparams: {n: 3, bandwidth_GBps: 1}\r\n",
                                    b"\xef\xbb\xbfname: x\nbuilder: ring\nparams: {n: 3, bandwidth_GBps: 1}\n",
                                    "name: x\nbuilder: ring\nparams: {n: 3, bandwidth_GBps: 1}\n".encode("utf-16")]))
        origin, desc = "fixed text", [repr(raw[:60])]
    if tmode == 3:
        raw = raw.replace(b": ", b":", 1)
        desc.append("': ' -> ':' once")
    return raw, origin + (" " + "; ".join(desc) if desc else "")


# ---- builder calls ------------------------------------------------------------------------

_BUILDER_ARGS = {
    "builders.ring": ("n", "bandwidth_Bps", "latency_s"),
    "builders.full_mesh": ("n", "bandwidth_Bps", "latency_s"),
    "builders.single_switch": ("n", "bandwidth_Bps", "latency_s"),
    "builders.leaf_spine": ("leaves", "npus_per_leaf", "spines", "bandwidth_Bps", "latency_s"),
    "builders.torus": ("dims", "bandwidth_Bps", "latency_s"),
    "builders.tiered_mesh": ("dims", "bandwidth_Bps", "latency_s"),
}
_BUILDER_VALID = {"n": st.integers(2, 6), "bandwidth_Bps": st.sampled_from([1e9, 10e9, 25e9]),
                  "latency_s": st.sampled_from([0.0, 1e-6, 5e-6]), "leaves": st.integers(1, 3),
                  "npus_per_leaf": st.integers(1, 3), "spines": st.integers(1, 3),
                  "dims": st.sampled_from([(2, 2), (2, 3), (3, 3), [2, 2], (2, 2, 2)])}
_BUILDER_KW = {
    "builders.ring": {"tier": st.sampled_from(["generic", "hccs"]), "bidirectional": st.booleans(),
                      "npus_per_server": st.integers(1, 4)},
    "builders.full_mesh": {"inline_reduce": st.booleans(), "npus_per_server": st.integers(1, 4),
                           "reduce_Bps": st.sampled_from([1e9, 10e9])},
    "builders.single_switch": {"npus_per_server": st.integers(1, 4), "injection_Bps": st.sampled_from([5e9, 1e10])},
    "builders.leaf_spine": {"oversubscription": st.sampled_from([1.0, 2, 0.5]), "npus_per_server": st.integers(1, 2)},
    "builders.torus": {"npus_per_server": st.integers(1, 4)},
    "builders.tiered_mesh": {"inline_reduce": st.sampled_from([True, (True, False)])},
    "ascend.atlas800t_a2": {"npus_per_server": st.integers(1, 8), "endpoint_bandwidth_Bps": st.sampled_from([None, 50e9])},
    "ascend.atlas900_a2_pod": {"servers": st.integers(1, 3), "npus_per_server": st.integers(1, 4),
                               "servers_per_leaf": st.integers(1, 4), "spines": st.integers(1, 3),
                               "oversubscription": st.sampled_from([1.0, 2.0])},
    "ascend.atlas800_9000": {"servers": st.integers(1, 2), "spines": st.integers(1, 2)},
    "ascend.atlas900_a3_superpod": {"nodes": st.integers(1, 2), "npus_per_node": st.integers(1, 4),
                                    "superpods": st.integers(1, 2), "l2_switches": st.integers(1, 3),
                                    "spines": st.integers(1, 3)},
}
_BUILDER_HOSTILE = [0, 1, -1, 2**31, 2**63, 10**9, 10**7, 10**5, 131073, 5000, 2.0, 2.5, True, None, "4", "x", [], [4],
                    (4,), (0, 0), (1, 1), (1000, 1000), (1000, 1000, 1000), (2, 2, 2, 2), (-2, 2), (2.0, 2.0),
                    (True, 2), float("nan"), float("inf"), -1e9, 0.0, 5e-324, 1e-300, 1e308, 1e300, -0.0,
                    Expr(np.int64(4), "np.int64(4)"), Expr(np.float64(1e9), "np.float64(1e9)"),
                    Expr(np.float64("nan"), "np.float64('nan')"), Expr(decimal.Decimal(1), "decimal.Decimal(1)"),
                    Expr(range(2, 4), "range(2, 4)"), Fresh("iter([2, 2])"), "npu0", b"x", {}, object]


@functools.cache
def _builder_keywords(fn: str) -> list:
    """Keywords a builder takes: its own parameters and, when it forwards **npu_kwargs, the
    NpuSpec fields it does not set itself (an unknown keyword is Python's own TypeError)."""
    import dataclasses
    import inspect

    from hcsim.topology import ascend, builders
    from hcsim.topology.spec import NpuSpec

    mod, name = fn.split(".")
    sig = inspect.signature(getattr({"builders": builders, "ascend": ascend}[mod], name))
    out = [k for k, p in sig.parameters.items() if p.kind is not p.VAR_KEYWORD]
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        out += [f.name for f in dataclasses.fields(NpuSpec) if f.name not in ("server", "pod", "local_index")]
    return sorted(out)


@st.composite
def builder_call(draw):
    """A topology builder call (generic or Ascend), valid and small, then odd arguments."""
    fn = draw(st.sampled_from(sorted(_BUILDER_KW)))
    names = _BUILDER_ARGS.get(fn, ())
    args = [draw(_BUILDER_VALID[a]) for a in names]
    kw = {k: draw(s) for k, s in _BUILDER_KW[fn].items() if draw(st.booleans())}
    for _ in range(draw(st.integers(0, 3))):
        slots = list(range(len(args))) + _builder_keywords(fn)
        slot = draw(st.sampled_from(slots))
        value = draw(st.one_of(st.sampled_from(_BUILDER_HOSTILE), st.integers(-3, 12), st.floats()))
        if isinstance(slot, int):
            args[slot] = value
        elif slot in names:
            args[names.index(slot)] = value
        else:
            kw[slot] = value
    return Call(f"hcsim.topology.{fn}", args, kw)


# ---- measured files -----------------------------------------------------------------------

MEASURED_FILES = sorted(
    [*(REPO / "docs/data/published").glob("*.csv"), *(REPO / "docs/data/published").glob("*.txt"),
     *(REPO / "tests/data").glob("*.txt"), *(REPO / "docs/data").glob("validation_*.csv")], key=str)

_NUM_TOKEN = re.compile(rb"(?<![A-Za-z_])-?\d+(\.\d+)?(e[-+]?\d+)?(?![A-Za-z_])")


@st.composite
def measured_file(draw):
    """(bytes, origin): a measured file from the repository, mutated."""
    path = draw(st.sampled_from(MEASURED_FILES))
    raw = path.read_bytes()
    origin = str(path.relative_to(REPO))
    desc = []
    lines = raw.split(b"\n")
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.integers(0, 9))
        if op <= 2:  # replace a number
            spans = [(i, m.span()) for i, line in enumerate(lines) for m in _NUM_TOKEN.finditer(line)]
            if spans:
                i, (a, b) = draw(st.sampled_from(spans))
                tok = draw(st.sampled_from([b"nan", b"NaN", b"inf", b"-inf", b"-1", b"0", b"0.0", b"1e400", b"-1e400",
                                            b"abc", b"", b"1.5", b"9" * 30, b"1e-400", b"18446744073709551616",
                                            b"9223372036854775808", b"-9223372036854775809", b"1_000", b"\xff",
                                            b"\xd9\xa3", b"8K", b"1e3", b"0x10", b" ", b"None", b"True", b"2.5e9"]))
                lines[i] = lines[i][:a] + tok + lines[i][b:]
                desc.append(f"line {i + 1}: number -> {tok!r}")
        elif op == 3 and lines:
            i = draw(st.integers(0, len(lines) - 1))
            del lines[i]
            desc.append(f"del line {i + 1}")
        elif op == 4 and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            desc.append(f"dup line {i + 1}")
        elif op == 5 and lines:
            i = draw(st.integers(0, len(lines) - 1))
            cut = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:cut]
            desc.append(f"cut line {i + 1} at {cut}")
        elif op == 6 and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = lines[i].replace(b",", draw(st.sampled_from([b";", b",,", b"\t", b""])), 1).replace(b"|", b"", 1)
            desc.append(f"separator changed in line {i + 1}")
        elif op == 7:
            i = draw(st.integers(0, len(lines)))
            new = draw(st.sampled_from([b"\xff\xfe\xfd", b"mpirun -n 0 ./bin/all_reduce_test",
                                        b"mpirun -n 99999999999999999999 ./bin/bogus_test",
                                        b"mpirun -n 4 ./bin/alltoallv_test", b"data_size(Bytes): | aveg_time(us):",
                                        b"8 | x | y", b"0 | 1.0 | 1.0 | success", b"-8 | 1 | 1",
                                        b"99999999999999999999 | 1.0 | 1 | success", b"8 | 0 | 0 | success",
                                        b"8 | -5 | 0 | success", b"8 | nan | 0 | success", b"#  Rank  0 Group",
                                        b"1 2 3 4 5 6 7 8 9 10 11 12", b"8 2 float sum -1 nan x y 0 1 2 3 0",
                                        b"bogus_perf", b"all_gather_perf", b"op,bytes,time_us", b"collective,size_bytes,time_us",
                                        b"allreduce,8,5", b"allreduce,8,", b",,,", b"\x00", b"\r", b"a,b,c\n1,2,3",
                                        b"sendrecv,2,8,,nan,,x", b"bogus,1,8,,1.0,,"]))
            lines.insert(i, new)
            desc.append(f"insert {new[:30]!r} at {i + 1}")
        elif op == 8:
            cut = draw(st.integers(0, len(lines)))
            lines = lines[:cut]
            desc.append(f"keep {cut} lines")
        else:
            lines = [b"\xef\xbb\xbf" + lines[0]] + lines[1:] if lines else lines
            desc.append("BOM")
    raw = b"\n".join(lines)
    if draw(st.integers(0, 9)) == 0:
        raw = raw.replace(b"\n", b"\r\n")
        desc.append("CRLF")
    return raw, origin + (" " + "; ".join(desc) if desc else ""), path.suffix


# ---- CLI ----------------------------------------------------------------------------------

_CLI_SIZES = ["8", "64", "1K", "4K", "16K", "64K", "1KiB", "2kB", "0", "-8", "1.5", "1.999999999999999999G", "１２",
              "1e3", "9007199254740993", "9223372036854775808", "", " ", "8 K", "64M", "1T", "1P", "x"]
_CLI_JUNK = ["", " ", "-", "--", "-x", "--bogus", "--op", "-b", "=", "--op=", "\x00", "\n", "é", "a" * 500, "-1", "0",
             "2147483648", "99999999999999999999", "nan", "inf", "--help", "-h", "1e9", "None", "🙂"]
_CLI_TOPOS = ["atlas800t-a2", "atlas800-9000", "atlas900-a2-pod", "atlas900-a3-superpod", "nonexistent", "",
              "/dev/null", "/", str(REPO / "topologies/atlas800t-a2.yaml"), "/etc/passwd", "topologies/atlas800t-a2.yaml"]


def _flag_values(flag: str) -> list:
    table = {
        "--op": list(COLLECTIVES) + ["AllReduce", "", "all_reduce", "bogus"],
        "--topology": _CLI_TOPOS, "-t": _CLI_TOPOS,
        "-b": _CLI_SIZES, "-e": _CLI_SIZES, "--minbytes": _CLI_SIZES, "--maxbytes": _CLI_SIZES,
        "-f": ["2", "3", "1", "0", "-2", "1.5", "x", "1024", "99999999999999999999", "2 "],
        "--stepfactor": ["2", "1", "0", "x"],
        "--algo": ["ring", "mesh", "all", "auto", "best", "ring,mesh", ",", " , ", "ring,,mesh", "nonexistent", "",
                   "mesh/nhr", "pipeline", "ring,bogus", "hd,nb,nhr"],
        "--ranks": ["2", "4", "1", "0", "-1", "99", "0,1", "0,0", "npu0,npu1", "npu0,1", ",", "", "x", "2.5", "１２",
                    "99999999999999999999", "0," * 40],
        "--root": ["0", "1", "-1", "99", "x", "99999999999999999999"],
        "--mode": ["des", "analytical", "DES", "", "x"],
        "--routing": ["ecmp", "spray", "x", ""],
        "--hccl-algo": ["level0:NA;level1:H-D_R", "level0:NA;level1:ring", "", "x", "level1:", ";", "level0:ring",
                        "allreduce=level0:NA;level1:NB", "level0:NA;level1:fullmesh"],
        "--servers": ["1", "2", "0", "-1", "x", "1000000", "99999999999999999999"],
        "-n": ["1", "2", "0", "-1", "x", "1000000"],
        "--max-transfers": ["1", "10", "0", "-5", "x", "100000000000000000000"],
        "--csv": ["@out.csv", "/nonexistent/x.csv", "/", "", "@", "/proc/version", "@dir/"],
        "--plot": ["@out.png", "/nonexistent/p.png", "", "@out.csv"],
        "--metric": ["busbw_GBps", "algbw_GBps", "time_us", "x", ""],
        "--buffsize": ["200M", "1K", "1", "0", "x", "-1", "1P", "8K"],
        "-p": ["8", "4", "2", "1", "0", "16", "-1", "x"], "--npus": ["8", "2"],
        "-d": ["fp32", "fp16", "int8", "fp64", "x", ""], "-o": ["sum", "max", "prod", "x", ""],
        "-r": ["0", "1", "-1", "9"], "-w": ["5", "-1", "x"], "-c": ["1", "0", "x"], "-i": ["0", "8", "x"],
        "--measured": ["@measured", "/nonexistent", "/", "/dev/null", ""],
        "--ops": ["allreduce", "allreduce,bogus", "", ","],
        "--algos": ["all", "ring", "", ","], "--sizes": ["64K", "64K,1M", "", "x", ","],
        "--iterations": ["1", "0", "-1", "x"], "--rounds": ["1", "0", "x"],
        "--min-size": ["1", "0", "1K", "x", "-1"], "--save-topology": ["@t.yaml", "/nonexistent/t.yaml"],
        "--out": ["@out.yaml", "/nonexistent/o.yaml", "/", ""], "--draw": ["@topo.png", "/nonexistent/x.png"],
        "--backend": ["hccl", "nccl", "bogus", ""],
        "--testbed": ["8x100mbit", "x", ""],
    }
    return table.get(flag, _CLI_JUNK)


_SUBCOMMAND_FLAGS = {
    "sweep": ["--topology", "--op", "-b", "-e", "-f", "--algo", "--ranks", "--root", "--mode", "--routing",
              "--hccl-algo", "--servers", "--max-transfers", "--csv", "--plot", "--metric"],
    "select": ["--topology", "--servers", "--op", "-b", "-e", "-f", "--mode", "--hccl-algo", "--buffsize",
               "--max-transfers", "--csv", "--plot", "--metric"],
    "hccl-test": ["-p", "-n", "-b", "-e", "-f", "-d", "-o", "-r", "--topology", "--hccl-algo", "-w", "-c", "-i"],
    "topo show": ["--draw", "--servers"],
    "topo list": [],
    "algos": ["--op"],
    "validate": ["--measured", "--topology", "--op", "--ranks", "--algo", "--min-size", "--csv", "--plot", "--backend",
                 "--ops", "--algos", "--sizes", "--iterations"],
    "calibrate": ["--measured", "--topology", "--op", "--ranks", "--algo", "--out"],
}


@st.composite
def cli_argv(draw):
    """argv for hcsim.cli.main: a small valid command, then random flags, values and junk.

    Never ``measure`` or ``testbed`` (they bring up network namespaces as root) and never
    ``--backend mpi``. Output paths starting with ``@`` go to the case directory."""
    sub = draw(st.sampled_from(sorted(_SUBCOMMAND_FLAGS)))
    small_b = draw(st.sampled_from(["8", "1K", "4K"]))
    small_e = draw(st.sampled_from(["8", "4K", "16K", "64K"]))
    op = draw(st.sampled_from(COLLECTIVES))
    if sub == "sweep":
        argv = ["sweep", "--op", op, "-b", small_b, "-e", small_e]
        if draw(st.integers(0, 3)):
            argv += ["--algo", draw(st.sampled_from(["ring", "mesh", "auto", "ring,mesh", "best", "tree", "pairwise"]))]
        if draw(st.booleans()):
            argv += ["--topology", draw(st.sampled_from(["atlas800t-a2", "atlas800-9000", "atlas900-a2-pod"]))]
            if argv[-1] == "atlas900-a2-pod":
                argv += ["--servers", "2"]
    elif sub == "select":
        argv = ["select", "--op", op, "-b", small_b, "-e", small_e, "--topology",
                draw(st.sampled_from(["atlas800t-a2", "atlas900-a2-pod", "atlas800-9000"]))]
        if argv[-1] == "atlas900-a2-pod":
            argv += ["--servers", "2"]
    elif sub == "hccl-test":
        argv = ["hccl-test", draw(st.sampled_from(["all_reduce_test", "all_gather_test", "reduce_scatter_test",
                                                   "alltoall_test", "alltoallv_test", "broadcast_test", "reduce_test",
                                                   "scatter_test", "bogus_test", "", "all_reduce"])),
                "-b", small_b, "-e", small_e, "-p", draw(st.sampled_from(["8", "4", "2"]))]
    elif sub == "topo show":
        argv = ["topo", "show", draw(st.sampled_from(_CLI_TOPOS))]
        if argv[-1] in ("atlas900-a2-pod", "atlas900-a3-superpod"):
            argv += ["--servers", "2"]
    elif sub == "topo list":
        argv = ["topo", "list"]
    elif sub == "algos":
        argv = ["algos"] + (["--op", op] if draw(st.booleans()) else [])
    else:
        argv = [sub, "--measured", "@measured", "--topology", "atlas800t-a2"]
        if sub == "calibrate":
            argv += ["--out", "@out.yaml"]
    for _ in range(draw(st.integers(0, 3))):
        op_kind = draw(st.integers(0, 7))
        if op_kind <= 3:  # a flag of this subcommand with an odd value
            flags = _SUBCOMMAND_FLAGS[sub] or ["--bogus"]
            flag = draw(st.sampled_from(flags))
            argv += [flag, draw(st.sampled_from(_flag_values(flag)))]
        elif op_kind == 4 and len(argv) > 1:  # drop a token
            i = draw(st.integers(1, len(argv) - 1))
            del argv[i]
        elif op_kind == 5:  # junk token
            argv.insert(draw(st.integers(0, len(argv))), draw(st.one_of(st.sampled_from(_CLI_JUNK), st.text(max_size=6))))
        elif op_kind == 6:  # --flag=value form
            flags = _SUBCOMMAND_FLAGS[sub] or ["--op"]
            flag = draw(st.sampled_from([f for f in flags if f.startswith("--")] or ["--op"]))
            argv.append(f"{flag}={draw(st.sampled_from(_flag_values(flag)))}")
        else:  # another subcommand's flag
            other = draw(st.sampled_from(sorted({f for fl in _SUBCOMMAND_FLAGS.values() for f in fl})))
            argv += [other, draw(st.sampled_from(_flag_values(other)))]
    measured = None
    if any(a == "@measured" or a.endswith("=@measured") for a in argv):
        measured = draw(measured_file())
    return argv, measured


def forbidden_argv(argv) -> bool:
    """Commands the fuzzer must never run: ``measure`` and ``testbed`` (network namespaces, as
    root) and anything naming the ``mpi`` backend (argparse also takes ``--back mpi``)."""
    return any(t in ("measure", "testbed", "mpi") or t.endswith("=mpi") for t in argv)


# ---- shrinking (for shorter reproducers of findings) --------------------------------------

def shrink_call(call: Call):
    """Smaller variants of a Call: each keyword dropped, then simpler positional arguments."""
    import dataclasses

    for k in list(call.kwargs):
        yield dataclasses.replace(call, kwargs={x: v for x, v in call.kwargs.items() if x != k})
    simpler = {0: [Expr("atlas800t-a2", "'atlas800t-a2'")], 2: [8, "8"]}
    for i, options in simpler.items():
        if i < len(call.args) and call.fn in ("hcsim.simulate", "hcsim.sweep", "hcsim.select"):
            for v in options:
                if show(call.args[i]) != show(v):
                    args = list(call.args)
                    args[i] = v
                    yield dataclasses.replace(call, args=args)
    if call.fn == "hcsim.sweep" and len(call.args) > 3:
        yield dataclasses.replace(call, args=list(call.args[:3]))
    for i, a in enumerate(call.args):
        if isinstance(a, list) and len(a) > 1:
            args = list(call.args)
            args[i] = a[:-1]
            yield dataclasses.replace(call, args=args)


def shrink_argv(case):
    """Smaller argv lists: each token (then each flag with its value) dropped."""
    argv, measured = case
    for i in range(len(argv) - 1, 0, -1):
        if argv[i].startswith("-") and i + 1 < len(argv):
            yield argv[:i] + argv[i + 2:], measured
    for i in range(len(argv) - 1, 0, -1):
        yield argv[:i] + argv[i + 1:], measured
