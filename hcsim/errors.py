"""Errors hcsim raises for bad input.

Every message is one line naming the field, the value and what is allowed, so the CLI
can print it as it is and exit with status 2.
"""

from __future__ import annotations


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
