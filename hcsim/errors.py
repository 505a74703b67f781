"""Errors hcsim raises for bad input.

Every message is one line naming the field, the value and what is allowed, so the CLI
can print it as it is and exit with status 2.
"""

from __future__ import annotations

import numbers


class HcsimError(ValueError):
    """Base class of every error hcsim raises on purpose. Its message is always one line
    (line breaks in what it quotes are folded into spaces)."""

    def __init__(self, message: object = ""):
        super().__init__(" ".join(str(message).splitlines()))


class ConfigError(HcsimError):
    """A parameter, name or file field is not allowed."""


class TopologyError(HcsimError):
    """A topology is malformed, or a rank pair cannot reach each other."""


class ScheduleError(HcsimError):
    """A schedule is malformed or breaks its collective's postcondition."""


class WorkLimitError(HcsimError):
    """A call would take more work than a documented limit (hcsim.limits) allows."""


class StuckScheduleError(HcsimError):
    """The engine ran out of events while some ranks had not finished."""


SHOWN_CHARS = 80
"""How much of a bad value an error message quotes."""


def shown(value: object) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters (a 5,000-digit size is not repeated)."""
    try:
        text = repr(value)
    except Exception:  # a user object whose repr fails still gets a message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 12]}...({len(text)} chars)"


def bad_value(field: str, value: object, allowed: str) -> ConfigError:
    """Build the standard one-line error: ``field = value: allowed``."""
    return ConfigError(f"{field} = {shown(value)}: {allowed}")


def unknown_name(field: str, value: object, known) -> ConfigError:
    """Error for a name that is not in a registry, listing the known names."""
    names = ", ".join(sorted(str(k) for k in known))
    return ConfigError(f"{field} = {shown(value)}: unknown; known: {names}")


def is_int(value) -> bool:
    """Whether ``value`` is a whole number hcsim takes as an integer: a Python or numpy integer, not
    a bool and not a ``numpy.timedelta64`` (which numpy registers as an integer type, but which is
    a duration: it fails where hcsim hashes or combines it).

    >>> import numpy as np
    >>> [is_int(v) for v in (3, np.int64(3), np.uint8(3), True, 3.0, np.timedelta64(3))]
    [True, True, True, False, False, False]
    """
    if type(value) is int:
        return True
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return getattr(getattr(value, "dtype", None), "kind", "i") in "iu"


def is_real(value) -> bool:
    """Whether ``value`` is a real number hcsim takes as one: a Python or numpy int or float, not a
    bool and not a ``numpy.timedelta64`` (a duration, which numpy registers as an integer).

    >>> import numpy as np
    >>> [is_real(v) for v in (2.5, np.float32(2.5), 3, True, "2.5", np.timedelta64(3))]
    [True, True, True, False, False, False]
    """
    if type(value) in (int, float):
        return True
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return getattr(getattr(value, "dtype", None), "kind", "f") in "iuf"


def check_topology(topo, field: str = "topo") -> None:
    """Refuse, in one line, a ``topo`` that is not a :class:`~hcsim.topology.Topology` (the helpers
    that take a built one, not a name, read its graph at once)."""
    from .topology import Topology

    if not isinstance(topo, Topology):
        raise bad_value(field, topo, "a Topology (hcsim.load_topology or a builder)")


def check_frame(df, what: str, columns=(), numeric=(), field: str = "df", empty_ok: bool = False) -> None:
    """Refuse, in one line, a ``df`` that is not the DataFrame ``what`` returns: one with
    ``columns`` (and rows, unless ``empty_ok``), the ``numeric`` ones of numbers (the report and
    drawing layers read such frames, and a user may hand them anything).

    >>> import pandas as pd
    >>> check_frame(pd.DataFrame({"size_bytes": [8]}), "hcsim.sweep", ("size_bytes",), ("size_bytes",))
    >>> check_frame([1], "hcsim.sweep")
    Traceback (most recent call last):
    ...
    hcsim.errors.ConfigError: df = [1]: a non-empty DataFrame as hcsim.sweep returns
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame) or not (len(df) or empty_ok):
        raise bad_value(field, df if not isinstance(df, pd.DataFrame) else "an empty DataFrame",
                        f"a {'' if empty_ok else 'non-empty '}DataFrame as {what} returns")
    missing = [str(c) for c in columns if c not in df.columns]
    if missing:
        raise bad_value(field, f"a DataFrame without {', '.join(missing)}", f"a DataFrame as {what} returns")
    for c in numeric:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            raise bad_value(f"{field}[{c!r}]", f"a column of {df[c].dtype}", "a column of numbers")
