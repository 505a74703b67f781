"""Sizes and their spelling.

Sizes follow the flags of hccl_test and nccl-tests: a bare number is bytes, ``K``, ``M``,
``G`` (and ``KiB``, ``MiB``, ``GiB``) are powers of 1024, ``kB``, ``MB``, ``GB`` are powers
of 1000. Bandwidths are reported in GB/s with GB = 1e9 bytes, as both tools print them.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import bad_value, is_int, is_real
from .limits import MAX_SIZE_BYTES

_BINARY = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
           "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
_DECIMAL = {"kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
_SIZE_RE = re.compile(r"[ \t]*([0-9]+)(?:\.([0-9]+))?[ \t]*([A-Za-z]*)[ \t]*", re.ASCII)
"""Digits are ASCII only: a size is typed, and Unicode digits are refused rather than guessed."""

GB = 1e9
"""Bytes in the GB of GB/s (nccl-tests and hccl_test both divide by 1e9)."""


def parse_size(value, field: str = "size") -> int:
    """Parse a message size into bytes.

    Parameters
    ----------
    value : int or str
        ``1024``, ``"8"``, ``"64K"``, ``"64KiB"`` (both 65536), ``"1MB"`` (1000000).
    field : str
        Name used in the error message.

    Returns
    -------
    int
        Size in bytes, at least 1.

    Examples
    --------
    >>> parse_size("64MiB"), parse_size("1G"), parse_size("2kB")
    (67108864, 1073741824, 2000)
    """
    allowed = (f"a whole positive byte count up to {MAX_SIZE_BYTES} (1 PiB), such as 8, 64K, 64KiB, 1MB, 1G "
               "(K/M/G = 1024^n, kB/MB/GB = 1000^n)")
    if isinstance(value, bool):
        raise bad_value(field, value, allowed)
    if is_int(value):
        nbytes = int(value)
    elif isinstance(value, float):
        if not value.is_integer():
            raise bad_value(field, value, allowed)
        nbytes = int(value)
    elif isinstance(value, str):
        m = _SIZE_RE.fullmatch(value) if len(value) <= 64 else None
        if not m:
            raise bad_value(field, value, allowed)
        whole, frac, unit = m.groups()
        frac = frac or ""
        key = unit.lower()
        # "kB", "MB", "GB" (capital B after a prefix) are decimal; a bare prefix letter, or
        # "KiB", is binary (the hccl_test / nccl-tests reading of -b 64K).
        if unit.endswith("B") and not key.endswith("ib") and len(unit) == 2:
            mult = _DECIMAL.get(key)
        else:
            mult = _BINARY.get(key)
        if mult is None:
            raise bad_value(field, value, allowed)
        # exact rational arithmetic: "9007199254740993" stays itself, "1.999999999999999999G" is
        # refused rather than rounded to 2G
        scaled = Fraction(int(whole + frac), 10 ** len(frac)) * mult
        if scaled.denominator != 1:
            raise bad_value(field, value, allowed + "; it must come to a whole number of bytes")
        nbytes = int(scaled)
    else:
        raise bad_value(field, value, allowed)
    if not 0 < nbytes <= MAX_SIZE_BYTES:
        raise bad_value(field, value, allowed)
    return nbytes


def format_size(nbytes: int) -> str:
    """Short binary spelling of a byte count: ``format_size(65536) == '64K'``; anything but a
    whole number of bytes >= 0 is a one-line :class:`~hcsim.errors.ConfigError`."""
    whole = is_int(nbytes) or (is_real(nbytes) and math.isfinite(nbytes) and float(nbytes).is_integer())
    if not whole or nbytes < 0:  # a float that is a whole number is one, as parse_size takes it
        raise bad_value("nbytes", nbytes, "a whole number of bytes >= 0")
    nbytes = int(nbytes)
    for unit, mult in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult}{unit}"
    return str(int(nbytes))


def size_range(min_bytes, max_bytes, factor: int = 2) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` multiplying by ``factor`` (nccl-tests' -b/-e/-f).

    Examples
    --------
    >>> size_range("8", "64", 2)
    [8, 16, 32, 64]
    """
    lo = parse_size(min_bytes, "min size")
    hi = parse_size(max_bytes, "max size")
    if hi < lo:
        raise bad_value("max size", max_bytes, f"must be >= min size {lo}")
    if not is_int(factor) or factor < 2:
        raise bad_value("factor", factor, "an integer >= 2")
    if factor > MAX_SIZE_BYTES:
        raise bad_value("factor", factor, f"an integer from 2 to {MAX_SIZE_BYTES}")
    factor = int(factor)  # a numpy uint8 would wrap (or overflow) as the sizes grow
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes
