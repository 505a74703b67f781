"""Errors hcsim raises for bad input.

Every message is one line naming the field, the value and what is allowed, so the CLI
can print it as it is and exit with status 2.
"""

from __future__ import annotations


class HcsimError(ValueError):
    """Base class of every error hcsim raises on purpose."""


class ConfigError(HcsimError):
    """A parameter, name or file field is not allowed."""


class TopologyError(HcsimError):
    """A topology is malformed, or a rank pair cannot reach each other."""


class ScheduleError(HcsimError):
    """A schedule is malformed or breaks its collective's postcondition."""


class StuckScheduleError(HcsimError):
    """The engine ran out of events while some ranks had not finished."""


def bad_value(field: str, value: object, allowed: str) -> ConfigError:
    """Build the standard one-line error: ``field = value: allowed``."""
    return ConfigError(f"{field} = {value!r}: {allowed}")


def unknown_name(field: str, value: object, known) -> ConfigError:
    """Error for a name that is not in a registry, listing the known names."""
    names = ", ".join(sorted(str(k) for k in known))
    return ConfigError(f"{field} = {value!r}: unknown; known: {names}")
