"""YAML topologies: strict loading (unknown keys and impossible values are errors) and saving.

Two forms. A *builder* file names a builder and its parameters::

    name: my-pod
    builder: leaf_spine
    params: {leaves: 4, npus_per_leaf: 8, spines: 2, bandwidth_GBps: 25, oversubscription: 2}

An *explicit* file lists ``npus``, ``nodes`` and ``links``. Units in files are GB/s
(1e9 bytes/s) and microseconds; parameter names ending ``_GBps`` / ``_us`` are converted to
the builders' ``_Bps`` / ``_s`` arguments.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import yaml

from ..engine.regimes import OVERHEAD_WHEN, MessageRegimes
from ..errors import ConfigError, HcsimError
from . import ascend, builders
from .model import EXPANSION_MODES, PRODUCTS, ExecutionDefaults, Topology
from .spec import NODE_KINDS, LinkSpec, NpuSpec

BUILDERS = {
    "ring": builders.ring,
    "full_mesh": builders.full_mesh,
    "single_switch": builders.single_switch,
    "leaf_spine": builders.leaf_spine,
    "torus": builders.torus,
    "tiered_mesh": builders.tiered_mesh,
    "atlas800t_a2": ascend.atlas800t_a2,
    "atlas900_a2_pod": ascend.atlas900_a2_pod,
    "atlas800_9000": ascend.atlas800_9000,
    "atlas900_a3_superpod": ascend.atlas900_a3_superpod,
}
"""Builders a YAML file may name under ``builder:``."""

_TOP_KEYS = {"name", "description", "builder", "params", "defaults", "npus", "nodes", "links", "provenance",
             "product"}
_DEFAULT_KEYS = {"step_overhead_us", "launch_overhead_us", "launch_overhead_by_collective_us", "expansion_mode",
                 "modes", "message_regimes"}
_REGIME_KEYS = {"from_bytes", "overhead_us", "efficiency", "pair_limit", "overhead_when", "new_peer_efficiency",
                "many_peer_efficiency"}
_NPU_KEYS = {"name", "server", "pod", "local_index", "reduce_GBps", "injection_GBps", "ejection_GBps", "half_duplex",
             "exchange_GBps", "engine_GBps"}
_NODE_KEYS = {"name", "kind"}
_LINK_KEYS = {"src", "dst", "bandwidth_GBps", "latency_us", "tier", "inline_reduce", "bidirectional"}


def builtin_dirs() -> list[Path]:
    """Folders searched for built-in topology names (installed copy, then the source tree)."""
    here = Path(__file__).resolve().parent.parent
    return [d for d in (here / "_builtin_topologies", here.parent / "topologies") if d.is_dir()]


def builtin_names() -> list[str]:
    return sorted({p.stem for d in builtin_dirs() for p in d.glob("*.yaml")})


def load_topology(source, **overrides) -> Topology:
    """Load a topology by built-in name, YAML path, or pass a Topology through.

    Parameters
    ----------
    source : str, Path or Topology
        A built-in name (see ``hcsim topo list``) or a YAML file.
    **overrides
        Builder parameters replacing the file's (builder-form files only), in builder
        units (``bandwidth_Bps=...``) or file units (``bandwidth_GBps=...``).

    Examples
    --------
    >>> t = load_topology("atlas800t-a2")
    >>> t.num_npus
    8
    """
    if isinstance(source, Topology):
        if overrides:
            raise ConfigError(f"overrides = {sorted(overrides)}: only apply when loading a file or name")
        return source
    if not isinstance(source, (str, Path)):
        raise ConfigError(f"topology = {source!r}: a built-in name, a YAML path or a Topology")
    path = Path(source)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        for d in builtin_dirs():
            cand = d / f"{source}.yaml"
            if cand.is_file():
                path = cand
                break
        else:
            if path.is_file():
                pass
            else:
                raise ConfigError(f"topology = {str(source)!r}: not a built-in name or a YAML file; "
                                  f"built-in: {', '.join(builtin_names())}")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML ({first})") from None
    return topology_from_dict(doc, str(path), **overrides)


def _check_keys(where: str, d, allowed: set):
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(d).__name__}")
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _num(where, value, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} = {value!r}: a number")
    if (value < 0) or (value == 0 and not allow_zero) or value != value:
        raise ConfigError(f"{where} = {value!r}: must be {'>= 0' if allow_zero else '> 0'}")
    return float(value)


def _convert_params(where: str, params: dict) -> dict:
    out = {}
    for k, v in params.items():
        if k.endswith("_GBps"):
            out[k[:-5] + "_Bps"] = _num(f"{where}.{k}", v) * 1e9
        elif k.endswith("_us"):
            out[k[:-3] + "_s"] = _num(f"{where}.{k}", v, allow_zero=True) * 1e-6
        else:
            out[k] = v
    return out


def topology_from_dict(doc, where: str = "topology", **overrides) -> Topology:
    """Build a Topology from a parsed YAML document (see module docs for the schema)."""
    _check_keys(where, doc, _TOP_KEYS)
    name = doc.get("name", Path(where).stem)
    description = doc.get("description", "")
    try:
        if "builder" in doc:
            for k in ("npus", "nodes", "links"):
                if k in doc:
                    raise ConfigError(f"{where}: key {k!r} cannot be used with 'builder'")
            bname = doc["builder"]
            if bname not in BUILDERS:
                raise ConfigError(f"{where}: builder = {bname!r}: unknown; known: {', '.join(sorted(BUILDERS))}")
            params = doc.get("params") or {}
            _check_keys(f"{where}: params", params, set(params))
            params = _convert_params(f"{where}: params", params)
            params.update(_convert_params("override", overrides))
            fn = BUILDERS[bname]
            sig = inspect.signature(fn)
            accepts_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
            allowed = [k for k, prm in sig.parameters.items() if prm.kind is not prm.VAR_KEYWORD]
            for k in params:
                if k not in sig.parameters and not (accepts_kwargs and k in {"reduce_Bps", "injection_Bps", "ejection_Bps", "half_duplex"}):
                    raise ConfigError(f"{where}: params.{k}: unknown parameter of builder {bname!r} "
                                      f"(allowed: {', '.join(allowed)})")
            if "dims" in params and isinstance(params["dims"], list):
                params["dims"] = tuple(params["dims"])
            try:
                topo = fn(**params)
            except TypeError as exc:
                raise ConfigError(f"{where}: builder {bname!r}: {exc}") from None
            topo.name = name
            if description:
                topo.description = description
            if "defaults" in doc:
                topo.defaults = _defaults(where, doc["defaults"], topo.defaults)
            topo.provenance = {"file": where, "builder": bname, **(doc.get("provenance") or {})}
            if "product" in doc:
                topo.product = _product(where, doc["product"])
            return topo
        if overrides:
            raise ConfigError(f"{where}: overrides {sorted(overrides)} need a builder-form file")
        topo = Topology(name, description, _defaults(where, doc.get("defaults") or {}, ExecutionDefaults()),
                        provenance={"file": where, **(doc.get("provenance") or {})},
                        product=_product(where, doc["product"]) if "product" in doc else None)
        for i, n in enumerate(doc.get("npus") or []):
            w = f"{where}: npus[{i}]"
            _check_keys(w, n, _NPU_KEYS)
            if "name" not in n:
                raise ConfigError(f"{w}: missing key 'name'")
            kw = {"server": n.get("server", 0), "pod": n.get("pod", 0), "local_index": n.get("local_index", 0),
                  "half_duplex": bool(n.get("half_duplex", False))}
            for key in ("reduce", "injection", "ejection", "exchange", "engine"):
                if f"{key}_GBps" in n:
                    kw[f"{key}_Bps"] = _num(f"{w}.{key}_GBps", n[f"{key}_GBps"]) * 1e9
            try:
                spec = NpuSpec(**kw)
            except HcsimError as exc:
                raise ConfigError(f"{w}: {exc}") from None
            topo.add_npu(str(n["name"]), spec)
        for i, n in enumerate(doc.get("nodes") or []):
            w = f"{where}: nodes[{i}]"
            _check_keys(w, n, _NODE_KEYS)
            kind = n.get("kind", "switch")
            if kind not in NODE_KINDS or kind == "npu":
                raise ConfigError(f"{w}.kind = {kind!r}: one of switch, nic, pcie (NPUs go under 'npus')")
            topo.add_node(str(n.get("name")), kind)
        for i, link in enumerate(doc.get("links") or []):
            w = f"{where}: links[{i}]"
            _check_keys(w, link, _LINK_KEYS)
            for k in ("src", "dst", "bandwidth_GBps"):
                if k not in link:
                    raise ConfigError(f"{w}: missing key {k!r}")
            try:
                spec = LinkSpec(_num(f"{w}.bandwidth_GBps", link["bandwidth_GBps"]) * 1e9,
                                _num(f"{w}.latency_us", link.get("latency_us", 0.0), allow_zero=True) * 1e-6,
                                link.get("tier", "generic"), bool(link.get("inline_reduce", False)))
                topo.add_link(str(link["src"]), str(link["dst"]), spec, bool(link.get("bidirectional", True)))
            except ConfigError as exc:
                if str(exc).startswith(where):
                    raise
                raise ConfigError(f"{w}: {exc}") from None
        if topo.num_npus < 1:
            raise ConfigError(f"{where}: npus: at least one NPU is needed")
        return topo
    except ConfigError as exc:
        msg = str(exc)
        if not msg.startswith(where):
            msg = f"{where}: {msg}"
        raise ConfigError(msg) from None


def _product(where, value):
    if value is not None and value not in PRODUCTS:
        raise ConfigError(f"{where}: product = {value!r}: one of {', '.join(PRODUCTS)}")
    return value


def _defaults(where, d, base: ExecutionDefaults) -> ExecutionDefaults:
    _check_keys(f"{where}: defaults", d, _DEFAULT_KEYS)
    kw = {"step_overhead_s": base.step_overhead_s, "launch_overhead_s": base.launch_overhead_s,
          "launch_overhead_by_collective_s": base.launch_overhead_by_collective_s,
          "expansion_mode": base.expansion_mode, "other_modes": base.other_modes,
          "message_regimes": base.message_regimes}
    for k, v in d.items():
        if k == "message_regimes":
            kw[k] = _regimes(f"{where}: defaults.message_regimes", v)
        elif k == "expansion_mode":
            if v not in EXPANSION_MODES:
                raise ConfigError(f"{where}: defaults.expansion_mode = {v!r}: one of {', '.join(EXPANSION_MODES)}")
            kw["expansion_mode"] = v
        elif k == "modes":
            _check_keys(f"{where}: defaults.modes", v, set(EXPANSION_MODES))
            modes = []
            for mode, figs in v.items():
                _check_keys(f"{where}: defaults.modes.{mode}", figs, {"step_overhead_us", "launch_overhead_us"})
                modes.append((mode, _num(f"{where}: defaults.modes.{mode}.step_overhead_us",
                                         figs.get("step_overhead_us", 0.0), allow_zero=True) * 1e-6,
                              _num(f"{where}: defaults.modes.{mode}.launch_overhead_us",
                                   figs.get("launch_overhead_us", 0.0), allow_zero=True) * 1e-6))
            kw["other_modes"] = tuple(modes)
        elif k == "launch_overhead_by_collective_us":
            from ..algorithms.schedule import COLLECTIVES

            _check_keys(f"{where}: defaults.{k}", v, set(COLLECTIVES))
            kw["launch_overhead_by_collective_s"] = tuple(
                (c, _num(f"{where}: defaults.{k}.{c}", x, allow_zero=True) * 1e-6) for c, x in v.items())
        else:
            kw[k[:-3] + "_s"] = _num(f"{where}: defaults.{k}", v, allow_zero=True) * 1e-6
    return ExecutionDefaults(**kw)


def _regimes(where, v) -> MessageRegimes:
    if not isinstance(v, list) or not v:
        raise ConfigError(f"{where} = {v!r}: a list of {{from_bytes, overhead_us, efficiency}}, the first from 0")
    starts, overheads, effs, pairs, when, newp, many = [], [], [], [], [], [], []
    for i, r in enumerate(v):
        if not isinstance(r, dict):
            raise ConfigError(f"{where}[{i}] = {r!r}: a mapping with from_bytes, overhead_us, efficiency")
        _check_keys(f"{where}[{i}]", r, _REGIME_KEYS)
        starts.append(r.get("from_bytes"))  # MessageRegimes checks it
        overheads.append(_num(f"{where}[{i}].overhead_us", r.get("overhead_us", 0.0), allow_zero=True) * 1e-6)
        effs.append(_num(f"{where}[{i}].efficiency", r.get("efficiency", 1.0)))
        pl = r.get("pair_limit", True)
        if not isinstance(pl, bool):
            raise ConfigError(f"{where}[{i}].pair_limit = {pl!r}: true or false")
        pairs.append(pl)
        w = r.get("overhead_when", "always")
        if w not in OVERHEAD_WHEN:
            raise ConfigError(f"{where}[{i}].overhead_when = {w!r}: one of {', '.join(OVERHEAD_WHEN)}")
        when.append(w)
        newp.append(_num(f"{where}[{i}].new_peer_efficiency", r.get("new_peer_efficiency", 1.0)))
        many.append(_num(f"{where}[{i}].many_peer_efficiency", r.get("many_peer_efficiency", 1.0)))
    try:
        return MessageRegimes(tuple(starts), tuple(overheads), tuple(effs), None if all(pairs) else tuple(pairs),
                              None if all(w == "always" for w in when) else tuple(when),
                              None if all(e == 1 for e in newp) else tuple(newp),
                              None if all(e == 1 for e in many) else tuple(many))
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def save_topology(topo: Topology, path) -> Path:
    """Write a topology as an explicit-form YAML file that :func:`load_topology` reads back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(topo.to_dict(), sort_keys=False))
    return path
