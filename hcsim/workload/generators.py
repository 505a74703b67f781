"""Workload generators: one training step of a model as an operation graph.

Every generator is a pure function ``(model, layout, compute_time, **params) -> Workload``
(no SimPy, nothing runs). ``model`` is a :class:`~.models.Transformer`, a
:class:`~.models.LayerTable`, a preset name or a mapping (:func:`~.models.load_model`);
``layout`` a :class:`~.layout.Layout` or a mapping (``dp`` left out fills the topology's
NPUs); ``compute_time(flops, bytes_moved, dtype) -> seconds`` turns work into time (a
:class:`hcsim.compute.ComputeSpec` is accepted; None leaves FLOPs and bytes on each compute
operation for the run to price on the topology's NPU). Every other parameter is keyword-only
with a default and is checked, with a one-line error naming it.

Graphs stay compact: one compute operation covers every rank that does the same work (a
pipeline stage of every replica), one collective per communicator. Facts and sources:
docs/facts.md s9; the formulas are in :mod:`.models`.

* :func:`data_parallel`: forward, backward layer by layer in reverse, gradient buckets (as
  PyTorch DDP: 25 MiB, the first 1 MiB) each all-reduced on a ``comm`` stream as soon as its
  last layer's backward is done, then the optimizer.
* :func:`tensor_parallel`: Megatron-LM: per transformer layer 2 allreduces of ``b s h``
  elements forward and 2 backward, blocking on the compute stream, or with sequence
  parallelism an allgather and a reducescatter for each.
* :func:`pipeline`: GPipe or 1F1B over ``pp`` stages and ``m`` micro-batches; activations
  and their gradients (``b s h`` elements) move stage to stage by send/recv.
* :func:`expert_parallel`: a mixture of experts: per MoE layer a dispatch and a combine
  AlltoAllV (and both again in backward) on each expert group, from a token-routing matrix.
* :func:`training_step`: all of them together (TP x PP x DP x EP), the data-parallel
  gradient reduction at the end of the step.

:data:`GENERATORS` maps each name to its function (scenario files call them by name).

Examples
--------
>>> from hcsim.workload.layout import Layout
>>> w = data_parallel("resnet50", Layout(dp=8), lambda f, b, d: f / 1e14, batch=32)
>>> [op.collective for op in w.ops if op.kind == "collective"][:2]
['allreduce', 'allreduce']
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import math
from collections.abc import Callable

import numpy as np

from ..errors import ConfigError, HcsimError, WorkLimitError, bad_value, is_int, is_real
from ..limits import MAX_JOB_OPS
from .graph import (
    COMM_STREAM,
    COMPUTE_STREAM,
    Collective,
    Compute,
    RecordEvent,
    SendRecv,
    WaitEvent,
    Workload,
)
from .layout import Layout
from .models import Transformer, dtype_bytes, load_model

DDP_BUCKET_BYTES = 25 * 1024 * 1024
"""PyTorch DDP's ``bucket_cap_mb`` default, 25 MiB (torch/nn/parallel/distributed.py:
``bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)``)."""

DDP_FIRST_BUCKET_BYTES = 1024 * 1024
"""PyTorch DDP's first bucket, 1 MiB (c10d reducer.hpp ``kDefaultFirstBucketBytes``), so the
last layers' gradients start reducing early."""

OPTIMIZERS = {"none": (0, 0), "sgd": (2, 12), "adam": (12, 28)}
"""FLOPs and bytes per parameter of one optimizer step on fp32 master weights (estimates:
SGD reads weight and gradient and writes the weight, 3 x 4 bytes; Adam reads weight,
gradient and both moments and writes weight and moments, 7 x 4 bytes)."""

GRANULARITIES = ("auto", "layer", "stage")
"""``layer``: an operation per layer (and its TP/EP collectives per layer); ``stage``: one
compute per stage and micro-batch, each kind of collective fused into one call of the summed
size (far fewer operations; an estimate); ``auto``: ``layer`` while the graph stays under
:data:`AUTO_LAYER_OPS` operations."""

AUTO_LAYER_OPS = 100_000
"""``granularity="auto"`` builds per layer up to this many operations (about half a second)."""

SCHEDULES = ("1f1b", "gpipe")
ROUTINGS = ("uniform", "skewed", "file")


# --- argument checks -----------------------------------------------------------------------------

def _int(gen: str, name: str, value, low: int = 1, high: int = 1 << 40) -> int:
    if not is_int(value) or not low <= value <= high:
        raise bad_value(f"{gen}: {name}", value, f"a whole number from {low} to {high}")
    return int(value)


def _real(gen: str, name: str, value, low: float = 0.0, high: float = 1e6) -> float:
    if not is_real(value) or not math.isfinite(value) \
            or not low <= value <= high:
        raise bad_value(f"{gen}: {name}", value, f"a number from {low:g} to {high:g}")
    return float(value)


def _bool(gen: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise bad_value(f"{gen}: {name}", value, "true or false")
    return value


def _choice(gen: str, name: str, value, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise bad_value(f"{gen}: {name}", value, "one of " + ", ".join(allowed))
    return value


def _bytes(gen: str, name: str, value) -> int:
    if isinstance(value, str):
        from ..units import parse_size

        return parse_size(value, f"{gen}: {name}")
    return _int(gen, name, value, 1, 1 << 50)


def _dtype(gen: str, name: str, value) -> str:
    dtype_bytes(value, f"{gen}: {name}")
    from ..dtypes import parse_dtype

    return parse_dtype(value)


def _algorithm(gen: str, value):
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise bad_value(f"{gen}: algorithm", value, "a registered algorithm name, 'auto', or none")
    return value


def _model(gen: str, model, transformer: bool):
    try:
        m = load_model(model)
    except HcsimError as e:
        raise ConfigError(f"{gen}: {e}") from None
    if transformer and not isinstance(m, Transformer):
        raise bad_value(f"{gen}: model", getattr(m, "name", m), "a transformer (a GPT or LLaMA preset or a "
                        "transformer mapping), not a layer table")
    return m


def _layout(gen: str, layout, topology) -> Layout:
    world = None
    if topology is not None:
        world = getattr(topology, "num_npus", None)
        if not isinstance(world, int):
            raise bad_value(f"{gen}: topology", topology, "an hcsim Topology")
    if layout is None:
        if world is None:
            raise bad_value(f"{gen}: layout", layout, "a Layout or a mapping {tp, pp, dp, ep, order} "
                            "(or a topology, whose NPUs are then all data-parallel)")
        return Layout(dp=world)
    try:
        lay = Layout.from_dict(layout, None if isinstance(layout, Layout) or "dp" in layout else world)
    except HcsimError as e:
        raise ConfigError(f"{gen}: {e}") from None
    if world is not None and lay.world > world:
        raise bad_value(f"{gen}: layout", lay.describe(), f"at most the topology's {world} NPUs")
    return lay


class _Timer:
    """Turns (flops, bytes, dtype) into a Compute op's time fields."""

    def __init__(self, gen: str, compute_time):
        self.gen = gen
        if compute_time is not None and not callable(compute_time):
            compute_time = getattr(compute_time, "time_s", None)
            if not callable(compute_time):
                raise bad_value(f"{gen}: compute_time", compute_time,
                                "a function (flops, bytes_moved, dtype) -> seconds, a ComputeSpec, or none")
        self.fn: Callable | None = compute_time
        self._cache: dict = {}

    def fields(self, flops: float, nbytes: float, dtype: str) -> dict:
        key = (flops, nbytes, dtype)
        out = self._cache.get(key)
        if out is None:
            if self.fn is None:
                out = {"duration_s": None, "flops": float(flops), "bytes_moved": float(nbytes), "dtype": dtype}
            else:
                t = self.fn(float(flops), float(nbytes), dtype)
                if not is_real(t) or not math.isfinite(t) \
                        or not 0 <= t <= 1e9:
                    raise bad_value(f"{self.gen}: compute_time({flops:g}, {nbytes:g}, {dtype!r})", t,
                                    "seconds from 0 to 1e9")
                out = {"duration_s": float(t)}
            self._cache[key] = out
        return out


class _Graph:
    """A Workload built without re-checking rank lists it was given already checked (a
    1,024-rank list costs ~1 ms to check in ``Workload.compute``); names and ``after`` are
    still checked by ``Workload._add``."""

    def __init__(self, name: str, timer: _Timer):
        self.w = Workload(name=name)
        self.timer = timer
        self.max_ops = _MAX_OPS.get()

    def _add(self, op):
        """Add ``op``; refuse a workload past the job's operation bound while it is generated."""
        if len(self.w.ops) >= self.max_ops:
            raise WorkLimitError(f"max_ops = {self.max_ops}: workload {self.w.name!r} passed {self.max_ops:,} operations "
                                 "while being generated; use fewer (fewer micro-batches or layers, granularity='stage'),"
                                 " or raise max_ops (options.max_ops in a scenario)")
        return self.w._add(op)

    def compute(self, name, ranks: tuple, flops, nbytes, dtype, *, after=(), stream=COMPUTE_STREAM, scale=1.0):
        f = self.timer.fields(flops * scale, nbytes * scale, dtype)
        return self._add(Compute(name=name, stream=stream, after=after, ranks=ranks, **f))

    def collective(self, name, comm, collective, size, *, dtype, algorithm, stream, after=(), matrix=None):
        return self._add(Collective(name=name, stream=stream, after=after, comm=comm, collective=collective,
                                      size_bytes=int(size), algorithm=algorithm, dtype=dtype, send_matrix=matrix))

    def send(self, name, src, dst, size, *, stream, after=()):
        return self._add(SendRecv(name=name, stream=stream, after=after, src=src, dst=dst, size_bytes=int(size)))

    def record(self, name, ranks: tuple, event: str, stream: str):
        return self._add(RecordEvent(name=name, stream=stream, ranks=ranks, event=event))

    def wait(self, name, ranks: tuple, event: str, stream: str):
        return self._add(WaitEvent(name=name, stream=stream, ranks=ranks, event=event))


_MAX_OPS: contextvars.ContextVar[int] = contextvars.ContextVar("max_ops", default=MAX_JOB_OPS)


@contextlib.contextmanager
def op_limit(max_ops: int):
    """Generators called inside stop, in one line, past ``max_ops`` operations
    (:data:`hcsim.limits.MAX_JOB_OPS` outside; a scenario's ``options.max_ops`` inside its load)."""
    token = _MAX_OPS.set(max_ops)
    try:
        yield
    finally:
        _MAX_OPS.reset(token)


# --- gradient buckets ----------------------------------------------------------------------------

def gradient_buckets(grad_bytes, bucket_bytes: int = DDP_BUCKET_BYTES,
                     first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES) -> list:
    """Group gradients, given in the order backward produces them, into buckets.

    As PyTorch's ``compute_bucket_assignment_by_size``: tensors join the open bucket, which
    closes once it holds at least its cap (``first_bucket_bytes`` for the first,
    ``bucket_bytes`` after); a tensor is never split, so a bucket can exceed its cap. Here the
    unit is a layer. Returns lists of indices into ``grad_bytes``.

    Examples
    --------
    >>> gradient_buckets([4, 4, 4, 10, 1], bucket_bytes=8, first_bucket_bytes=4)
    [[0], [1, 2], [3], [4]]
    """
    from ..topology.spec import integer

    if isinstance(grad_bytes, (str, bytes)) or not isinstance(grad_bytes, (list, tuple, np.ndarray)):
        raise bad_value("grad_bytes", grad_bytes, "a list of each layer's gradient bytes")
    if len(grad_bytes) > MAX_JOB_OPS:
        raise bad_value("grad_bytes", f"{len(grad_bytes):,} layers", f"at most {MAX_JOB_OPS:,} (hcsim.limits.MAX_JOB_OPS)")
    grad_bytes = [integer(f"grad_bytes[{i}]", b, 0) for i, b in enumerate(grad_bytes)]
    bucket_bytes = integer("bucket_bytes", bucket_bytes, 1)
    first_bucket_bytes = integer("first_bucket_bytes", first_bucket_bytes, 1)
    buckets, cur, size = [], [], 0
    for i, b in enumerate(grad_bytes):
        cur.append(i)
        size += b
        if size >= (first_bucket_bytes if not buckets else bucket_bytes):
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)
    return buckets


# --- data parallel (any layer table) ----------------------------------------------------------

def data_parallel(model="resnet50", layout=None, compute_time=None, *, topology=None, name: str | None = None,
                  batch: int = 32, bucket_bytes=DDP_BUCKET_BYTES, first_bucket_bytes=DDP_FIRST_BUCKET_BYTES,
                  grad_dtype: str = "fp32", overlap: bool = True, optimizer: str = "sgd",
                  algorithm: str | None = "auto") -> Workload:
    """One data-parallel step (PyTorch DDP): forward, backward, bucketed gradient allreduce.

    Parameters
    ----------
    model : LayerTable, Transformer, str or dict
        A transformer is taken as its layer table (embedding, layers, head).
    layout : Layout or dict, optional
        ``tp = pp = 1`` and ``ep = 1``; default every NPU of ``topology`` data-parallel.
    compute_time : callable, ComputeSpec or None
    batch : int
        Samples (images, sequences) per rank.
    bucket_bytes, first_bucket_bytes : int or str
        DDP's bucket caps (``bucket_cap_mb``; the first bucket's).
    grad_dtype : str
        Data type of the gradients reduced (``fp32``, ``fp16``, ``bf16``).
    overlap : bool
        Each bucket's allreduce starts when its last layer's backward is done (DDP); False:
        all after the whole backward.
    optimizer : {"sgd", "adam", "none"}
        The step after every allreduce (:data:`OPTIMIZERS`).
    algorithm : str or None
        Allreduce algorithm (``auto``: HCCL's choice).

    Returns
    -------
    Workload
        Ops ``fwd.<layer>`` in order, ``bwd.<layer>`` in reverse on the compute stream,
        ``allreduce.b<i>`` on the ``comm`` stream (bucket 0 holds the last layers), and
        ``optimizer``.
    """
    gen = "data_parallel"
    model = _model(gen, model, transformer=False)
    table = model.layer_table() if isinstance(model, Transformer) else model
    lay = _layout(gen, layout, topology)
    if lay.tp != 1 or lay.pp != 1 or lay.ep != 1:
        raise bad_value(f"{gen}: layout", lay.describe(), "tp = pp = ep = 1 (training_step combines them)")
    batch = _int(gen, "batch", batch, 1, 1 << 24)
    cap = _bytes(gen, "bucket_bytes", bucket_bytes)
    first = _bytes(gen, "first_bucket_bytes", first_bucket_bytes)
    ge = dtype_bytes(grad_dtype, f"{gen}: grad_dtype")
    grad_dtype = _dtype(gen, "grad_dtype", grad_dtype)
    overlap = _bool(gen, "overlap", overlap)
    optimizer = _choice(gen, "optimizer", optimizer, tuple(OPTIMIZERS))
    algorithm = _algorithm(gen, algorithm)
    g = _Graph(name or f"{gen}-{table.name}", _Timer(gen, compute_time))
    ranks = tuple(range(lay.world))
    comm = g.w.communicator("dp", ranks) if lay.world > 1 else None
    dtype, e = table.params_dtype, dtype_bytes(table.params_dtype)
    for layer in table.layers:
        g.compute(f"fwd.{layer.name}", ranks, batch * layer.forward_flops,
                  batch * layer.forward_bytes + layer.params * e, dtype)
    back = list(reversed(table.layers))
    for layer in back:
        g.compute(f"bwd.{layer.name}", ranks, batch * layer.forward_flops,
                  batch * layer.forward_bytes + layer.params * e, dtype, scale=2.0)
    reduces = []
    if comm is not None:
        for i, bucket in enumerate(gradient_buckets([x.params * ge for x in back], cap, first)):
            size = sum(back[j].params for j in bucket) * ge
            if not size:
                continue
            last = f"bwd.{back[bucket[-1]].name}" if overlap else f"bwd.{back[-1].name}"
            g.collective(f"allreduce.b{i}", comm, "allreduce", size, dtype=grad_dtype, algorithm=algorithm,
                         stream=COMM_STREAM, after=(last,))
            reduces.append(f"allreduce.b{i}")
    flops, nbytes = OPTIMIZERS[optimizer]
    if optimizer != "none":
        g.compute("optimizer", ranks, flops * table.params(), nbytes * table.params(), "fp32", after=tuple(reduces))
    return g.w


# --- routing of tokens to experts --------------------------------------------------------------

def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    share = weights / weights.sum() * total
    out = np.floor(share).astype(np.int64)
    rest = total - int(out.sum())
    if rest:
        order = np.argsort(-(share - out), kind="stable")[:rest]
        out[order] += 1
    return out


MAX_TOKENS = 1 << 40
"""Most tokens :func:`routing_matrix` routes from one rank (a count, not a size: far past any batch)."""


def routing_matrix(ep: int, tokens: int, top_k: int = 1, experts: int | None = None, *, routing: str = "uniform",
                   skew: float = 1.0, routing_file=None, gen: str = "routing") -> np.ndarray:
    """Token-expert assignments from each rank of an expert group to each (``ep x ep``).

    Every rank routes ``tokens`` tokens to ``top_k`` experts each, so every row sums to
    ``tokens * top_k`` (for ``uniform`` and ``skewed``); experts ``e`` live on rank
    ``e // (experts / ep)``.

    * ``uniform``: every expert equally likely (rows split as evenly as whole tokens allow);
    * ``skewed``: expert ``e``'s share proportional to ``(e + 1) ** -skew`` (Zipf; 0 is
      uniform), the same from every rank, so the first ranks' experts are hot (the
      distinctness of a token's k experts is ignored); whole tokens by largest remainder;
    * ``file``: a CSV of ``ep`` rows of ``ep`` whole token counts (``#`` lines skipped).

    Examples
    --------
    >>> routing_matrix(2, 10, 2).tolist()
    [[10, 10], [10, 10]]
    >>> routing_matrix(2, 10, 1, 4, routing="skewed", skew=1.0).tolist()
    [[7, 3], [7, 3]]
    """
    from ..limits import MAX_NPUS
    from ..topology.spec import integer

    ep = integer(f"{gen}: ep", ep, 1, MAX_NPUS)
    tokens = integer(f"{gen}: tokens", tokens, 0, MAX_TOKENS)
    experts = ep if experts is None else integer(f"{gen}: experts", experts, 1, MAX_NPUS * 1024)
    top_k = integer(f"{gen}: top_k", top_k, 1, experts)
    if routing == "file":
        return _routing_file(routing_file, ep, gen)
    if routing_file is not None:
        raise bad_value(f"{gen}: routing_file", routing_file, "only with routing = 'file'")
    if experts % ep:
        raise bad_value(f"{gen}: experts", experts, f"a multiple of the expert-parallel degree ep = {ep}")
    if routing == "uniform":
        weights = np.ones(ep)
    else:
        per = experts // ep
        w = (np.arange(experts) + 1.0) ** -skew
        weights = w.reshape(ep, per).sum(axis=1)
    row = _largest_remainder(tokens * top_k, weights)
    return np.tile(row, (ep, 1))


def _routing_file(path, ep: int, gen: str) -> np.ndarray:
    if not isinstance(path, str) or not path:
        raise bad_value(f"{gen}: routing_file", path, "the path of a CSV of token counts (routing = 'file')")
    allowed = f"a CSV of {ep} rows of {ep} whole token counts >= 0 (row i: tokens rank i sends each rank)"
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if r and not r[0].lstrip().startswith("#")]
    except OSError as e:
        raise bad_value(f"{gen}: routing_file", path, f"a readable file ({e.strerror})") from None
    except (UnicodeDecodeError, csv.Error):
        raise bad_value(f"{gen}: routing_file", path, allowed) from None
    try:
        m = np.array([[int(x) for x in r] for r in rows], dtype=np.int64)
    except (ValueError, OverflowError):
        raise bad_value(f"{gen}: routing_file", path, allowed) from None
    if m.shape != (ep, ep) or (m < 0).any() or m.sum() == 0 or m.max() > 1 << 40:
        raise bad_value(f"{gen}: routing_file", path, allowed + ", not all zero")
    return m


# --- transformer steps (TP, PP, EP, DP) -------------------------------------------------------

class _Step:
    """Builds one transformer training step on a layout (see :func:`training_step`)."""

    def __init__(self, gen, model: Transformer, lay: Layout, timer: _Timer, *, name, micro_batches, micro_batch,
                 schedule, sequence_parallel, recompute, granularity, algorithm, routing, skew, routing_file,
                 grad_dtype, bucket_bytes, overlap_grad_reduce, optimizer, dp_reduce):
        self.gen, self.m, self.lay = gen, model, lay
        self.g = _Graph(name or f"{gen}-{model.name}", timer)
        self.mb, self.b = micro_batches, micro_batch
        self.schedule, self.sp, self.recompute = schedule, sequence_parallel, recompute
        self.algorithm, self.optimizer, self.dp_reduce = algorithm, optimizer, dp_reduce
        self.dtype, self.e = model.params_dtype, dtype_bytes(model.params_dtype)
        self.grad_dtype, self.ge = grad_dtype, dtype_bytes(grad_dtype)
        self.bucket_bytes, self.overlap = bucket_bytes, overlap_grad_reduce
        tp, pp = lay.tp, lay.pp
        if model.layers < pp:
            raise bad_value(f"{gen}: layout.pp", pp, f"at most the model's {model.layers} layers")
        if sequence_parallel and tp > 1 and model.seq_len % tp:
            raise bad_value(f"{gen}: sequence_parallel", True, f"a sequence length ({model.seq_len}) divisible by tp = {tp}")
        if tp > 1 and model.hidden % tp:
            raise bad_value(f"{gen}: layout.tp", tp, f"a divisor of the model's hidden size {model.hidden}")
        if lay.ep > 1 and not model.experts:
            raise bad_value(f"{gen}: layout.ep", lay.ep, "1 for a dense model (experts = 0)")
        if model.experts and model.experts % lay.ep:
            raise bad_value(f"{gen}: layout.ep", lay.ep, f"a divisor of the model's {model.experts} experts")
        # layers per stage: as even as possible, the first stages take the extra ones
        q, r = divmod(model.layers, pp)
        self.stage_layers = []
        start = 0
        for s in range(pp):
            n = q + (1 if s < r else 0)
            self.stage_layers.append(range(start, start + n))
            start += n
        w = self.g.w
        grid = lay.grid()  # (tp, pp, dp)
        self.stage_ranks = [tuple(sorted(int(x) for x in grid[:, s, :].ravel())) for s in range(pp)]
        self.pp_of = np.empty(lay.world, dtype=np.int64)
        for s in range(pp):
            self.pp_of[grid[:, s, :].ravel()] = s
        self.tp_comms = [[] for _ in range(pp)]
        if tp > 1:
            for grp in lay.tp_groups():
                s = int(self.pp_of[grp[0]])
                self.tp_comms[s].append(w.communicator(f"tp.{grp[0]}", grp))
        self.ep_comms = [[] for _ in range(pp)]
        self.ep_pos = [{} for _ in range(pp)]  # stage -> position in expert group -> ranks
        if lay.ep > 1:
            for grp in lay.ep_groups():
                s = int(self.pp_of[grp[0]])
                self.ep_comms[s].append(w.communicator(f"ep.{grp[0]}", grp))
                for j, r in enumerate(grp):
                    self.ep_pos[s].setdefault(j, []).append(r)
            self.ep_pos = [{j: tuple(sorted(v)) for j, v in d.items()} for d in self.ep_pos]
            tokens = self.b * model.seq_len // (tp if sequence_parallel else 1)
            self.routing = routing_matrix(lay.ep, tokens, model.top_k, model.experts, routing=routing, skew=skew,
                                          routing_file=routing_file, gen=gen)
        # pipeline peers: (src, dst) pairs per boundary, one per (tp, dp) replica
        self.pairs = [[(int(grid[t, s, d]), int(grid[t, s + 1, d])) for t in range(tp) for d in range(lay.dp)]
                      for s in range(pp - 1)]
        self.granularity = self._granularity(granularity)

    # sizes and works -------------------------------------------------------------------------

    def act_bytes(self) -> int:
        return self.m.activation_elements(self.b) * self.e

    def _attn(self):
        m, tp, b = self.m, self.lay.tp, self.b
        act = m.layer_activation_bytes(b) * (13 + 5 * m.heads * m.seq_len / m.hidden) / (34 + 5 * m.heads * m.seq_len / m.hidden)
        return m.attention_forward_flops(b) / tp, (m.attention_params() * self.e + act) / tp

    def _mlp(self):
        """Dense MLP work per rank (for MoE: the router only; experts are :meth:`_experts`)."""
        m, tp, b = self.m, self.lay.tp, self.b
        act = m.layer_activation_bytes(b) * 21 / (34 + 5 * m.heads * m.seq_len / m.hidden)
        if m.experts:
            if self.lay.ep > 1:
                return 2.0 * b * m.seq_len * m.hidden * m.experts / tp, act / tp
            return m.mlp_forward_flops(b) / tp, (m.mlp_params() * self.e + act) / tp
        return m.mlp_forward_flops(b) / tp, (m.mlp_params() * self.e + act) / tp

    def _experts(self, received_tokens: int):
        m, tp = self.m, self.lay.tp
        per_token = 2.0 * (3 if m.gated_mlp else 2) * m.hidden * m.ffn_hidden
        local = m.experts // self.lay.ep
        flops = received_tokens * per_token / tp
        nbytes = (local * m.expert_params() * self.e + received_tokens * 21 * m.hidden * self.e / 2) / tp
        return flops, nbytes

    def _embed_bytes(self, s: int) -> float:
        """The embedding lookup on the first stage: writes ``b s h`` per rank."""
        return self.act_bytes() / self.lay.tp if s == 0 else 0.0

    def _logits(self, s: int):
        """The output projection on the last stage (vocabulary-parallel under TP)."""
        if s != self.lay.pp - 1:
            return 0.0, 0.0
        m, tp = self.m, self.lay.tp
        return (m.logits_forward_flops(self.b) / tp,
                (m.vocab * m.hidden * self.e + self.b * m.seq_len * m.vocab * self.e) / tp)

    # granularity -----------------------------------------------------------------------------

    def _granularity(self, granularity: str) -> str:
        if granularity != "auto":
            return granularity
        lay, n_layers = self.lay, self.m.layers
        tp_groups = lay.world // lay.tp if lay.tp > 1 else 0
        ep_groups = lay.world // lay.ep if lay.ep > 1 else 0
        per_mb = n_layers * (6 + 8 * tp_groups / lay.pp * (2 if self.sp else 1) + 4 * ep_groups / lay.pp
                             + 4 * lay.ep)
        sends = 2 * sum(len(p) for p in self.pairs)
        return "layer" if self.mb * (per_mb + sends) <= AUTO_LAYER_OPS else "stage"

    # emitters --------------------------------------------------------------------------------

    def _a2a(self, s: int, tag: str, matrix_tokens: np.ndarray, count: int = 1):
        m = matrix_tokens * (self.m.hidden * self.e * count)
        rows = tuple(tuple(int(x) for x in row) for row in m.tolist())
        size = -(-int(m.sum()) // self.lay.ep)
        for comm in self.ep_comms[s]:
            self.g.collective(f"{tag}.{comm.name}", comm, "alltoallv", size, dtype=self.dtype,
                              algorithm=self.algorithm, stream=COMPUTE_STREAM, matrix=rows)

    def _experts_compute(self, s: int, tag: str, scale: float, count: int = 1):
        received = self.routing.sum(axis=0)
        for j, ranks in self.ep_pos[s].items():
            f, by = self._experts(int(received[j]))
            self.g.compute(f"{tag}.experts.e{j}", ranks, f * count, by * count, self.dtype, scale=scale)

    def forward(self, s: int, i: int):
        """Forward of micro-batch ``i`` on stage ``s``."""
        ranks, layers = self.stage_ranks[s], self.stage_layers[s]
        af, ab = self._attn()
        mf, mb = self._mlp()
        lf, lb = self._logits(s)
        eb = self._embed_bytes(s)
        blocks = [(f"f.s{s}.m{i}", len(layers), True, True)] if self.granularity == "stage" else \
            [(f"f.s{s}.m{i}.l{layer}", 1, k == 0, k == len(layers) - 1) for k, layer in enumerate(layers)]
        for tag, n, first, last in blocks:
            self.g.compute(f"{tag}.attn", ranks, n * af, n * ab + (eb if first else 0), self.dtype)
            self._tp_point(s, f"{tag}.attn", n, "fwd")
            self.g.compute(f"{tag}.mlp", ranks, n * mf + (lf if last else 0), n * mb + (lb if last else 0),
                           self.dtype)
            if self.lay.ep > 1:
                self._a2a(s, f"{tag}.dispatch", self.routing, n)
                self._experts_compute(s, tag, 1.0, n)
                self._a2a(s, f"{tag}.combine", self.routing.T, n)
            self._tp_point(s, f"{tag}.mlp", n, "fwd")

    def backward(self, s: int, i: int, layer_done: dict | None = None):
        """Backward of micro-batch ``i`` on stage ``s`` (layers in reverse); records in
        ``layer_done`` the name of each layer's last operation."""
        ranks, layers = self.stage_ranks[s], self.stage_layers[s]
        scale = 3.0 if self.recompute else 2.0
        af, ab = self._attn()
        mf, mb = self._mlp()
        lf, lb = self._logits(s)
        eb = self._embed_bytes(s)
        blocks = [(f"b.s{s}.m{i}", len(layers), True, True, tuple(layers))] if self.granularity == "stage" else \
            [(f"b.s{s}.m{i}.l{layer}", 1, k == 0, k == len(layers) - 1, (layer,))
             for k, layer in reversed(list(enumerate(layers)))]
        for tag, n, first, last, covered in blocks:
            self.g.compute(f"{tag}.mlp", ranks, n * mf + (lf if last else 0), n * mb + (lb if last else 0),
                           self.dtype, scale=scale)
            if self.lay.ep > 1:
                self._a2a(s, f"{tag}.combine", self.routing, n)
                self._experts_compute(s, tag, scale, n)
                self._a2a(s, f"{tag}.dispatch", self.routing.T, n)
            self._tp_point(s, f"{tag}.mlp", n, "bwd")
            self.g.compute(f"{tag}.attn", ranks, n * af, n * ab + (eb if first else 0), self.dtype, scale=scale)
            self._tp_point(s, f"{tag}.attn", n, "bwd")
            if layer_done is not None:
                for layer in covered:
                    layer_done[layer] = self.g.w.ops[-1].name

    def _tp_point(self, s: int, tag: str, count: int, direction: str):
        """Megatron's f/g operators around a block: forward ends the block with an
        allreduce (SP: reducescatter; the block's input allgather comes before it, here
        right after the previous block); backward mirrors it."""
        if self.lay.tp == 1:
            return
        size = self.act_bytes() * count
        kinds = ("reducescatter", "allgather") if self.sp else ("allreduce",)
        if self.sp and direction == "bwd":
            kinds = ("reducescatter", "allgather")  # grads of the allgather, then of the reducescatter
        for comm in self.tp_comms[s]:
            for kind in kinds:
                self.g.collective(f"{tag}.{kind}.{comm.name}", comm, kind, size, dtype=self.dtype,
                                  algorithm=self.algorithm, stream=COMPUTE_STREAM)

    # pipeline ----------------------------------------------------------------------------------

    def order(self, s: int) -> list:
        """Stage ``s``'s sequence of ("F", i) / ("B", i)."""
        m, p = self.mb, self.lay.pp
        if self.schedule == "gpipe":
            return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
        warm = min(p - s - 1, m)
        seq = [("F", i) for i in range(warm)]
        for j in range(m - warm):
            seq += [("F", warm + j), ("B", j)]
        seq += [("B", i) for i in range(m - warm, m)]
        return seq

    def _p2p(self, s: int, i: int, direction: str):
        """Send micro-batch ``i``'s activations (``F``) from stage s to s + 1, or its
        gradients (``B``) from s to s - 1, each replica's pair on the boundary's own stream
        (both ends), gated by events on both sides."""
        g = self.g
        fwd = direction == "F"
        boundary = s if fwd else s - 1
        stream = f"pp{boundary}.{'fwd' if fwd else 'bwd'}"
        dst_stage = s + 1 if fwd else s - 1
        tag = f"{'act' if fwd else 'grad'}.s{s}.m{i}"
        g.record(f"{tag}.done", self.stage_ranks[s], f"{tag}.done", COMPUTE_STREAM)
        g.wait(f"{tag}.ready", self.stage_ranks[s], f"{tag}.done", stream)
        size = self.act_bytes() // (self.lay.tp if self.sp else 1)
        for a, b in self.pairs[boundary]:
            src, dst = (a, b) if fwd else (b, a)
            g.send(f"{tag}.{src}-{dst}", src, dst, size, stream=stream)
        g.record(f"{tag}.recv", self.stage_ranks[dst_stage], f"{tag}.recv", stream)

    def build(self):
        p = self.lay.pp
        seqs = [self.order(s) for s in range(p)]
        pos = [0] * p
        done = set()
        layer_done = [dict() for _ in range(p)]
        remaining = sum(len(x) for x in seqs)
        while remaining:
            progressed = False
            for s in range(p):
                while pos[s] < len(seqs[s]):
                    kind, i = seqs[s][pos[s]]
                    if kind == "F":
                        ready = s == 0 or ("F", s - 1, i) in done
                    else:
                        ready = s == p - 1 or ("B", s + 1, i) in done
                    if not ready:
                        break
                    if kind == "F":
                        if s > 0:
                            self.g.wait(f"act.s{s - 1}.m{i}.wait", self.stage_ranks[s], f"act.s{s - 1}.m{i}.recv",
                                        COMPUTE_STREAM)
                        self.forward(s, i)
                        if s < p - 1:
                            self._p2p(s, i, "F")
                    else:
                        if s < p - 1:
                            self.g.wait(f"grad.s{s + 1}.m{i}.wait", self.stage_ranks[s],
                                        f"grad.s{s + 1}.m{i}.recv", COMPUTE_STREAM)
                        self.backward(s, i, layer_done[s] if i == self.mb - 1 else None)
                        if s > 0:
                            self._p2p(s, i, "B")
                    done.add((kind, s, i))
                    pos[s] += 1
                    remaining -= 1
                    progressed = True
            if not progressed:  # pragma: no cover - a valid schedule always progresses
                raise HcsimError(f"{self.gen}: internal error: pipeline schedule stuck at {pos}")
        reduces = self._grad_reduce(layer_done) if self.dp_reduce else [[] for _ in range(p)]
        if self.optimizer != "none":
            flops, nbytes = OPTIMIZERS[self.optimizer]
            for s in range(p):
                params = self._stage_params(s)
                self.g.compute(f"optimizer.s{s}", self.stage_ranks[s], flops * params, nbytes * params, "fp32",
                               after=tuple(reduces[s]))
        return self.g.w

    # data-parallel gradients -------------------------------------------------------------------

    def _stage_params(self, s: int) -> float:
        """Parameters one rank of stage ``s`` holds (TP shards them, EP splits the experts)."""
        m, lay = self.m, self.lay
        dense = m.attention_params() + (m.mlp_params() - (m.experts * m.expert_params() if m.experts else 0))
        experts = m.experts * m.expert_params() / lay.ep if m.experts else 0
        n = len(self.stage_layers[s]) * (dense + experts)
        if s == 0:
            n += m.embedding_params()
        if s == lay.pp - 1:
            n += m.head_params()
        return n / lay.tp

    def _grad_reduce(self, layer_done: list) -> list:
        """Bucketed allreduce of each stage's gradients over its DP groups (experts' over
        their expert-DP groups), after the last micro-batch's backward."""
        lay, m = self.lay, self.m
        names = [[] for _ in range(lay.pp)]
        dense_layer = (m.attention_params() + m.mlp_params()
                       - (m.experts * m.expert_params() if m.experts else 0)) / lay.tp
        expert_layer = (m.experts * m.expert_params() / lay.ep / lay.tp) if m.experts else 0
        groups = [("dp", lay.dp_groups(), dense_layer, lay.dp)]
        if expert_layer:
            if lay.ep > 1:
                groups.append(("edp", lay.expert_dp_groups(), expert_layer, lay.dp // lay.ep))
            else:
                groups[0] = ("dp", groups[0][1], dense_layer + expert_layer, lay.dp)
        for kind, grps, per_layer, size in groups:
            if size < 2:
                continue
            for s in range(lay.pp):
                layers = list(reversed(self.stage_layers[s]))
                sizes = [int(round(per_layer)) * self.ge for _ in layers]
                if s == lay.pp - 1:
                    sizes[0] += int(m.head_params() / lay.tp) * self.ge if kind == "dp" else 0
                if s == 0:
                    sizes[-1] += int(m.embedding_params() / lay.tp) * self.ge if kind == "dp" else 0
                last_all = layer_done[s][self.stage_layers[s][0]]
                stage_groups = [gr for gr in grps if self.pp_of[gr[0]] == s]
                for k, bucket in enumerate(gradient_buckets(sizes, self.bucket_bytes, self.bucket_bytes)):
                    nbytes = sum(sizes[j] for j in bucket)
                    nbytes -= nbytes % self.ge
                    if not nbytes:
                        continue
                    after = layer_done[s][layers[bucket[-1]]] if self.overlap else last_all
                    for gr in stage_groups:
                        comm = self.g.w.communicator(f"{kind}.{gr[0]}", gr)
                        name = f"grad.{kind}.s{s}.b{k}.{comm.name}"
                        self.g.collective(name, comm, "allreduce", nbytes, dtype=self.grad_dtype,
                                          algorithm=self.algorithm, stream=COMM_STREAM, after=(after,))
                        names[s].append(name)
        return names


def _transformer_step(gen: str, model, layout, compute_time, topology, name, *, micro_batches, micro_batch,
                      schedule, sequence_parallel, recompute, granularity, algorithm, routing, skew, routing_file,
                      grad_dtype, bucket_bytes, overlap_grad_reduce, optimizer, dp_reduce, check=None) -> Workload:
    model = _model(gen, model, transformer=True)
    lay = _layout(gen, layout, topology)
    if check is not None:
        check(model, lay)
    step = _Step(gen, model, lay, _Timer(gen, compute_time), name=name,
                 micro_batches=_int(gen, "micro_batches", micro_batches, 1, 1 << 16),
                 micro_batch=_int(gen, "micro_batch", micro_batch, 1, 1 << 20),
                 schedule=_choice(gen, "schedule", schedule, SCHEDULES),
                 sequence_parallel=_bool(gen, "sequence_parallel", sequence_parallel),
                 recompute=_bool(gen, "recompute", recompute),
                 granularity=_choice(gen, "granularity", granularity, GRANULARITIES),
                 algorithm=_algorithm(gen, algorithm),
                 routing=_choice(gen, "routing", routing, ROUTINGS), skew=_real(gen, "skew", skew, 0.0, 100.0),
                 routing_file=routing_file, grad_dtype=_dtype(gen, "grad_dtype", grad_dtype),
                 bucket_bytes=_bytes(gen, "bucket_bytes", bucket_bytes),
                 overlap_grad_reduce=_bool(gen, "overlap_grad_reduce", overlap_grad_reduce),
                 optimizer=_choice(gen, "optimizer", optimizer, tuple(OPTIMIZERS)), dp_reduce=dp_reduce)
    return step.build()


_COMMON_DOC = """
    Parameters
    ----------
    model : Transformer, str or dict
        A transformer (a GPT-3 or LLaMA-2 preset name, a mapping, or the object).
    layout : Layout or dict
    compute_time : callable, ComputeSpec or None
        ``(flops, bytes_moved, dtype) -> seconds``; None: the run prices each compute
        operation on the topology's NPU.
    topology : Topology, optional
        Only its NPU count is used (``dp`` of a layout mapping that leaves it out).
    name : str, optional
    micro_batch : int
        Sequences per micro-batch, ``b`` (activations ``b s h`` elements).
    sequence_parallel : bool
        Megatron-LM's sequence parallelism: each TP allreduce becomes an allgather and a
        reducescatter of the same total (Korthikanti et al. 2022); pipeline messages are
        1/tp of ``b s h``.
    recompute : bool
        Full activation recomputation: backward is 3 x forward instead of 2 x.
    granularity : {"auto", "layer", "stage"}
        :data:`GRANULARITIES`.
    algorithm : str or None
        Algorithm of every collective (``auto``: HCCL's choice for its group).
"""


def tensor_parallel(model="gpt3-1.3b", layout=None, compute_time=None, *, topology=None, name: str | None = None,
                    micro_batch: int = 1, sequence_parallel: bool = False, recompute: bool = False,
                    granularity: str = "layer", algorithm: str | None = "auto") -> Workload:
    """Forward and backward of one micro-batch under Megatron-LM tensor parallelism.

    Per layer, forward: attention compute, allreduce of ``b s h`` elements, MLP compute,
    allreduce; backward mirrors it (MLP, allreduce, attention, allreduce). Collectives run on
    the compute stream (they block it, as in Megatron). Replicas (``dp > 1``) run side by
    side without a gradient reduction (:func:`training_step` adds it). Needs ``pp = 1`` and
    ``ep = 1``.
    """
    def check(model, lay):
        if lay.pp != 1 or lay.ep != 1:
            raise bad_value("tensor_parallel: layout", lay.describe(), "pp = 1 and ep = 1 (training_step combines them)")

    return _transformer_step("tensor_parallel", model, layout, compute_time, topology, name, micro_batches=1,
                             micro_batch=micro_batch, schedule="1f1b", sequence_parallel=sequence_parallel,
                             recompute=recompute, granularity=granularity, algorithm=algorithm, routing="uniform",
                             skew=1.0, routing_file=None, grad_dtype="fp32", bucket_bytes=DDP_BUCKET_BYTES,
                             overlap_grad_reduce=False, optimizer="none", dp_reduce=False, check=check)


def pipeline(model="gpt3-1.3b", layout=None, compute_time=None, *, topology=None, name: str | None = None,
             micro_batches: int = 8, micro_batch: int = 1, schedule: str = "1f1b", recompute: bool = False,
             granularity: str = "auto", algorithm: str | None = "auto") -> Workload:
    """A pipeline-parallel step: ``micro_batches`` micro-batches through ``pp`` stages.

    ``schedule``: ``gpipe`` (all forwards, then all backwards) or ``1f1b`` (PipeDream-Flush,
    Narayanan et al. 2021: stage s runs ``min(p - s - 1, m)`` warm-up forwards, then one
    forward and one backward in turn, then the remaining backwards). Layers are split as
    evenly as possible, the first stages taking the extra ones; the embedding is on the
    first stage and the logits on the last. Each replica's activations (``b s h``
    elements) go from stage s to s + 1 by send/recv on the boundary's own stream
    (``pp<s>.fwd``; gradients back on ``pp<s>.bwd``) as soon as computed; the receiving
    stage's compute waits for them (events). Needs ``tp = 1`` and ``ep = 1``.
    """
    def check(model, lay):
        if lay.tp != 1 or lay.ep != 1:
            raise bad_value("pipeline: layout", lay.describe(), "tp = 1 and ep = 1 (training_step combines them)")

    return _transformer_step("pipeline", model, layout, compute_time, topology, name, micro_batches=micro_batches,
                             micro_batch=micro_batch, schedule=schedule, sequence_parallel=False,
                             recompute=recompute, granularity=granularity, algorithm=algorithm, routing="uniform",
                             skew=1.0, routing_file=None, grad_dtype="fp32", bucket_bytes=DDP_BUCKET_BYTES,
                             overlap_grad_reduce=False, optimizer="none", dp_reduce=False, check=check)


def expert_parallel(model=None, layout=None, compute_time=None, *, topology=None, name: str | None = None,
                    micro_batch: int = 1, routing: str = "uniform", skew: float = 1.0, routing_file=None,
                    recompute: bool = False, granularity: str = "layer", algorithm: str | None = "auto") -> Workload:
    """Forward and backward of one micro-batch of a mixture-of-experts transformer under
    expert parallelism.

    Per MoE layer, forward: attention and router compute, dispatch (AlltoAllV: each token's
    hidden vector to the ranks of its ``top_k`` experts), expert compute (per rank, for the
    tokens it received), combine (AlltoAllV back); backward: the combine's gradient
    (dispatch pattern), expert backward, the dispatch's gradient. ``send_matrix[i][j]`` =
    tokens rank i routes to rank j x hidden x element size (:func:`routing_matrix`:
    ``uniform``, ``skewed`` with ``skew``, or ``file`` with ``routing_file``). Needs a model
    with experts (default: GPT-3 1.3B with 8 experts, top-2) and ``tp = pp = 1``, ``ep >
    1`` dividing ``dp``.
    """
    if model is None:
        model = {"preset": "gpt3-1.3b", "experts": 8, "top_k": 2}

    def check(model, lay):
        if not model.experts:
            raise bad_value("expert_parallel: model", model.name, "a mixture of experts (experts > 0)")
        if lay.tp != 1 or lay.pp != 1 or lay.ep < 2:
            raise bad_value("expert_parallel: layout", lay.describe(), "tp = pp = 1 and ep >= 2")

    return _transformer_step("expert_parallel", model, layout, compute_time, topology, name, micro_batches=1,
                             micro_batch=micro_batch, schedule="1f1b", sequence_parallel=False,
                             recompute=recompute, granularity=granularity, algorithm=algorithm, routing=routing,
                             skew=skew, routing_file=routing_file, grad_dtype="fp32", bucket_bytes=DDP_BUCKET_BYTES,
                             overlap_grad_reduce=False, optimizer="none", dp_reduce=False, check=check)


def training_step(model="gpt3-1.3b", layout=None, compute_time=None, *, topology=None, name: str | None = None,
                  micro_batches: int = 8, micro_batch: int = 1, schedule: str = "1f1b",
                  sequence_parallel: bool = False, recompute: bool = False, granularity: str = "auto",
                  algorithm: str | None = "auto", routing: str = "uniform", skew: float = 1.0, routing_file=None,
                  grad_dtype: str = "fp32", bucket_bytes=DDP_BUCKET_BYTES, overlap_grad_reduce: bool = False,
                  optimizer: str = "adam") -> Workload:
    """One Megatron-LM-style training step: TP x PP x DP (x EP) of a transformer.

    The pipeline schedule of :func:`pipeline` over every replica, each layer's TP
    collectives (:func:`tensor_parallel`) and MoE AlltoAllVs (:func:`expert_parallel`)
    inside it; after the last micro-batch, each stage's gradients (``params / tp`` per rank,
    in ``grad_dtype``) are all-reduced over its data-parallel groups in buckets of
    ``bucket_bytes`` on the ``comm`` stream (experts' gradients over the expert-DP groups),
    each bucket once its layers' last backward is done with ``overlap_grad_reduce`` (else all
    after the stage's backward: Megatron-LM's default), then the optimizer.
    """
    return _transformer_step("training_step", model, layout, compute_time, topology, name,
                             micro_batches=micro_batches, micro_batch=micro_batch, schedule=schedule,
                             sequence_parallel=sequence_parallel, recompute=recompute, granularity=granularity,
                             algorithm=algorithm, routing=routing, skew=skew, routing_file=routing_file,
                             grad_dtype=grad_dtype, bucket_bytes=bucket_bytes,
                             overlap_grad_reduce=overlap_grad_reduce, optimizer=optimizer, dp_reduce=True)


for _f in (tensor_parallel, pipeline, expert_parallel, training_step):
    _f.__doc__ += _COMMON_DOC

GENERATORS = {
    "data_parallel": data_parallel,
    "tensor_parallel": tensor_parallel,
    "pipeline": pipeline,
    "expert_parallel": expert_parallel,
    "training_step": training_step,
}
"""Generator name -> function (every parameter after the first three keyword-only)."""

__all__ = ["DDP_BUCKET_BYTES", "DDP_FIRST_BUCKET_BYTES", "GENERATORS", "GRANULARITIES", "OPTIMIZERS",
           "data_parallel", "expert_parallel", "gradient_buckets", "pipeline", "routing_matrix", "tensor_parallel",
           "training_step"]
