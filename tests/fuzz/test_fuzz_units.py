"""Fuzz parse_size and HCCL_ALGO parsing: only one-line HcsimErrors, exact integers."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from hcsim.errors import HcsimError
from hcsim.hccl.algo_env import parse_hccl_algo
from hcsim.units import parse_size

from .harness import Violation, fuzz, guarded, record
from .strategies import COLLECTIVES, any_size, hccl_algo_text, reference_size, show, unwrap

LEVELS = ("level0", "level1", "level2", "level3")


def check_size(value):
    n = parse_size(value)
    ref = reference_size(value)
    if type(n) is not int:
        raise Violation(f"parse_size({show(value)}) = {n!r}, a {type(n).__name__}, not an int")
    if not 1 <= n < 2**63:
        raise Violation(f"parse_size({show(value)}) = {n}: outside 1 .. 2^63 - 1")
    if ref is None:
        raise Violation(f"parse_size({show(value)}) = {n}: accepted a value that is not an unambiguous whole byte count")
    if n != ref:
        raise Violation(f"parse_size({show(value)}) = {n}, exactly it is {ref}")
    again = parse_size(str(n))
    if again != n:
        raise Violation(f"parse_size(str({n})) = {again}")
    return n


@fuzz(any_size, weight=2.0)
def test_parse_size(value):
    """Any value as a size: an exact int or a one-line HcsimError."""
    real = unwrap(value)
    return f"hcsim.parse_size({show(value)})", guarded(check_size, real)


CONTRACT_SIZES = [
    # above 1 PiB (hcsim.limits.MAX_SIZE_BYTES) a size is refused, never rounded. The fuzz brief's
    # contract said parse_size('9007199254740993') == 9007199254740993; the limit is a product
    # decision (commits 6483e9f, 00ab87b): the conflict is recorded in docs/robustness.md
    ("9007199254740993", None), ("1125899906842623", 1125899906842623), ("1.999999999999999999G", None), ("１２", None), ("٣", None),
    (2**63, None), ("9223372036854775808", None), (2**64, None), (True, None), (0, None), (-1, None), ("", None),
    ("64MiB", 64 << 20), ("1G", 1 << 30), ("2kB", 2000), ("0.5K", 512), (" 8 ", 8), (8.0, 8), (8.5, None),
    (float("nan"), None), ("1e3", None), ("8 K", 8192), ("8\n", None),
]


def check_contract_size(value, expected):
    try:
        n = parse_size(value)
    except HcsimError:
        if expected is not None:
            raise Violation(f"parse_size({value!r}) refused; the contract says {expected}") from None
        raise
    if expected is None:
        raise Violation(f"parse_size({value!r}) = {n!r}; the contract says it is refused with an HcsimError")
    if type(n) is not int or n != expected:
        raise Violation(f"parse_size({value!r}) = {n!r}; the contract says {expected}")
    return n


@pytest.mark.parametrize("value,expected", CONTRACT_SIZES, ids=[repr(v)[:30] for v, _ in CONTRACT_SIZES])
def test_size_contract(value, expected):
    """The brief's explicit size examples: exact where valid, one-line HcsimError where not."""
    outcome = guarded(check_contract_size, value, expected)
    record("size_contract", f"hcsim.parse_size({value!r})", outcome)
    assert outcome.cls in ("ok", "error"), f"{outcome.cls}: {outcome.detail}"


def _levels(parsed):
    if parsed is None:
        return None
    return {c: (None if parsed.levels_for(c) is None else dict(parsed.levels_for(c))) for c in COLLECTIVES}


def check_hccl_algo(text):
    parsed = parse_hccl_algo(text)
    levels = _levels(parsed)
    if parsed is not None:
        for c, lv in levels.items():
            if lv is not None and (not isinstance(lv, dict) or not set(lv) <= set(LEVELS)
                                   or not all(isinstance(v, str) for v in lv.values())):
                raise Violation(f"levels_for({c!r}) = {lv!r}")
    if isinstance(text, str) and len(text) < 200:
        spaced = " ".join(text)  # HCCL removes spaces: the same value
        try:
            other = _levels(parse_hccl_algo(spaced))
        except HcsimError as exc:
            raise Violation(f"with spaces between its characters {spaced!r} is refused ({exc}) but "
                            f"{text!r} is accepted") from None
        if other != levels:
            raise Violation(f"{text!r} and {spaced!r} (spaces removed: the same) parse differently")
    again = _levels(parse_hccl_algo(text))
    if again != levels:
        raise Violation("parsing twice gives different results")
    return parsed


@fuzz(hccl_algo_text(), weight=1.0)
def test_hccl_algo(text):
    """HCCL_ALGO strings: parsed consistently (whitespace-insensitive) or a one-line HcsimError."""
    return f"hcsim.hccl.algo_env.parse_hccl_algo({show(text)})", guarded(check_hccl_algo, text)


@fuzz(st.tuples(st.sampled_from([("8", "64K"), ("1K", "1K"), ("64K", "8"), ("8", "1P"), ("1", "1T")]),
                st.sampled_from([2, 3, 1, 0, -2, 1.5, True, 2**63, 2**50 + 1, "2", None, 10**30])), weight=0.25)
def test_size_range(case):
    """size_range (the -b/-e/-f sweep): refused, or at most 4096 exact sizes."""
    from hcsim.units import size_range

    (lo, hi), factor = case

    def run():
        sizes = size_range(lo, hi, factor)
        if not sizes or any(type(s) is not int for s in sizes) or sizes != sorted(sizes):
            raise Violation(f"size_range gave {sizes[:5]!r}...")
        if len(sizes) > 4096:
            raise Violation(f"{len(sizes)} sizes from one range (MAX_SWEEP_SIZES is 4096)")
        return sizes

    return f"hcsim.units.size_range({lo!r}, {hi!r}, {factor!r})", guarded(run)
