"""The event-driven engine: fluid max-min flows on a SimPy clock."""

from .des import EngineConfig, FlowSimulator
from .fairshare import max_min_rates
from .result import Result

__all__ = ["EngineConfig", "FlowSimulator", "Result", "max_min_rates"]
