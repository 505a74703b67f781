"""Jobs: operations on communicators and streams, played on one shared network.

:mod:`.graph` describes a job (what runs where, in which order); :func:`run` plays it.
"""

from .graph import (
    COMM_STREAM,
    COMPUTE_STREAM,
    REDUCE_OPS,
    Collective,
    Communicator,
    Compute,
    Op,
    RecordEvent,
    SendRecv,
    WaitEvent,
    Workload,
)
from .result import JobResult
from .runner import run

__all__ = ["COMM_STREAM", "COMPUTE_STREAM", "REDUCE_OPS", "Collective", "Communicator", "Compute", "JobResult", "Op",
           "RecordEvent", "SendRecv", "WaitEvent", "Workload", "run"]
