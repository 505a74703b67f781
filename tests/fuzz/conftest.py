"""Session bookkeeping for the fuzz suite: counts per test and class at the end of the run,
the hypothesis seed, and (with HCSIM_FUZZ_REPORT=path) the same as JSON."""

from __future__ import annotations

import json
import os
import time

import pytest

from .harness import (
    CLASSES,
    COUNTS,
    FINDINGS,
    MEMORY_LIMIT_BYTES,
    PEAK,
    SLOWEST,
    TIME_LIMIT_S,
    examples,
    long_run,
)

_START = time.time()


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.fuzz)


def _seed(config):
    try:
        return config.getoption("hypothesis_seed")
    except ValueError:
        return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS:
        return
    tr = terminalreporter
    seed = _seed(config)
    tr.section("hcsim fuzz: cases per class")
    tr.write_line(f"examples per test {examples()} ({'random, seed ' + str(seed) if long_run() else 'derandomized'}); "
                  f"limits {TIME_LIMIT_S:g} s and {MEMORY_LIMIT_BYTES / 2**30:g} GiB per case")
    width = max(len(t) for t in COUNTS)
    tr.write_line(f"{'test':<{width}}  " + "  ".join(f"{c:>9}" for c in CLASSES) + f"  {'total':>7}  {'findings':>8}"
                  f"  {'slowest s':>9}")
    total = {c: 0 for c in CLASSES}
    for test in sorted(COUNTS):
        row = COUNTS[test]
        for c in CLASSES:
            total[c] += row[c]
        tr.write_line(f"{test:<{width}}  " + "  ".join(f"{row[c]:>9}" for c in CLASSES)
                      + f"  {sum(row.values()):>7}  {len(FINDINGS[test]):>8}  {SLOWEST.get(test, (0, ''))[0]:>9.2f}")
    tr.write_line(f"{'TOTAL':<{width}}  " + "  ".join(f"{total[c]:>9}" for c in CLASSES)
                  + f"  {sum(total.values()):>7}  {sum(len(f) for f in FINDINGS.values()):>8}")
    tr.write_line(f"peak process memory seen before a case: VmSize {PEAK['vmsize'] / 2**30:.2f} GiB, "
                  f"RSS {PEAK['rss'] / 2**30:.2f} GiB")
    path = os.environ.get("HCSIM_FUZZ_REPORT")
    if path:
        with open(path, "w") as fh:
            json.dump({"seed": seed, "examples_per_test": examples(), "randomized": long_run(),
                       "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(_START)),
                       "seconds": round(time.time() - _START, 1),
                       "counts": {t: dict(c) for t, c in COUNTS.items()}, "peak_memory": dict(PEAK),
                       "slowest": {t: {"seconds": round(s, 3), "repro": r} for t, (s, r) in SLOWEST.items()},
                       "findings": {t: list(f.values()) for t, f in FINDINGS.items()}}, fh, indent=1)
        tr.write_line(f"report written to {path}")
