"""Measured results: parsers for real benchmark outputs (hccl_test, nccl-tests, CSV) into the
same DataFrame columns :func:`hcsim.sweep` returns, so prediction and measurement join on
(collective, size). Execution backends that run the benchmarks belong here too."""

from .parsers import (
    format_nccl_tests_row,
    load_measured,
    nccl_tests_rows,
    parse_hccl_test,
    parse_nccl_tests,
)

__all__ = ["format_nccl_tests_row", "load_measured", "nccl_tests_rows", "parse_hccl_test", "parse_nccl_tests"]
