"""HCCL_ALGO: parse and validate HCCL's algorithm-configuration strings.

Forms (hicann/hccl docs hccl_env; hcomm alg_env_config.cc; FACTS.md s2):

* global: ``level0:NA;level1:H-D_R`` (``;`` between levels);
* per operator: ``allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:H-D_R``
  (``/`` between operators).

Rules applied, as HCCL applies them: spaces are removed; an empty string means HCCL's own
selection; a separator at the very start or end is an error; the two forms cannot be mixed
and the global form appears once; level keys are level0..level3, each at most once;
algorithm names are case-sensitive (null, ring, pipeline, fullmesh, H-D_R, pairwise, NHR,
NHR_V1, AHC, AHC_BROKE, NB, NA); operator keys are broadcast, allreduce, reduce, send,
receive, allgather, reducescatter, alltoall, gather, scatter, sendrecv, others (alltoallv
and alltoallvc follow alltoall); level0 accepts only NA (null too, except in the
per-operator form); level2 accepts ring, H-D_R, NHR, NB, pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError, bad_value, shown

ALGO_NAMES = ("null", "ring", "pipeline", "fullmesh", "H-D_R", "pairwise", "NHR", "NHR_V1", "AHC",
              "AHC_BROKE", "NB", "NA")
OPERATORS = ("broadcast", "allreduce", "reduce", "send", "receive", "allgather", "reducescatter", "alltoall",
             "gather", "scatter", "sendrecv", "others")
LEVEL_KEYS = ("level0", "level1", "level2", "level3")
LEVEL2_NAMES = ("ring", "H-D_R", "NHR", "NB", "pipeline")
FORMAT = "'level0:NA;level1:<algo>' or '<op0>=level0:NA;level1:<algo0>/<op1>=...'"

HCSIM_NAME = {"ring": "ring", "H-D_R": "hd", "NHR": "nhr", "NHR_V1": "nhr", "NB": "nb", "pipeline": "pipeline",
              "fullmesh": "mesh", "pairwise": "pairwise", "AHC": "ahc", "AHC_BROKE": "ahc"}
"""hcsim's algorithm for each HCCL name (NHR_V1, being retired, is simulated as NHR)."""

_COLLECTIVE_KEY = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
                   "broadcast": "broadcast", "reduce": "reduce", "scatter": "scatter", "gather": "gather",
                   "alltoall": "alltoall", "alltoallv": "alltoall", "sendrecv": "sendrecv"}


@dataclass(frozen=True)
class HcclAlgo:
    """A parsed HCCL_ALGO value.

    Attributes
    ----------
    text : str
        The string as given.
    global_levels : dict or None
        ``{"level0": "NA", "level1": "H-D_R", ...}`` for the global form.
    per_operator : dict
        Operator key -> levels dict, for the per-operator form.
    """

    text: str
    global_levels: dict | None
    per_operator: dict

    def levels_for(self, collective: str) -> dict | None:
        """The levels that apply to ``collective`` (None: HCCL's own selection)."""
        if self.global_levels is not None:
            return self.global_levels
        key = _COLLECTIVE_KEY.get(collective, "others") if isinstance(collective, str) else "others"
        return self.per_operator.get(key, self.per_operator.get("others"))


def _err(text, part, why):
    return ConfigError(f"HCCL_ALGO = {shown(text)}: {shown(part)} {why}; HCCL accepts {FORMAT}")


def _hint(word: str, names) -> str:
    """``; did you mean 'ring'?`` when ``word`` is one of ``names`` in another case (HCCL's names
    are case-sensitive), else nothing."""
    same = [n for n in names if n.casefold() == word.casefold()]
    return f"; did you mean {same[0]!r}?" if same else ""


def _levels(text: str, body: str, per_operator: bool) -> dict:
    if not body:
        raise _err(text, body, "is empty")
    if body.startswith(";") or body.endswith(";"):
        raise _err(text, body, "starts or ends with ';'")
    out: dict[str, str] = {}
    for item in body.split(";"):
        if ":" not in item:
            raise _err(text, item, "is not '<level>:<algo>'")
        level, algo = item.split(":", 1)
        if level not in LEVEL_KEYS:
            raise _err(text, level, f"is not a level (levels: {', '.join(LEVEL_KEYS)}){_hint(level, LEVEL_KEYS)}")
        if level in out:
            raise _err(text, level, "is given twice")
        if algo not in ALGO_NAMES:
            raise _err(text, algo, f"is not an HCCL algorithm (names are case-sensitive: {', '.join(ALGO_NAMES)})"
                                   f"{_hint(algo, ALGO_NAMES)}")
        if level == "level0" and algo not in ("NA", "null"):
            raise _err(text, f"{level}:{algo}", "is not allowed: level0 accepts only NA (HCCL picks level 0 from the hardware)")
        if level == "level0" and algo == "null" and per_operator:
            raise _err(text, f"{level}:{algo}", "is not allowed in the per-operator form")
        if level == "level2" and algo not in LEVEL2_NAMES + ("NA", "null"):
            raise _err(text, f"{level}:{algo}", f"is not allowed: level2 accepts {', '.join(LEVEL2_NAMES)}")
        out[level] = algo
    return out


def parse_hccl_algo(text: str | None) -> HcclAlgo | None:
    """Parse an HCCL_ALGO value; None or an empty string means HCCL's own selection.

    Examples
    --------
    >>> parse_hccl_algo("level0:NA;level1:H-D_R").levels_for("allreduce")["level1"]
    'H-D_R'
    >>> a = parse_hccl_algo("allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:NHR")
    >>> a.levels_for("allgather")["level1"], a.levels_for("broadcast")
    ('NHR', None)
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise bad_value("HCCL_ALGO", text, f"a string, {FORMAT}, or None")
    body = "".join(text.split())
    if not body:
        return None
    if body[0] in "/;=:" or body[-1] in "/;=:":
        raise _err(text, body[0] if body[0] in "/;=:" else body[-1], "cannot start or end the string")
    entries = body.split("/")
    has_ops = ["=" in e for e in entries]
    if any(has_ops) and not all(has_ops):
        raise _err(text, entries[has_ops.index(False)], "mixes the global form with the per-operator form")
    if not any(has_ops):
        if len(entries) > 1:
            raise _err(text, "/", "separates operators, but no entry names one (the global form appears once)")
        return HcclAlgo(text, _levels(text, entries[0], False), {})
    per_op: dict[str, dict] = {}
    for entry in entries:
        op, body_levels = entry.split("=", 1)
        if op not in OPERATORS:
            raise _err(text, op, f"is not an HCCL operator key ({', '.join(OPERATORS)}){_hint(op, OPERATORS)}")
        if op in per_op:
            raise _err(text, op, "is given twice")
        per_op[op] = _levels(text, body_levels, True)
    return HcclAlgo(text, None, per_op)
