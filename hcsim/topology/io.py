"""YAML topologies: strict loading (unknown keys and impossible values are errors) and saving.

Two forms. A *builder* file names a builder and its parameters::

    name: my-pod
    builder: leaf_spine
    params: {leaves: 4, npus_per_leaf: 8, spines: 2, bandwidth_GBps: 25, oversubscription: 2}

An *explicit* file lists ``npus``, ``nodes`` and ``links``. Units in files are GB/s
(1e9 bytes/s) and microseconds; parameter names ending ``_GBps`` / ``_us`` are converted to
the builders' ``_Bps`` / ``_s`` arguments.

Any file either loads or fails with one :class:`~hcsim.errors.HcsimError` line naming the
file and the field path (``u.yaml: params.bandwidth_GBps = 'x': a number of GB/s > 0 ...``):
a file that is missing, a directory, larger than :data:`MAX_FILE_BYTES`, not UTF-8, not
YAML, nested too deeply, with more than :data:`MAX_YAML_NODES` values or aliases that expand
beyond :data:`MAX_YAML_EXPANDED` (a "billion laughs"), larger than
:data:`MAX_GENERAL_YAML_BYTES` and using YAML only the general reader reads, or with a key or
value of the wrong type or out of range.

Files are read straight from libyaml's events (:func:`_fast_document`: PyYAML's safe loader's
result, about 8x faster; PyYAML's pure-Python parser where libyaml is missing), and through
PyYAML's composer and safe constructor only for what that does not read (merge keys, explicit
tags): every limit above is a few seconds of CPU on a loaded 2-core machine.
"""

from __future__ import annotations

import difflib
import gc
import inspect
import math
import os
import re
import reprlib
from pathlib import Path

import yaml

from ..compute import ComputeSpec
from ..engine.regimes import OVERHEAD_WHEN, START_WHEN, MessageRegimes
from ..errors import ConfigError, HcsimError, WorkLimitError, bad_value, is_int, is_real, shown
from ..limits import MAX_LINKS, MAX_NODES, MAX_NPUS, MAX_SIZE_BYTES
from . import ascend, builders
from .model import EXPANSION_MODES, PRODUCTS, ExecutionDefaults, Topology
from .spec import LINK_TIERS, LinkSpec, MAX_BANDWIDTH_Bps, MAX_TIME_s, MIN_BANDWIDTH_Bps, NpuSpec

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

SCALE_PARAMETERS = {"atlas900_a2_pod": "servers", "atlas800_9000": "servers", "atlas900_a3_superpod": "nodes"}
"""The builder parameter ``load_topology(..., servers=N)`` sets (the A3 builder counts nodes)."""

_SCALE_INSTEAD = {"atlas800t_a2": "atlas900-a2-pod"}
"""For a one-server builder, the built-in that takes a server count instead."""

MAX_FILE_BYTES = 16 << 20
"""Largest topology (or scenario) file read: 16 MiB. Reading a saved topology takes about 0.4 s
per MiB (CPU on a loaded 2-core machine, parsing and building): the 5.6 MB file of a
1,024-server A2 pod loads in 2.2 s; a file at both limits (a million distinct names padded to
16 MiB) is parsed in about 4 s. Larger topologies are built by a builder."""

MAX_YAML_NODES = 1_000_000
"""Most YAML values (scalars, lists, mappings, aliases) a topology file may hold: about 3.5 us
each at worst to read (a million distinct names that an implicit type's pattern must rule out,
``n0, n1, ...``: 3.3 s), about 250 MB while it is read. :func:`save_topology` of a 1,024-server
A2 pod (46,080 links, 8,192 NPUs with their compute) writes 876,859; a 2,048-server pod (1.5
million) or a 600-NPU full mesh (2 million) is described by its builder."""

_READ_RATE = "about 4 s to read on a 2-core machine"

MAX_YAML_EXPANDED = 4_000_000
"""Most values a file may hold once its aliases are expanded (a "billion laughs" file holds a
few and expands to 10^9)."""

_TOP_KEYS = {"name", "description", "builder", "params", "defaults", "npus", "nodes", "links", "provenance",
             "product"}
_DEFAULT_KEYS = {"step_overhead_us", "launch_overhead_us", "launch_overhead_by_collective_us", "expansion_mode",
                 "modes", "message_regimes", "launch_overlap"}
_REGIME_KEYS = {"from_bytes", "overhead_us", "efficiency", "pair_limit", "overhead_when", "new_peer_efficiency",
                "many_peer_efficiency", "local_efficiency", "send_overhead_us", "send_copy_GBps", "start_when",
                "call_overhead_us"}
_NPU_KEYS = {"name", "server", "pod", "local_index", "compute", "reduce_GBps", "injection_GBps", "ejection_GBps", "half_duplex",
             "exchange_GBps", "engine_GBps"}
_NODE_KEYS = {"name", "kind", "in_network_efficiency"}
_LINK_KEYS = {"src", "dst", "bandwidth_GBps", "latency_us", "tier", "inline_reduce", "bidirectional"}
_PER_LEVEL = {"tiered_mesh": {"bandwidth_Bps", "latency_s", "inline_reduce"}}
"""Builder parameters that take one value per level (a list in a file)."""
_EFFICIENCY = (1e-6, 1e6)
"""Range of a message regime's efficiencies in a file."""


def builtin_dirs() -> list[Path]:
    """Folders searched for built-in topology names (installed copy, then the source tree)."""
    here = Path(__file__).resolve().parent.parent
    return [d for d in (here / "_builtin_topologies", here.parent / "topologies") if d.is_dir()]


def builtin_names() -> list[str]:
    return sorted({p.stem for d in builtin_dirs() for p in d.glob("*.yaml")})


# ---- reading a file ------------------------------------------------------------------------

def _resolve(source) -> Path:
    """The YAML file a ``topology`` argument names (a built-in name or a path)."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise bad_value("topology", _brief(source), "a built-in name, a YAML path or a Topology")

    def is_file(p: Path) -> bool:
        try:
            return p.is_file()
        except (OSError, ValueError):  # a name too long, a NUL byte
            return False

    path = Path(source)
    if path.suffix in (".yaml", ".yml") and is_file(path):
        return path
    if source in builtin_names():
        for d in builtin_dirs():
            if (d / f"{source}.yaml").is_file():
                return d / f"{source}.yaml"
    if is_file(path):
        return path
    try:
        is_dir = path.is_dir()
    except (OSError, ValueError):
        is_dir = False
    what = "a directory, not a YAML file" if is_dir and source else "not a built-in name or a YAML file"
    raise bad_value("topology", str(source), f"{what}; built-in: {', '.join(builtin_names())}")


def _read_text(path: Path) -> str:
    """The file's text: at most MAX_FILE_BYTES, UTF-8 (a byte-order mark is dropped)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise WorkLimitError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB (hcsim.topology.io.MAX_FILE_BYTES, "
                             f"{_READ_RATE}); describe a large topology with a builder")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
                          "save it as UTF-8") from None


class _PyEventParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's pure-Python scanner and parser (the same events as libyaml's, 4x slower)."""

    def __init__(self, stream):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


try:
    from yaml._yaml import CParser as _EventParser  # libyaml's scanner and parser: 4x faster
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _EventParser = _PyEventParser


class _Loader(yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver, _EventParser):
    """PyYAML's safe loader over libyaml's event parser, with the nodes composed in Python
    (libyaml's own composer recurses in C and crashes the process on deeply nested input;
    Python's raises RecursionError) and counted (at most MAX_YAML_NODES)."""

    check_node = yaml.composer.Composer.check_node
    get_node = yaml.composer.Composer.get_node
    get_single_node = yaml.composer.Composer.get_single_node

    def __init__(self, stream):
        _EventParser.__init__(self, stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.nodes = 0

    def compose_node(self, parent, index):
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            raise _TooLarge(f"more than {MAX_YAML_NODES:,} values (hcsim.topology.io.MAX_YAML_NODES, {_READ_RATE}); "
                            "describe a large topology with a builder")
        return yaml.composer.Composer.compose_node(self, parent, index)

    def compose_scalar_node(self, anchor):
        """Composer's, without the two marks per scalar (40% of the memory of a large file)."""
        event = self.get_event()
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, None, None, style=event.style)
        if anchor is not None:
            self.anchors[anchor] = node
        return node


class _TooLarge(Exception):
    pass


class _General(Exception):
    """The document uses what only the general reader (:class:`_Loader`) reads."""


class _Scalars(yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """PyYAML's safe loader's tag resolution and scalar constructors, for :func:`_fast_document`."""

    def __init__(self):
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


_MAP_TAGS = frozenset({None, "!", "tag:yaml.org,2002:map"})
_SEQ_TAGS = frozenset({None, "!", "tag:yaml.org,2002:seq"})
_KEY_ONLY_TAGS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})
_SIMPLE_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
"""A plain scalar YAML 1.1 reads as this decimal int (no sign +, underscore, base or colon)."""
_SIMPLE_FLOAT = re.compile(r"-?[0-9]{1,18}\.[0-9]{0,18}(?:[eE][-+][0-9]{1,4})?")
"""A plain scalar YAML 1.1 reads as ``float(text)`` (no sign +, underscore or colon)."""
_STR_TAG = "tag:yaml.org,2002:str"
MAX_YAML_TYPED = 100_000
"""Most distinct scalars a file may hold that are neither text nor plain decimal numbers (dates,
``0x1f``, ``1:30``, ``.inf``, ``yes``...): up to 9 us each to read (a timestamp), 0.9 s for
100,000; a saved topology holds a handful."""


_FAST_DEPTH = 64
"""Deepest nesting :func:`_fast_document` builds (a topology file nests 5 deep); deeper goes to
the general reader, which says "nested too deeply" where Python's recursion limit does."""

MAX_GENERAL_YAML_BYTES = 512 << 10
"""Largest file read by PyYAML's general reader (512 KiB, at most 2 s: 7.5 us a value, 4 s for
a MiB of ``0,``): one with explicit tags other than ``!!map`` and ``!!seq`` (``!!omap``,
``!!str``), merge keys (``<<``), a list or mapping as a key or nesting deeper than 64, none of
which :func:`save_topology` writes."""


def _fast_document(text: str):
    """The YAML document in ``text`` (None for none), built straight from the parser's events:
    what PyYAML's safe loader builds, several times faster (no node graph; each distinct plain
    scalar resolved and constructed once). Counts values (MAX_YAML_NODES) and their number with
    aliases expanded (MAX_YAML_EXPANDED) as it goes. Raises :class:`_General` for what only the
    general reader reads (see MAX_GENERAL_YAML_BYTES)."""
    parser = _EventParser(text)
    collecting = gc.isenabled()
    gc.disable()  # a million new containers and keys, none in a cycle: the collector would walk them again and again
    try:
        return _build(parser)
    finally:
        if collecting:
            gc.enable()
        getattr(parser, "dispose", lambda: None)()


def _build(parser):
    events = yaml.events
    scalar_event, alias_event = events.ScalarEvent, events.AliasEvent
    seq_start, map_start = events.SequenceStartEvent, events.MappingStartEvent
    seq_end, map_end = events.SequenceEndEvent, events.MappingEndEvent
    get = parser.get_event
    get()  # stream start
    event = get()
    if isinstance(event, events.StreamEndEvent):
        return None
    scalars = _Scalars()
    resolve, constructors, scalar_node = scalars.resolve, scalars.yaml_constructors, yaml.ScalarNode
    implicit = scalars.yaml_implicit_resolvers
    first_chars = frozenset(implicit)
    if None in first_chars or scalars.yaml_path_resolvers:  # pragma: no cover - none by default
        raise _General("a resolver for any first character")
    cache: dict = {}
    anchors: dict = {}
    opened = object()  # an anchor whose collection is still being read
    no_key = object()
    stack: list = []  # [container, is a mapping, pending key, expanded size, anchor]
    nodes, typed, root = 0, 0, None
    while True:
        event = get()
        kind = event.__class__
        if kind is scalar_event:
            nodes += 1
            tag, value, plain = event.tag, event.value, event.implicit[0]
            if tag is None and (not plain or value[:1] not in first_chars):
                pass  # a string: quoted, or no implicit type starts with its first character
            elif tag is None and _SIMPLE_INT.fullmatch(value):
                value = int(value)
            elif tag is None and _SIMPLE_FLOAT.fullmatch(value):
                value = float(value)
            elif tag is not None and tag != "!":
                raise _General(f"the explicit tag {tag!r}")
            else:
                key = (value, plain)
                try:
                    value = cache[key]
                except KeyError:
                    if plain and tag is None:  # Resolver.resolve for a plain scalar, without its calls
                        tag = next((t for t, pattern in implicit.get(value[:1], ()) if pattern.match(value)),
                                   _STR_TAG)
                    else:
                        tag = resolve(scalar_node, value, event.implicit)
                    if tag in _KEY_ONLY_TAGS:
                        raise _General(f"the key {value!r}") from None
                    if tag != _STR_TAG:
                        typed += 1
                        if typed > MAX_YAML_TYPED:
                            raise _TooLarge(f"more than {MAX_YAML_TYPED:,} distinct values other than text and "
                                            "plain decimal numbers (dates, hex, octal or sexagesimal numbers...; "
                                            f"hcsim.topology.io.MAX_YAML_TYPED, {_READ_RATE})") from None
                        value = constructors.get(tag, constructors[None])(
                            scalars, scalar_node(tag, value, None, None, style=event.style))
                    cache[key] = value
            size = 1
            if event.anchor is not None:
                _anchor(anchors, event)
                anchors[event.anchor] = (value, 1)
        elif kind is map_start or kind is seq_start:
            nodes += 1
            if nodes > MAX_YAML_NODES:
                raise _TooLarge(f"more than {MAX_YAML_NODES:,} values (hcsim.topology.io.MAX_YAML_NODES, {_READ_RATE}); "
                            "describe a large topology with a builder")
            if event.tag not in (_MAP_TAGS if kind is map_start else _SEQ_TAGS):
                raise _General(f"the explicit tag {event.tag!r}")
            if len(stack) >= _FAST_DEPTH:
                raise _General(f"nesting deeper than {_FAST_DEPTH}")
            if event.anchor is not None:
                _anchor(anchors, event)
                anchors[event.anchor] = opened
            stack.append([{} if kind is map_start else [], kind is map_start, no_key, 1, event.anchor])
            continue
        elif kind is map_end or kind is seq_end:
            value, _, _, size, anchor = stack.pop()
            if anchor is not None:
                anchors[anchor] = (value, size)
        elif kind is alias_event:
            nodes += 1
            found = anchors.get(event.anchor)
            if found is None:
                raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}",
                                                  event.start_mark)
            if found is opened:
                raise _TooLarge("an alias refers to a value that contains it (a recursive structure)")
            value, size = found
        else:  # document end
            break
        if nodes > MAX_YAML_NODES:
            raise _TooLarge(f"more than {MAX_YAML_NODES:,} values (hcsim.topology.io.MAX_YAML_NODES, {_READ_RATE}); "
                            "describe a large topology with a builder")
        if not stack:
            root = value
            continue
        top = stack[-1]
        top[3] += size
        if top[3] > MAX_YAML_EXPANDED:
            raise _TooLarge(f"its aliases expand to more than {MAX_YAML_EXPANDED:,} values "
                            "(hcsim.topology.io.MAX_YAML_EXPANDED)")
        if not top[1]:
            top[0].append(value)
        elif top[2] is no_key:
            if isinstance(value, (list, dict)):
                raise _General("a list or mapping as a key")
            top[2] = value
        else:
            top[0][top[2]] = value
            top[2] = no_key
    event = get()
    if not isinstance(event, events.StreamEndEvent):
        raise yaml.composer.ComposerError("expected a single document in the stream", None,
                                          "but found another document", event.start_mark)
    return root


def _anchor(anchors: dict, event) -> None:
    if event.anchor in anchors:
        raise yaml.composer.ComposerError(f"found duplicate anchor {event.anchor!r}; first occurrence", None,
                                          "second occurrence", event.start_mark)


def _expanded_size(root) -> int:
    """Values the document holds with every alias expanded (iteratively, each node once);
    a node that contains itself through an alias is refused."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node)
            size[key] = min(1 + sum(size[id(k)] for k in kids), MAX_YAML_EXPANDED + 1)
            continue
        if key in size:
            continue
        if key in on_path:
            raise _TooLarge("an alias refers to a value that contains it (a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)
    return size[id(root)]


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def _parse(text: str, where: str):
    """The YAML document in ``text`` (None for an empty one), or a one-line error."""
    try:
        return _parse_with(_fast_document, text, where)
    except _General as why:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_GENERAL_YAML_BYTES:
            raise WorkLimitError(f"{where}: refused: {size / 2**20:.1f} MiB using {why}, which only the general "
                                 f"YAML reader reads, at most {MAX_GENERAL_YAML_BYTES >> 10} KiB "
                                 "(hcsim.topology.io.MAX_GENERAL_YAML_BYTES); write plain values") from None
    return _parse_with(_general_document, text, where)


def _general_document(text: str):
    """The YAML document in ``text`` through PyYAML's composer and safe constructor."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_EXPANDED:
            raise _TooLarge(f"its aliases expand to more than {MAX_YAML_EXPANDED:,} values "
                            "(hcsim.topology.io.MAX_YAML_EXPANDED)")
        return loader.construct_document(node)
    finally:
        getattr(loader, "dispose", lambda: None)()


def _parse_with(read, text: str, where: str):
    """``read(text)``, its errors as one line naming ``where``."""
    try:
        return read(text)
    except _TooLarge as exc:
        raise WorkLimitError(f"{where}: refused: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or exc.context
        if problem and "nesting depth" in problem:  # libyaml >= 0.2.6 stops at 1,000 levels itself
            problem = "nested too deeply"
        raise ConfigError(f"{where}: not valid YAML ({at}{problem})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({str(exc).splitlines()[0] if str(exc) else 'unreadable'})") \
            from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid YAML (nested too deeply)") from None
    except MemoryError:
        raise WorkLimitError(f"{where}: refused: too large to read") from None
    except (ValueError, TypeError, OverflowError, AttributeError) as exc:  # a date 2001-02-30, a 5,000-digit int
        raise ConfigError(f"{where}: not valid YAML (a value cannot be read: {str(exc)[:80]})") from None


def read_topology_file(source) -> tuple[dict | None, str]:
    """``(document, path)``: the parsed YAML of a built-in name or a YAML path, not built."""
    path = _resolve(source)
    return _parse(_read_text(path), str(path)), str(path)


# ---- checking values -----------------------------------------------------------------------

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter: 5x faster


class _Brief:
    """A value shown by a short repr (a big or recursive container from a file is not printed whole)."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 2, 4, 4, 3, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 70, 60, 40


def _brief(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value  # errors.shown cuts these
    try:
        return _Brief(_REPR.repr(value))
    except Exception:
        return _Brief(f"<{type(value).__name__}>")


def _bad(field: str, value, allowed: str) -> ConfigError:
    return bad_value(field, _brief(value), allowed)


def _mapping(field: str, value, allowed=None, none_ok: bool = True) -> dict:
    """A mapping with string keys, each in ``allowed`` (if given); None is {} if ``none_ok``."""
    if value is None and none_ok:
        return {}
    if not isinstance(value, dict):
        raise _bad(field, value, "expected a mapping" + (f" ({', '.join(sorted(allowed))})" if allowed else ""))
    for k in value:
        if not isinstance(k, str):
            raise ConfigError(f"{field}: key {shown(_brief(k))}: keys are names (strings)")
    if allowed is not None:
        for k in value:
            if k not in allowed:
                raise ConfigError(f"{field}: unknown key {shown(k)}{_did_you_mean(k, allowed)}; "
                                  f"allowed: {', '.join(sorted(allowed))}")
    return value


def _did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _sequence(field: str, value) -> list:
    """A list (None is an empty one)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise _bad(field, value, "a list")
    return list(value)


def _number(field: str, value, scale: float, lo: float, hi: float, unit: str, allow_inf=False) -> float:
    """``value * scale`` for a real number whose scaled value lies in ``[lo, hi]`` (internal units)."""
    pos = lo > 0
    allowed = (f"a number of {unit} {'> 0' if pos else '>= 0'} (from {lo / scale:g} to {hi / scale:g}"
               + (", or .inf" if allow_inf else "") + ")")
    if not is_real(value):
        raise _bad(field, value, allowed + _yaml_float_hint(value))
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        raise _bad(field, value, allowed) from None
    if v == math.inf and allow_inf:
        return v
    scaled = v * scale
    if not lo <= scaled <= hi:  # NaN fails too
        raise _bad(field, value, allowed)
    return scaled + 0.0


def _yaml_float_hint(value) -> str:
    """YAML 1.1 (PyYAML) reads ``1e9`` as text: only ``1.0e9`` or ``1.0e+9`` is a number."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return f"; YAML reads {value!r} as text, write it with a dot and a signed exponent (1.0e+9)"
    return ""


def _gbps(field, value, allow_inf=False):
    return _number(field, value, 1e9, MIN_BANDWIDTH_Bps, MAX_BANDWIDTH_Bps, "GB/s", allow_inf)


def _us(field, value):
    return _number(field, value, 1e-6, 0.0, MAX_TIME_s, "microseconds")


def _efficiency(field, value):
    return _number(field, value, 1.0, _EFFICIENCY[0], _EFFICIENCY[1], "(a fraction of the rate)")


def _integer(field, value, lo, hi) -> int:
    if not is_int(value) or not lo <= value <= hi:
        raise _bad(field, value, f"an integer from {lo} to {hi:,}")
    return int(value)


def _bool(field, value) -> bool:
    if not isinstance(value, bool):
        raise _bad(field, value, "true or false")
    return value


def _one_of(field, value, options) -> str:
    if not isinstance(value, str) or value not in options:
        raise _bad(field, value, "one of " + ", ".join(options))
    return value


def _label(field, value) -> str:
    """A name: a non-empty string (an integer such as ``0`` is read as its digits)."""
    if is_int(value) and abs(value) < 10**18:
        return str(int(value))
    if not isinstance(value, str) or not value:
        raise _bad(field, value, "a non-empty string")
    return value


# ---- loading ---------------------------------------------------------------------------------

def load_topology(source, **overrides) -> Topology:
    """Load a topology by built-in name, YAML path, or pass a Topology through.

    Parameters
    ----------
    source : str, Path or Topology
        A built-in name (see ``hcsim topo list``) or a YAML file.
    **overrides
        Builder parameters replacing the file's (builder-form files only), in builder
        units (``bandwidth_Bps=...``) or file units (``bandwidth_GBps=...``). ``servers=N``
        is understood by every topology: it sets the builder's own server count
        (:func:`scale_parameter`: ``servers`` of the A2 pod and the 910A builder, ``nodes``
        of the A3 superpod); a topology that has N servers already accepts it as is, and
        any other (one fixed server, an explicit file, a generic builder) refuses it in one
        line that says what to do instead.

    Raises
    ------
    HcsimError
        One line naming the file and the field, for anything that is not a topology.

    Examples
    --------
    >>> t = load_topology("atlas800t-a2")
    >>> t.num_npus
    8
    >>> load_topology("atlas900-a3-superpod", servers=2).num_npus  # 2 nodes of 16 dies
    32
    """
    if isinstance(source, Topology):
        if overrides:
            raise bad_value("overrides", sorted(overrides), "only apply when loading a file or a built-in name, "
                            "not to a Topology object")
        return source
    doc, where = read_topology_file(source)
    return topology_from_dict(doc, where, **overrides)


def scale_parameter(source) -> str | None:
    """The builder parameter ``load_topology(source, servers=N)`` sets (``"servers"`` or
    ``"nodes"``), or None when the topology has no server count to change (one fixed server,
    a generic builder, an explicit file or a Topology object).

    Examples
    --------
    >>> scale_parameter("atlas900-a3-superpod"), scale_parameter("atlas800t-a2")
    ('nodes', None)
    """
    if isinstance(source, Topology):
        return None
    doc, _ = read_topology_file(source)
    builder = doc.get("builder") if isinstance(doc, dict) else None
    return SCALE_PARAMETERS.get(builder) if isinstance(builder, str) else None


def topology_from_dict(doc, where: str = "topology", **overrides) -> Topology:
    """Build a Topology from a parsed YAML document (see module docs for the schema).

    Every error is one line starting with ``where`` (the file) and naming the field path.
    """
    if not isinstance(where, str):
        where = str(where)
    try:
        return _from_dict(doc, where, overrides)
    except HcsimError as exc:
        msg = str(exc)
        if not msg.startswith(f"{where}: "):
            msg = f"{where}: {msg}"
        raise type(exc)(msg) from None


def _from_dict(doc, where: str, overrides: dict) -> Topology:
    if not isinstance(doc, dict):
        raise _bad("document", _Brief("None (an empty file)") if doc is None else doc, "expected a mapping of topology keys (name, description, builder and params, "
                   "or npus, nodes and links, ...)")
    _mapping("document", doc, _TOP_KEYS)
    name = _label("name", doc["name"]) if "name" in doc else (Path(where).stem or "topology")
    description = doc.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        raise _bad("description", description, "a string")
    provenance = _mapping("provenance", doc.get("provenance"))
    product = None if doc.get("product") is None else _one_of("product", doc["product"], PRODUCTS)
    servers = overrides.pop("servers", None)
    if servers is not None:
        servers = _integer("servers", servers, 1, MAX_NPUS)
    if "builder" in doc:
        for k in ("npus", "nodes", "links"):
            if k in doc:
                raise ConfigError(f"key {k!r} cannot be used with 'builder' (a builder makes the NPUs, nodes "
                                  "and links)")
        topo, bname = _built(doc, name, overrides, servers)
        scaled = servers is not None and bname in SCALE_PARAMETERS
        changed = {**overrides, **({"servers": servers} if scaled else {})}
        topo.name = name
        if description:  # the file's words describe its own parameters: say what was changed
            topo.description = description + (f" (overridden: {_args(changed)})" if changed else "")
        if "defaults" in doc:
            topo.defaults = _defaults(doc["defaults"], topo.defaults)
        topo.provenance = {"file": where, "builder": bname, **provenance}
        if "product" in doc:
            topo.product = product
        if servers is not None:
            _same_servers(topo, servers, f"builder {bname} has no server count: set its own parameters instead",
                          _SCALE_INSTEAD.get(bname))
        return topo
    if overrides:
        raise bad_value("overrides", sorted(overrides), "need a builder-form file (this one lists its NPUs, "
                        "nodes and links)")
    topo = Topology(name, description, _defaults(doc.get("defaults"), ExecutionDefaults()),
                    provenance={"file": where, **provenance}, product=product)
    _explicit(topo, doc)
    if servers is not None:
        _same_servers(topo, servers, "its file lists its NPUs, nodes and links: it cannot be scaled", None)
    return topo


def _args(kw: dict) -> str:
    return ", ".join(f"{k} = {shown(_brief(v))}" for k, v in kw.items())


def _same_servers(topo: Topology, servers: int, why: str, instead: str | None):
    """``servers=N`` on a topology with no server count: fine if it has N servers already."""
    have = len({(s.pod, s.server) for _, s in topo._npu_nodes()})
    if have == servers:
        return
    if instead:
        fixed = "one fixed server" if have == 1 else f"{have} fixed servers"
        raise bad_value("servers", servers, f"topology {topo.name!r} is {fixed}; use {instead} for several servers")
    raise bad_value("servers", servers, f"topology {topo.name!r} has {have} server(s) and {why}")


def _file_name(param: str) -> str:
    """A builder parameter as a file names it (``bandwidth_Bps`` -> ``bandwidth_GBps``)."""
    if param.endswith("_Bps"):
        return param[:-4] + "_GBps"
    if param.endswith("_s"):
        return param[:-2] + "_us"
    return param


def _builder_params(fn) -> tuple[dict, bool]:
    """``({name: default or inspect.Parameter.empty}, takes NPU endpoint keywords)``."""
    sig = inspect.signature(fn)
    params = {k: p.default for k, p in sig.parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    npu_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    if npu_kw:
        for k in builders.NPU_KEYWORDS:
            params.setdefault(k, NpuSpec.__dataclass_fields__[k].default)
    return params, npu_kw


def _convert(bname: str, params: dict, field: str, key: str, value, units_ok: bool):
    """``(builder parameter, value in builder units)`` for one file parameter or override."""
    known = {_file_name(p): p for p in params}
    if units_ok:
        known.update({p: p for p in params})
    if key not in known:
        if not units_ok and key in params and key != _file_name(key):
            raise _bad(f"{field}.{key}", value, f"files give {'GB/s' if key.endswith('_Bps') else 'microseconds'}: "
                       f"write {_file_name(key)}")
        raise _bad(f"{field}.{key}", value, f"not a parameter of builder {bname!r}{_did_you_mean(key, set(known))}; "
                   f"known: {', '.join(sorted({_file_name(p) for p in params}))}")
    param = known[key]
    if key == param:  # already in builder units (or a plain parameter): the builder checks it
        return param, value
    default = params[param]
    convert = _gbps if key.endswith("_GBps") else _us
    extra = {"allow_inf": True} if param == "reduce_Bps" else {}
    if value is None and default is None:
        return param, None
    if isinstance(value, (list, tuple)) and param in _PER_LEVEL.get(bname, ()):
        if len(value) > 3:
            raise _bad(f"{field}.{key}", value, "one value per level (at most 3)")
        return param, tuple(convert(f"{field}.{key}[{i}]", v, **extra) for i, v in enumerate(value))
    return param, convert(f"{field}.{key}", value, **extra)


def _built(doc: dict, name: str, overrides: dict, servers: int | None) -> tuple[Topology, str]:
    bname = doc["builder"]
    if not isinstance(bname, str) or bname not in BUILDERS:
        raise _bad("builder", bname, "unknown; known: " + ", ".join(sorted(BUILDERS)))
    fn = BUILDERS[bname]
    params, _ = _builder_params(fn)
    given = _mapping("params", doc.get("params"))
    kwargs, origin = {}, {}
    for key, value in given.items():
        param, v = _convert(bname, params, "params", key, value, units_ok=False)
        kwargs[param], origin[param] = v, f"params.{key}"
    from_overrides = {}
    for key, value in overrides.items():
        param, v = _convert(bname, params, "overrides", key, value, units_ok=True)
        if param in from_overrides:
            raise _bad(f"overrides.{key}", value, f"{param} is overridden twice ({from_overrides[param]} and {key})")
        from_overrides[param] = key
        kwargs[param], origin[param] = v, f"overrides.{key}"
    scale = SCALE_PARAMETERS.get(bname)
    if servers is not None and scale is not None:
        if scale in from_overrides and scale != "servers":
            raise bad_value("servers", servers, f"and {scale} = {shown(kwargs[scale])} both set the size of "
                            f"builder {bname}: give one")
        kwargs[scale], origin[scale] = servers, "servers" if scale == "servers" else f"servers (the builder's {scale})"
    missing = [_file_name(p) for p, d in params.items() if d is inspect.Parameter.empty and p not in kwargs]
    if missing:
        raise ConfigError(f"params: builder {bname!r} needs {', '.join(missing)}")
    try:
        topo = fn(**kwargs)
    except HcsimError as exc:
        raise type(exc)(_rename(str(exc), origin, bname)) from None
    except TypeError as exc:  # pragma: no cover - every argument is checked above
        raise ConfigError(f"builder {bname!r}: {exc}") from None
    return topo, bname


def _rename(msg: str, origin: dict, bname: str) -> str:
    """A builder's error in the file's terms: ``n = 1: ...`` -> ``params.n = 1: ...`` (a
    parameter given as is), ``servers = 60: ... (the builder's nodes)`` (set by ``servers=``);
    anything else (a value converted from file units, a size limit) names the builder."""
    head, sep, rest = msg.partition(" = ")
    src = origin.get(head) if sep else None
    if src in (f"params.{head}", f"overrides.{head}", "servers"):
        return msg if src == "servers" else f"{src.split('.')[0]}.{msg}"
    if src is not None and src.startswith("servers"):
        value, _, allowed = rest.partition(": ")
        return f"servers = {value} ({src[len('servers ('):-1]}): {allowed}"
    return f"builder {bname!r}: {msg}"


def _explicit(topo: Topology, doc: dict) -> None:
    npus, nodes, links = (_sequence(k, doc.get(k)) for k in ("npus", "nodes", "links"))
    if len(npus) > MAX_NPUS or len(npus) + len(nodes) > MAX_NODES or len(links) > MAX_LINKS:
        raise WorkLimitError(f"npus, nodes, links = {len(npus):,}, {len(nodes):,}, {len(links):,} entries: at most "
                             f"{MAX_NPUS:,} NPUs, {MAX_NODES:,} nodes in all and {MAX_LINKS:,} links (hcsim.limits)")
    computes: dict = {}
    for i, n in enumerate(npus):
        w = f"npus[{i}]"
        n = _mapping(w, n, _NPU_KEYS, none_ok=False)
        if "name" not in n:
            raise ConfigError(f"{w}: missing key 'name'")
        kw = {k: _integer(f"{w}.{k}", n.get(k, 0), 0, MAX_NODES) for k in ("server", "pod", "local_index")}
        kw["half_duplex"] = _bool(f"{w}.half_duplex", n.get("half_duplex", False))
        for key in ("reduce", "injection", "ejection", "exchange", "engine"):
            value = n.get(f"{key}_GBps")
            if value is not None or (key == "reduce" and f"{key}_GBps" in n):  # null: no limit (reduce: a number)
                kw[f"{key}_Bps"] = _gbps(f"{w}.{key}_GBps", value, allow_inf=key == "reduce")
        if n.get("compute") is not None:
            kw["compute"] = _once(computes, n["compute"], lambda w=w, n=n: _at(w, ComputeSpec.from_dict, n["compute"]))
        _at(w, topo.add_npu, _label(f"{w}.name", n["name"]), _at(w, NpuSpec, **kw))
    for i, n in enumerate(nodes):
        w = f"nodes[{i}]"
        n = _mapping(w, n, _NODE_KEYS, none_ok=False)
        if "name" not in n:
            raise ConfigError(f"{w}: missing key 'name'")
        kind = n.get("kind", "switch")
        if not isinstance(kind, str) or kind not in ("switch", "nic", "pcie"):
            raise _bad(f"{w}.kind", kind, "one of switch, nic, pcie (NPUs go under 'npus')")
        _at(w, topo.add_node, _label(f"{w}.name", n["name"]), kind, n.get("in_network_efficiency"))
    directed = 0
    specs: dict = {}
    for i, link in enumerate(links):
        w = f"links[{i}]"
        link = _mapping(w, link, _LINK_KEYS, none_ok=False)
        for k in ("src", "dst", "bandwidth_GBps"):
            if k not in link:
                raise ConfigError(f"{w}: missing key {k!r}")
        figures = (link["bandwidth_GBps"], link.get("latency_us", 0.0), link.get("tier", "generic"),
                   link.get("inline_reduce", False))
        spec = _once(specs, figures, lambda w=w, link=link: _at(
            w, LinkSpec, _gbps(f"{w}.bandwidth_GBps", link["bandwidth_GBps"]),
            _us(f"{w}.latency_us", link.get("latency_us", 0.0)),
            _one_of(f"{w}.tier", link.get("tier", "generic"), LINK_TIERS),
            _bool(f"{w}.inline_reduce", link.get("inline_reduce", False))))
        both = _bool(f"{w}.bidirectional", link.get("bidirectional", True))
        directed += 2 if both else 1
        if directed > MAX_LINKS:
            raise WorkLimitError(f"{w}: more than {MAX_LINKS:,} directed links (hcsim.limits.MAX_LINKS)")
        _at(w, topo.add_link, _label(f"{w}.src", link["src"]), _label(f"{w}.dst", link["dst"]), spec, both)
    if topo.num_npus < 1:
        raise ConfigError("npus: at least one NPU is needed")


def _once(made: dict, figures, make):
    """``make()``, made once for equal ``figures`` (values read from a file, compared with their
    types: ``1`` and ``True`` differ) and shared: the specs it makes are frozen, as a builder
    shares one spec among its links. A spec is checked when first made, so an error names the
    first entry that has it."""
    try:
        key = _frozen(figures)
        return made[key]
    except KeyError:
        made[key] = spec = make()
        return spec
    except (TypeError, RecursionError):  # unhashable or self-containing: made each time
        return make()


def _frozen(value):
    if isinstance(value, dict):
        return dict, tuple((_frozen(k), _frozen(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value), tuple(_frozen(v) for v in value)
    hash(value)
    return type(value), value


def _at(w: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with its error prefixed by the entry it came from."""
    try:
        return fn(*args, **kwargs)
    except HcsimError as exc:
        raise type(exc)(f"{w}: {exc}") from None


def _defaults(d, base: ExecutionDefaults) -> ExecutionDefaults:
    d = _mapping("defaults", d, _DEFAULT_KEYS)
    kw = {"step_overhead_s": base.step_overhead_s, "launch_overhead_s": base.launch_overhead_s,
          "launch_overhead_by_collective_s": base.launch_overhead_by_collective_s,
          "expansion_mode": base.expansion_mode, "other_modes": base.other_modes,
          "message_regimes": base.message_regimes, "launch_overlap": base.launch_overlap}
    for k, v in d.items():
        f = f"defaults.{k}"
        if k == "launch_overlap":
            kw[k] = _bool(f, v)
        elif k == "message_regimes":
            kw[k] = None if v is None else _regimes(f, v)
        elif k == "expansion_mode":
            kw["expansion_mode"] = _one_of(f, v, EXPANSION_MODES)
        elif k == "modes":
            modes = []
            for mode, figs in _mapping(f, v, set(EXPANSION_MODES)).items():
                figs = _mapping(f"{f}.{mode}", figs, {"step_overhead_us", "launch_overhead_us"})
                modes.append((mode, _us(f"{f}.{mode}.step_overhead_us", figs.get("step_overhead_us", 0.0)),
                              _us(f"{f}.{mode}.launch_overhead_us", figs.get("launch_overhead_us", 0.0))))
            kw["other_modes"] = tuple(modes)
        elif k == "launch_overhead_by_collective_us":
            from ..algorithms.schedule import COLLECTIVES

            kw["launch_overhead_by_collective_s"] = tuple(
                (c, _us(f"{f}.{c}", x)) for c, x in _mapping(f, v, set(COLLECTIVES)).items())
        else:
            kw[k[:-3] + "_s"] = _us(f, v)
    return ExecutionDefaults(**kw)


def _regimes(where, v) -> MessageRegimes:
    allowed = "a list of {from_bytes, overhead_us, efficiency}, the first from 0"
    if not isinstance(v, (list, tuple)) or not v:
        raise _bad(where, v, allowed)
    if len(v) > 64:
        raise _bad(where, v, "at most 64 regimes")
    starts, overheads, effs, pairs, when, newp, many, local, send_o, send_c, start, call = ([] for _ in range(12))
    for i, r in enumerate(v):
        w = f"{where}[{i}]"
        r = _mapping(w, r, _REGIME_KEYS, none_ok=False)
        if "from_bytes" not in r:
            raise ConfigError(f"{w}: missing key 'from_bytes'")
        starts.append(_integer(f"{w}.from_bytes", r["from_bytes"], 0, MAX_SIZE_BYTES))
        overheads.append(_us(f"{w}.overhead_us", r.get("overhead_us", 0.0)))
        effs.append(_efficiency(f"{w}.efficiency", r.get("efficiency", 1.0)))
        pairs.append(_bool(f"{w}.pair_limit", r.get("pair_limit", True)))
        when.append(_one_of(f"{w}.overhead_when", r.get("overhead_when", "always"), OVERHEAD_WHEN))
        newp.append(_efficiency(f"{w}.new_peer_efficiency", r.get("new_peer_efficiency", 1.0)))
        many.append(_efficiency(f"{w}.many_peer_efficiency", r.get("many_peer_efficiency", 1.0)))
        local.append(_efficiency(f"{w}.local_efficiency", r.get("local_efficiency", 1.0)))
        # the ranges MessageRegimes takes, checked here so that the message names the file's key
        send_o.append(_number(f"{w}.send_overhead_us", r.get("send_overhead_us", 0.0), 1e-6, 0.0, 1.0, "microseconds"))
        send_c.append(_number(f"{w}.send_copy_GBps", r["send_copy_GBps"], 1e9, 1.0, 1e15, "GB/s", allow_inf=True)
                      if "send_copy_GBps" in r else float("inf"))
        start.append(_one_of(f"{w}.start_when", r.get("start_when", "both"), START_WHEN))
        call.append(_number(f"{w}.call_overhead_us", r.get("call_overhead_us", 0.0), 1e-6, 0.0, 1.0, "microseconds"))
    try:
        return MessageRegimes(tuple(starts), tuple(overheads), tuple(effs), None if all(pairs) else tuple(pairs),
                              None if all(w == "always" for w in when) else tuple(when),
                              None if all(e == 1 for e in newp) else tuple(newp),
                              None if all(e == 1 for e in many) else tuple(many),
                              None if all(e == 1 for e in local) else tuple(local),
                              None if all(v == 0 for v in send_o) else tuple(send_o),
                              None if all(v == float("inf") for v in send_c) else tuple(send_c),
                              None if all(v == "both" for v in start) else tuple(start),
                              None if all(v == 0 for v in call) else tuple(call))
    except HcsimError as e:
        raise ConfigError(f"{where.rsplit('.', 1)[0]}.{e}") from None


def _values(doc) -> int:
    """YAML values (scalars, lists, mappings) ``doc`` dumps to."""
    count, stack = 0, [doc]
    while stack:
        x = stack.pop()
        count += 1
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return count


_LISTS = ("npus", "nodes", "links")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


class _Multiline(Exception):
    pass


def _dump(doc: dict) -> str:
    """YAML text of a topology document that reads back as ``doc``: the head (name, defaults,
    provenance...) by libyaml's emitter, then each entry of ``npus``, ``nodes`` and ``links`` as
    one flow mapping a line, each distinct value written once (as the emitter writes it in a
    flow sequence; a plain name as it is; a mapping, an NPU's compute, once and then as an
    alias). 10x faster than dumping the whole document (5.8 s for
    a 1,024-server A2 pod); a value the emitter would write on several lines has it dump the
    whole document instead."""
    if not all(isinstance(doc.get(k, []), list) and all(isinstance(e, dict) for e in doc.get(k, []))
               for k in _LISTS):
        return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
    head = {k: v for k, v in doc.items() if k not in _LISTS}
    out = [yaml.dump(head, Dumper=_Dumper, sort_keys=False)] if head else []
    written: dict = {}
    resolver = yaml.resolver.Resolver()

    def text(value) -> str:
        kind = type(value)
        if kind is str and _PLAIN_NAME.fullmatch(value) and \
                resolver.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG:
            return value
        if kind is int:
            return str(value)
        try:
            key = _frozen(value)
            return written[key]
        except KeyError:
            pass
        except TypeError:  # unhashable: written each time
            key = None
        dumped = yaml.dump([value], Dumper=_Dumper, default_flow_style=True, width=1 << 30)
        if "\n" in dumped[:-1] or not (dumped.startswith("[") and dumped.endswith("]\n")):
            raise _Multiline
        dumped = dumped[1:-2]
        if key is not None and isinstance(value, dict):  # an NPU's compute: written once, then an alias
            anchor = f"v{len(written)}"
            written[key] = f"*{anchor}"
            return f"&{anchor} {dumped}"
        if key is not None:
            written[key] = dumped
        return dumped

    try:
        for key in _LISTS:
            if key not in doc:
                continue
            if not doc[key]:
                out.append(f"{key}: []\n")
                continue
            out.append(f"{key}:\n")
            out.extend("- {" + ", ".join(f"{text(k)}: {text(v)}" for k, v in entry.items()) + "}\n"
                       for entry in doc[key])
    except _Multiline:
        return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)
    return "".join(out)


def save_topology(topo: Topology, path) -> Path:
    """Write a topology as an explicit-form YAML file that :func:`load_topology` reads back.

    A link whose two directions have the same spec is written once (``bidirectional`` is
    true by default), each NPU, node and link as one flow mapping a line (:func:`_dump`: a
    1,024-server A2 pod in 5.6 MB and 0.7 s, where the block form took 9.3 MB and 5.8 s). A
    topology whose file would hold more than :data:`MAX_YAML_NODES` values -- more than
    :func:`load_topology` reads -- is refused before anything is written.
    """
    if not isinstance(topo, Topology):
        raise bad_value("topology", _brief(topo), "a Topology")
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise bad_value("path", _brief(path), "a file path")
    path = Path(path)
    doc = topo.to_dict()
    defaults = doc.get("defaults")
    if isinstance(defaults, dict):  # Topology.to_dict leaves the expansion modes out: read back, HOST
        if topo.defaults.expansion_mode != ExecutionDefaults().expansion_mode:
            defaults["expansion_mode"] = topo.defaults.expansion_mode
        if topo.defaults.other_modes:
            defaults["modes"] = {mode: {"step_overhead_us": step * 1e6, "launch_overhead_us": launch * 1e6}
                                 for mode, step, launch in topo.defaults.other_modes}
    for npu in doc.get("npus", ()):  # each NPU's compute section (Topology.to_dict leaves it out)
        spec = topo.npu_spec(npu["name"])
        if spec.compute is not None:
            npu["compute"] = spec.compute.to_dict()
    values = _values(doc)
    if values > MAX_YAML_NODES:
        raise WorkLimitError(f"topology {topo.name!r}: its explicit file would hold {values:,} values, more than "
                             f"load_topology reads ({MAX_YAML_NODES:,}, hcsim.topology.io.MAX_YAML_NODES); keep "
                             "the builder file or call that describes it instead")
    try:
        text = _dump(doc)
    except yaml.YAMLError as exc:
        raise ConfigError(f"topology {topo.name!r}: cannot be written as YAML ({str(exc).splitlines()[0]}); "
                          "its provenance holds values YAML cannot represent") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except (OSError, ValueError) as exc:
        raise bad_value("path", str(path), f"cannot be written ({getattr(exc, 'strerror', None) or exc})") from None
    return path
