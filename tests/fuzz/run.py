"""Runner for the fuzz suite's findings: merge runs, re-check every known finding, write Markdown.

    python tests/fuzz/run.py recheck --known /tmp/fz/known.json --out /tmp/fuzz_findings.md [REPORT.json ...]

Each REPORT.json is what a run wrote with ``HCSIM_FUZZ_REPORT=REPORT.json``. Findings are
kept in the ``--known`` file across runs (keyed by test and signature). ``recheck`` runs each
known finding's saved case again (tests/fuzz/harness.py pickles it when first seen) under the
same guard, and marks it FIXED when it no longer crashes, hangs or breaks an invariant.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pickle
import sys
import time
from pathlib import Path

# the package is "fuzz" with tests/ on sys.path, as pytest imports it (saved cases name its modules)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.harness import FINDING_CLASSES, guarded  # noqa: E402

HEADER = """# hcsim fuzz findings

Written by `python tests/fuzz/run.py recheck` (tests/fuzz). Every item was re-run at the time
below from its saved case; FIXED means it no longer crashes, hangs or breaks an invariant.

Reproducers are one line, run from the repository root in a Python shell prepared with:

```python
import hcsim, hcsim.backends, hcsim.hccl.algo_env, hcsim.units, hcsim.topology.builders, numpy as np, fractions, decimal, itertools
from hcsim import load_topology
from hcsim.topology import builders, ascend
from hcsim.hccl.selection import HcclConfig
import sys; sys.path.insert(0, 'tests'); from fuzz.strategies import UserAlgorithm
```

(`hcsim ...` lines are shell commands; files under /tmp/hcsim_fuzz_cases are the mutated inputs.)
"""


def _rerun(finding: dict):
    """(class, detail) of the finding's case run again now, or None when it cannot be re-run."""
    path = finding.get("case_file")
    if path and Path(path).is_file():
        saved = pickle.loads(Path(path).read_bytes())
        module = importlib.import_module(saved["module"])
        case_fn = getattr(module, saved["test"]).case_fn
        _repro, outcome = case_fn(saved["case"])
        return outcome.cls, outcome.detail
    if finding["test"] == "documented":
        import shlex

        from fuzz.test_fuzz_cli import run_cli_elsewhere

        o = guarded(run_cli_elsewhere, shlex.split(finding["repro"])[1:])
        return o.cls, o.detail
    if finding["test"] == "size_contract":
        from fuzz.test_fuzz_units import CONTRACT_SIZES, check_contract_size

        for value, expected in CONTRACT_SIZES:
            if f"hcsim.parse_size({value!r})" == finding["repro"]:
                o = guarded(check_contract_size, value, expected)
                return o.cls, o.detail
    return None


def recheck(known_path: Path, reports: list[Path], out: Path) -> dict:
    known = json.loads(known_path.read_text()) if known_path.is_file() else {}
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    for rep in reports:
        data = json.loads(rep.read_text())
        for test, items in data.get("findings", {}).items():
            for f in items:
                key = f"{test}|{f.get('signature', f['detail'])}"
                entry = known.setdefault(key, {**f, "first_seen": data.get("started", now), "status": "open"})
                if len(f["repro"]) < len(entry["repro"]):
                    entry.update(repro=f["repro"], detail=f["detail"], case_file=f.get("case_file", ""))
                entry["last_seen_in_run"] = data.get("started", now)
    for entry in known.values():
        if entry.get("pinned"):  # a label set by hand (e.g. a contract conflict), not re-judged
            continue
        try:
            again = _rerun(entry)
        except Exception as exc:  # noqa: BLE001 - a saved case that no longer loads
            again = ("unknown", f"could not re-run: {type(exc).__name__}: {exc}")
        if again is None:
            continue
        cls, detail = again
        entry["rechecked"] = now
        if cls in FINDING_CLASSES:
            entry["status"] = "open"
            entry["now"] = f"{cls}: {detail}"
        elif cls != "unknown":
            if entry["status"] != "FIXED":
                entry["fixed_at"] = now
            entry["status"] = "FIXED"
            entry["now"] = f"{cls}: {detail}"
    known_path.write_text(json.dumps(known, indent=1))
    out.write_text(markdown(known, now))
    return known


def markdown(known: dict, now: str) -> str:
    lines = [HEADER, f"Last re-check: {now}.\n"]
    pinned = [e for e in known.values() if e.get("pinned")]
    opened = [e for e in known.values() if e["status"] == "open" and not e.get("pinned")]
    fixed = [e for e in known.values() if e["status"] == "FIXED" and not e.get("pinned")]
    lines.append(f"**{len(opened)} open, {len(fixed)} fixed"
                 + (f", {len(pinned)} contract conflict(s) to decide" if pinned else "") + ".**\n")
    for cls in FINDING_CLASSES:
        items = sorted((e for e in known.values() if e["cls"] == cls), key=lambda e: (e["status"] == "FIXED", e["test"]))
        if not items:
            continue
        lines.append(f"\n## {cls} ({sum(e['status'] == 'open' for e in items)} open, "
                     f"{sum(e['status'] == 'FIXED' for e in items)} fixed)\n")
        for e in items:
            status = e.get("pinned") or ("FIXED" if e["status"] == "FIXED" else "OPEN")
            where = f" at `{e['where']}`" if e.get("where") else ""
            lines.append(f"- **{status}** [{e['test']}] {e['detail'][:300]}{where}")
            lines.append(f"  - repro: `{e['repro'][:600]}`")
            if e.get("note"):
                lines.append(f"  - note: {e['note']}")
            if e.get("pinned"):
                pass
            elif status == "FIXED":
                lines.append(f"  - fixed: seen by re-check at {e.get('fixed_at', '?')}; now {e.get('now', '')[:200]}")
            else:
                lines.append(f"  - first seen {e.get('first_seen', '?')}, seen {e.get('count', 1)}x in its first run")
    return "\n".join(lines) + "\n"


def table(report: Path) -> str:
    """The Markdown table of a run report: cases per test and class, distinct findings."""
    from fuzz.harness import CLASSES

    data = json.loads(report.read_text())
    lines = ["| test | " + " | ".join(CLASSES) + " | cases | distinct findings |",
             "|---|" + "---:|" * (len(CLASSES) + 2)]
    total = dict.fromkeys(CLASSES, 0)
    for test in sorted(data["counts"]):
        row = data["counts"][test]
        for c in CLASSES:
            total[c] += row.get(c, 0)
        lines.append(f"| {test} | " + " | ".join(str(row.get(c, 0)) for c in CLASSES)
                     + f" | {sum(row.values())} | {len(data['findings'].get(test, []))} |")
    lines.append("| **total** | " + " | ".join(f"**{total[c]}**" for c in CLASSES)
                 + f" | **{sum(total.values())}** | **{sum(len(v) for v in data['findings'].values())}** |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python tests/fuzz/run.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rc = sub.add_parser("recheck", help="merge run reports into the known findings, re-run them, write Markdown")
    rc.add_argument("reports", nargs="*", type=Path)
    rc.add_argument("--known", type=Path, default=Path("/tmp/hcsim_fuzz_cases/known_findings.json"))
    rc.add_argument("--out", type=Path, default=Path("/tmp/fuzz_findings.md"))
    tb = sub.add_parser("table", help="print a run report's cases per test and class as a Markdown table")
    tb.add_argument("report", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "table":
        print(table(a.report))
        return 0
    known = recheck(a.known, a.reports, a.out)
    opened = sum(e["status"] == "open" and not e.get("pinned") for e in known.values())
    fixed = sum(e["status"] == "FIXED" and not e.get("pinned") for e in known.values())
    print(f"{len(known)} known findings: {opened} open, {fixed} fixed, {len(known) - opened - fixed} pinned; "
          f"written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
