"""Measured results: parsers for real benchmark outputs (hccl_test, nccl-tests, CSV) into the
same DataFrame columns :func:`hcsim.sweep` returns, so prediction and measurement join on
(collective, size). Execution backends (``hccl``, ``nccl``, ``mpi``) run the benchmarks
behind one interface (:class:`~hcsim.backends.base.Backend`, :func:`get_backend`)."""

from .base import Backend, get_backend
from .hccl import HcclBackend
from .nccl import NcclBackend
from .parsers import (
    format_nccl_tests_row,
    load_measured,
    nccl_tests_rows,
    parse_hccl_test,
    parse_nccl_tests,
)

__all__ = ["Backend", "HcclBackend", "NcclBackend", "get_backend", "format_nccl_tests_row", "load_measured", "nccl_tests_rows", "parse_hccl_test", "parse_nccl_tests"]
