"""The per-case guard, the outcome classes and the bookkeeping of a fuzz run.

Every case runs in-process under

* a hard time limit (``signal.setitimer`` + SIGALRM raising :class:`Hang`, a BaseException
  so that no ``except Exception`` in the code under test can swallow it), and
* an address-space limit (``resource.RLIMIT_AS``, lowered for the duration of the case and
  restored after it), so that a runaway allocation becomes a MemoryError counted as a
  crash instead of taking the machine down.

A case ends in one of five classes:

``ok``         returned, and every invariant held;
``error``      raised :class:`hcsim.errors.HcsimError` with a one-line message (the contract
               for bad input), or the CLI exited 2 with one ``hcsim: error: ...`` line;
``crash``      any other exception (MemoryError included), a multi-line or empty message,
               a CLI exit status other than 0 or 2, a traceback or internal error on stderr;
``hang``       did not finish within the time limit;
``invariant``  returned, but a result broke an invariant (time not finite or <= 0, a size
               not its exact integer, analytical != event-driven on a full mesh, a rerun
               not bit-identical, ...).

Cases that crash, hang or break an invariant are findings: each test function runs all its
examples (hypothesis does not stop at the first), keeps the shortest reproducer of each
distinct finding and fails at the end listing them. Counts per test and class are printed
at the end of the session (tests/fuzz/conftest.py) and, with ``HCSIM_FUZZ_REPORT=path``,
written there as JSON; ``HCSIM_FUZZ_FINDINGS=path`` appends every distinct finding there
as JSON lines.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import resource
import signal
import time
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings

from hcsim.errors import HcsimError

CLASSES = ("ok", "error", "crash", "hang", "invariant")
FINDING_CLASSES = ("crash", "hang", "invariant")

TIME_LIMIT_S = float(os.environ.get("HCSIM_FUZZ_TIMEOUT", "10"))
"""Hard limit per case (the contract: nothing takes more than 10 s)."""

MEMORY_LIMIT_BYTES = int(float(os.environ.get("HCSIM_FUZZ_MEMORY_GIB", "6")) * 2**30)
"""Address-space limit while a case runs (RLIMIT_AS)."""

DEFAULT_EXAMPLES = 12
"""Examples per fuzz test in the default (``make test``) slice."""


def examples(weight: float = 1.0) -> int:
    """Examples for a test: ``HCSIM_FUZZ_EXAMPLES`` (default :data:`DEFAULT_EXAMPLES`) x weight."""
    n = int(os.environ.get("HCSIM_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
    return max(1, int(round(n * weight)))


def long_run() -> bool:
    """True under ``make fuzz`` (HCSIM_FUZZ_EXAMPLES set): random seeds; else derandomized."""
    return "HCSIM_FUZZ_EXAMPLES" in os.environ


def fuzz_settings(weight: float = 1.0):
    return settings(max_examples=examples(weight), deadline=None, derandomize=not long_run(), database=None,
                    print_blob=False, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck))


class Hang(BaseException):
    """The case ran past :data:`TIME_LIMIT_S` (raised from the SIGALRM handler)."""


class Violation(AssertionError):
    """An invariant does not hold (raised by checks inside a case)."""


@dataclass
class Outcome:
    cls: str
    detail: str = ""          # one line: exception type and message, or what broke
    where: str = ""           # innermost hcsim frame (file:line function) for crashes
    seconds: float = 0.0
    value: object = None
    extra: dict = field(default_factory=dict)

    @property
    def signature(self) -> str:
        """What makes two findings the same: class, exception type, where, and the message's
        shape (numbers and quoted values blanked)."""
        shape = re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)?(e[-+]?\d+)?", "_", self.detail)[:120]
        where = re.sub(r":\d+ ", " ", self.where)  # file and function, not the line: code moves
        return f"{self.cls}|{where}|{shape}"


def _hcsim_frame(exc: BaseException) -> str:
    """The innermost frame of the traceback that is in hcsim's own code."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f"{os.sep}hcsim{os.sep}" in f.filename and f"{os.sep}tests{os.sep}" not in f.filename]
    f = (mine or frames or [None])[-1]
    if f is None:
        return ""
    path = f.filename
    i = path.rfind(f"{os.sep}hcsim{os.sep}")
    return f"{path[i + 1:] if i >= 0 else os.path.basename(path)}:{f.lineno} {f.name}"


def _hcsim_path(exc: BaseException, depth: int = 3) -> str:
    """The outermost ``depth`` hcsim functions on the traceback (where a hang was, stably:
    the innermost frame depends on when the alarm fired)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f"{os.sep}hcsim{os.sep}" in f.filename and f"{os.sep}tests{os.sep}" not in f.filename]
    return " > ".join(f"{os.path.basename(f.filename)}:{f.name}" for f in frames[:depth])


def _one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text and "\r" not in text


def _on_alarm(signum, frame):
    # fire again soon: a Hang raised where Python cannot propagate it (a gc callback, a
    # destructor) is printed as "ignored" and would otherwise leave the case unbounded
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    raise Hang()


def process_memory() -> tuple[int, int]:
    """(VmSize, VmRSS) of this process in bytes (0, 0 where /proc is missing)."""
    size = rss = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    size = int(line.split()[1]) * 1024
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return size, rss


PEAK = {"vmsize": 0, "rss": 0}


def guarded(fn, *args, timeout: float = TIME_LIMIT_S, **kwargs) -> Outcome:
    """Run ``fn(*args, **kwargs)`` under the time and memory limits and classify what happened.

    ``fn`` returns an :class:`Outcome` (to classify itself, e.g. the CLI) or any value
    (``ok``); it raises :class:`Violation` for a broken invariant.
    """
    vmsize, rss = process_memory()
    PEAK["vmsize"], PEAK["rss"] = max(PEAK["vmsize"], vmsize), max(PEAK["rss"], rss)
    old_handler = signal.signal(signal.SIGALRM, _on_alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = MEMORY_LIMIT_BYTES if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT_BYTES, hard)
    t0 = time.perf_counter()
    outcome = None
    try:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            signal.setitimer(signal.ITIMER_REAL, timeout)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = fn(*args, **kwargs)
            signal.setitimer(signal.ITIMER_REAL, 0)
            outcome = value if isinstance(value, Outcome) else Outcome("ok", value=value)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except Hang as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        outcome = Outcome("hang", f"did not finish in {timeout:g} s", _hcsim_path(exc))
    except Violation as exc:
        outcome = Outcome("invariant", " ".join(str(exc).splitlines())[:300])
    except HcsimError as exc:
        msg = str(exc)
        if _one_line(msg):
            outcome = Outcome("error", f"{type(exc).__name__}: {msg[:300]}")
        else:
            outcome = Outcome("crash", f"{type(exc).__name__} with a message that is not one line: {msg[:300]!r}",
                              _hcsim_frame(exc))
    except BaseException as exc:  # noqa: BLE001 - everything else is a crash, SystemExit included
        if isinstance(exc, KeyboardInterrupt):
            raise
        msg = " ".join(str(exc).splitlines())
        if isinstance(exc, MemoryError):
            msg += f" (process VmSize {vmsize / 2**30:.2f} GiB before the case, limit {limit / 2**30:g} GiB)"
        outcome = Outcome("crash", f"{type(exc).__name__}: {msg[:300]}", _hcsim_frame(exc))
    finally:
        signal.signal(signal.SIGALRM, old_handler)
    outcome.seconds = time.perf_counter() - t0
    if outcome.cls == "crash" and "out of memory" in outcome.detail:
        outcome.detail += f" (process VmSize {vmsize / 2**30:.2f} GiB before the case, limit {limit / 2**30:g} GiB)"
    return outcome


def close(a: float, b: float, rel: float = 1e-12) -> bool:
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def run_cli(argv) -> Outcome:
    """``hcsim.cli.main(argv)`` with stdout and stderr captured, classified by the CLI contract:
    exit 0, or exit 2 with exactly one ``hcsim: error: ...`` line on stderr; never a traceback,
    never an internal error, never an exception out of main."""
    from hcsim.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    stderr = err.getvalue()
    lines = stderr.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "Traceback (most recent call last)" in stderr:
        return Outcome("crash", f"traceback on stderr (exit {rc}): {' | '.join(lines[-3:])[:300]}")
    # warnings are allowed, each one whole 'hcsim: warning: ...' line
    rest = [line for line in lines if not line.startswith("hcsim: warning: ")]
    if rc == 0:
        if rest:
            return Outcome("crash", f"exit 0 with other than 'hcsim: warning:' lines on stderr: {stderr[:200]!r}")
        return Outcome("ok", value=out.getvalue())
    if rc == 2:
        if len(rest) != 1 or not rest[0].startswith("hcsim: error: ") or "\r" in rest[0]:
            return Outcome("crash", f"exit 2 with stderr not one 'hcsim: error:' line: {stderr[:300]!r}")
        if "out of memory" in rest[0]:
            return Outcome("crash", f"ran out of memory instead of refusing up front: {rest[0][:200]}")
        return Outcome("error", rest[0][:300])
    return Outcome("crash", f"exit status {rc!r}: {' | '.join(lines)[:300]}")


# ---- invariants -------------------------------------------------------------------------

def finite_positive(name: str, x) -> None:
    if not isinstance(x, float | int) or isinstance(x, bool) or not math.isfinite(x) or x <= 0:
        raise Violation(f"{name} = {x!r}: must be a finite number > 0")


def check_result(r, expected_bytes=None, expected_ranks=None) -> None:
    """The invariants every Result obeys."""
    import hcsim

    if not isinstance(r, hcsim.Result):
        raise Violation(f"returned {type(r).__name__}, not a Result")
    finite_positive("time_s", r.time_s)
    if type(r.time_s) is not float:  # a numpy float64 passes isinstance(x, float) but is not one
        raise Violation(f"time_s = {r.time_s!r} is a {type(r.time_s).__name__}, not a float")
    for name in ("algbw_GBps", "busbw_GBps"):
        v = getattr(r, name)
        if not isinstance(v, float | int) or not math.isfinite(v) or v < 0:
            raise Violation(f"{name} = {v!r}: must be finite and >= 0 (time_s = {r.time_s!r})")
    if type(r.size_bytes) is not int:
        raise Violation(f"size_bytes = {r.size_bytes!r} is a {type(r.size_bytes).__name__}, not an int")
    if expected_bytes is not None and r.size_bytes != expected_bytes:
        raise Violation(f"size_bytes = {r.size_bytes} but the call asked for {expected_bytes}")
    if expected_ranks is not None and r.ranks != expected_ranks:
        raise Violation(f"ranks = {r.ranks} but the call named {expected_ranks}")


def same_result(a, b) -> None:
    """Two runs of the same call are bit-identical."""
    import numpy as np

    for name in ("collective", "algorithm", "mode", "ranks", "size_bytes"):
        if getattr(a, name) != getattr(b, name):
            raise Violation(f"rerun differs: {name} {getattr(a, name)!r} then {getattr(b, name)!r}")
    if not (a.time_s == b.time_s or (a.time_s != a.time_s and b.time_s != b.time_s)):
        raise Violation(f"rerun differs: time_s {a.time_s!r} then {b.time_s!r}")
    for name in ("steps", "transfers", "links", "critical_path"):
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None):
            raise Violation(f"rerun differs: {name} present in one run only")
        if x is not None and not x.equals(y):
            raise Violation(f"rerun differs: {name} table")
    ca = {k: v for k, v in a.config.items() if not isinstance(v, np.ndarray)}
    cb = {k: v for k, v in b.config.items() if not isinstance(v, np.ndarray)}
    if repr(ca) != repr(cb):
        raise Violation(f"rerun differs: config {ca!r} then {cb!r}"[:300])


def same_frame(a, b) -> None:
    if not a.equals(b):
        raise Violation("rerun differs: the DataFrame")


# ---- bookkeeping --------------------------------------------------------------------------

COUNTS: dict[str, Counter] = defaultdict(Counter)
"""test name -> class -> cases."""

FINDINGS: dict[str, dict[str, dict]] = defaultdict(dict)
"""test name -> signature -> {cls, detail, where, repro, seconds, count}."""

SLOWEST: dict[str, tuple[float, str]] = {}


def _save_case(test: str, module: str, sig: str, case, repro: str = "") -> str:
    """Pickle a finding's case so that ``python tests/fuzz/run.py recheck`` can run it again."""
    import hashlib
    import pickle

    from .strategies import CASE_DIR

    folder = CASE_DIR / "findings"
    folder.mkdir(parents=True, exist_ok=True)
    # named by signature and reproducer: a later run's case for the same finding gets its own file
    path = folder / f"{test}-{hashlib.sha1((sig + repro).encode()).hexdigest()[:16]}.pkl"
    try:
        path.write_bytes(pickle.dumps({"module": module, "test": f"test_{test}", "case": case}))
    except Exception:  # noqa: BLE001 - an unpicklable case keeps only its one-line reproducer
        return ""
    return str(path)


def record(test: str, repro: str, outcome: Outcome, case=None, module: str = "") -> None:
    COUNTS[test][outcome.cls] += 1
    if outcome.seconds > SLOWEST.get(test, (0.0, ""))[0]:
        SLOWEST[test] = (outcome.seconds, repro)
    if outcome.cls not in FINDING_CLASSES:
        return
    sig = outcome.signature
    seen = FINDINGS[test].get(sig)
    if seen is None:
        FINDINGS[test][sig] = {"test": test, "cls": outcome.cls, "detail": outcome.detail, "where": outcome.where,
                               "repro": repro, "seconds": round(outcome.seconds, 3), "count": 1, "signature": sig,
                               "case_file": _save_case(test, module, sig, case, repro) if module else ""}
        path = os.environ.get("HCSIM_FUZZ_FINDINGS")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps(FINDINGS[test][sig]) + "\n")
    else:
        seen["count"] += 1
        if len(repro) < len(seen["repro"]):
            seen["repro"] = repro
            seen["detail"] = outcome.detail
            if module:
                seen["case_file"] = _save_case(test, module, sig, case, repro)


def findings_report(test: str) -> str:
    items = sorted(FINDINGS[test].values(), key=lambda f: (CLASSES.index(f["cls"]), -f["count"]))
    lines = [f"{len(items)} distinct finding(s) in {test} ({dict(COUNTS[test])}):"]
    for f in items:
        lines.append(f"  [{f['cls']}] x{f['count']} {f['detail'][:200]}" + (f"  at {f['where']}" if f["where"] else ""))
        lines.append(f"      repro: {f['repro'][:400]}")
    return "\n".join(lines)


SHRINK_TRIES = 80
"""Most extra runs spent making a new finding's reproducer shorter."""


def shrink_finding(case_fn, shrink, case, repro: str, outcome: Outcome):
    """Greedily replace ``case`` by smaller candidates (``shrink(case)`` yields them) that end in
    the same finding; returns the shortest (repro, outcome) found. Hangs are not shrunk (each
    try costs the full time limit)."""
    if shrink is None or outcome.cls == "hang":
        return case, repro, outcome
    tries, improved = 0, True
    while improved and tries < SHRINK_TRIES:
        improved = False
        for cand in shrink(case):
            tries += 1
            if tries > SHRINK_TRIES:
                break
            r, o = case_fn(cand)
            if o.signature == outcome.signature and len(r) < len(repro):
                case, repro, outcome, improved = cand, r, o, True
                break
    return case, repro, outcome


def fuzz(strategy, weight: float = 1.0, shrink=None):
    """Decorate ``case_fn(case) -> (repro, outcome)``: a pytest test that runs every example of
    ``strategy``, records each outcome, and fails at the end if any case crashed, hung or broke
    an invariant (every distinct finding listed with its shortest reproducer; ``shrink(case)``,
    when given, yields smaller variants of a case to shorten a new finding's reproducer)."""

    def deco(case_fn):
        name = case_fn.__name__.removeprefix("test_").removeprefix("case_")

        @fuzz_settings(weight)
        @given(strategy)
        def run_examples(case):
            repro, outcome = case_fn(case)
            if outcome.cls in FINDING_CLASSES and outcome.signature not in FINDINGS[name]:
                case, small_repro, small = shrink_finding(case_fn, shrink, case, repro, outcome)
                small.seconds = outcome.seconds
                repro, outcome = small_repro, small
            record(name, repro, outcome, case, case_fn.__module__)

        def test():
            FINDINGS[name].clear()
            run_examples()
            if FINDINGS[name]:
                raise AssertionError(findings_report(name))

        test.__name__ = test.__qualname__ = f"test_{name}"
        test.__doc__ = case_fn.__doc__
        test.__module__ = case_fn.__module__
        test.case_fn = case_fn  # python tests/fuzz/run.py recheck runs saved cases through it
        return test

    return deco
