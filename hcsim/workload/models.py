"""Models described by size: what one training step computes and moves, layer by layer.

Two descriptions, both frozen dataclasses:

* :class:`Transformer`: a decoder-only transformer by its shape (layers, hidden, heads,
  sequence, vocabulary, MLP width, experts). Its FLOPs are the matrix-multiply counts of
  Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM", SC'21, s5.1): per layer and sequence of ``s`` tokens, forward
  ``24 s h^2 + 4 s^2 h`` for a ``4h`` MLP (``2 x`` multiply-accumulates of every weight per
  token, plus the attention scores and their weighted sum), logits ``2 s h V``; backward is
  twice the forward (the same paper; Kaplan et al. 2020, "Scaling Laws for Neural Language
  Models", s2.1: ``C ~ 6 N`` per token = 2 N forward + 4 N backward), and activation
  recomputation adds one more forward (``8 N``). Causal masking is not subtracted (as in
  both papers).
* :class:`LayerTable`: a list of :class:`Layer` rows (forward FLOPs and bytes per sample,
  parameter count), for any other network; :meth:`LayerTable.from_csv` reads one.

Presets (:data:`PRESETS`, :func:`preset`): the GPT-3 family (Brown et al. 2020, "Language
Models are Few-Shot Learners", Table 2.1), LLaMA-2 7B/13B/70B (Touvron et al. 2023,
"Llama 2", Table 1 and the released model configurations), and ResNet-50 (He et al. 2016,
"Deep Residual Learning for Image Recognition", Table 1; torchvision's v1.5 variant with
the stride on the 3x3 convolution), whose per-block table is computed from the architecture
here, not copied.

Examples
--------
>>> gpt = preset("gpt3-175b")
>>> round(gpt.params() / 1e9, 1)
174.6
>>> r50 = resnet50()
>>> r50.params()
25557032
"""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass

from ..dtypes import element_size, parse_dtype
from ..errors import ConfigError, bad_value, is_int, is_real, unknown_name

FLOAT_DTYPES = ("fp32", "fp16", "bf16")
"""Data types a model's weights, activations and gradients may have."""


def dtype_bytes(dtype: str, field_name: str = "dtype") -> int:
    """Bytes per element of ``dtype`` (``fp32``, ``fp16`` or ``bf16``, or an alias
    :func:`hcsim.dtypes.parse_dtype` knows), or a one-line error."""
    try:
        name = parse_dtype(dtype, field_name)
    except ConfigError:
        name = None
    if name not in FLOAT_DTYPES:
        raise bad_value(field_name, dtype, "one of " + ", ".join(FLOAT_DTYPES))
    return element_size(name)


def _count(field_name: str, value, low: int = 1) -> int:
    if not is_int(value) or value < low or value > 10**12:
        raise bad_value(field_name, value, f"a whole number from {low} to 10**12")
    return int(value)


def _amount(field_name: str, value) -> float:
    if not is_real(value) or not math.isfinite(value) \
            or not 0 <= value <= 1e30:
        raise bad_value(field_name, value, "a number from 0 to 1e30")
    return float(value)


@dataclass(frozen=True)
class Layer:
    """One row of a :class:`LayerTable`.

    Attributes
    ----------
    name : str
    forward_flops : float
        Floating-point operations of the forward pass for one sample (a multiply-accumulate
        is 2).
    forward_bytes : float
        Activation bytes the forward pass reads and writes for one sample (weights are
        counted separately, once per pass, from ``params``).
    params : int
        Trainable parameters (their gradients are what data parallelism reduces).
    """

    name: str
    forward_flops: float
    forward_bytes: float = 0.0
    params: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise bad_value("layer.name", self.name, "a non-empty name")
        object.__setattr__(self, "forward_flops", _amount(f"layer {self.name!r}: forward_flops", self.forward_flops))
        object.__setattr__(self, "forward_bytes", _amount(f"layer {self.name!r}: forward_bytes", self.forward_bytes))
        object.__setattr__(self, "params", _count(f"layer {self.name!r}: params", self.params, 0))


@dataclass(frozen=True)
class LayerTable:
    """A network as a list of layers in forward order.

    Attributes
    ----------
    name : str
    layers : tuple of Layer
    params_dtype : str
        Data type of weights and activations in compute (``fp32``, ``fp16``, ``bf16``...).
    source : str
        Where the numbers come from.
    """

    name: str
    layers: tuple
    params_dtype: str = "fp16"
    source: str = ""

    def __post_init__(self):
        layers = tuple(self.layers)
        if not layers or not all(isinstance(x, Layer) for x in layers):
            raise bad_value(f"model {self.name!r}: layers", self.layers, "a non-empty list of Layer rows")
        names = [x.name for x in layers]
        if len(set(names)) != len(names):
            raise bad_value(f"model {self.name!r}: layers", next(n for n in names if names.count(n) > 1),
                            "distinct layer names")
        object.__setattr__(self, "layers", layers)
        dtype_bytes(self.params_dtype, f"model {self.name!r}: params_dtype")
        object.__setattr__(self, "params_dtype", parse_dtype(self.params_dtype))

    def params(self) -> int:
        """Trainable parameters of the whole network."""
        return sum(x.params for x in self.layers)

    def forward_flops(self) -> float:
        """Forward FLOPs for one sample."""
        return sum(x.forward_flops for x in self.layers)

    def layer_table(self) -> LayerTable:
        return self

    @classmethod
    def from_csv(cls, path, *, name: str | None = None, params_dtype: str = "fp16") -> LayerTable:
        """Read a table with columns ``name, forward_flops, forward_bytes, params`` (one row
        per layer in forward order; ``forward_bytes`` may be left out)."""
        try:
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
        except OSError as e:
            raise bad_value("layer table", str(path), f"a readable CSV file ({e.strerror})") from None
        except (UnicodeDecodeError, csv.Error):
            raise bad_value("layer table", str(path), "a UTF-8 CSV file") from None
        need = {"name", "forward_flops", "params"}
        if not rows or not need <= set(rows[0]):
            raise bad_value(f"layer table {str(path)!r}: columns", sorted(rows[0]) if rows else [],
                            "name, forward_flops, params (and optionally forward_bytes), one row per layer")
        layers = []
        for i, row in enumerate(rows, start=2):
            where = f"layer table {str(path)!r} line {i}"
            try:
                flops = float(row["forward_flops"])
                nbytes = float(row.get("forward_bytes") or 0)
                params = int(row["params"])
            except (TypeError, ValueError):
                raise bad_value(where, row, "numbers in forward_flops, forward_bytes, params") from None
            try:
                layers.append(Layer(row["name"], flops, nbytes, params))
            except ConfigError as e:
                raise ConfigError(f"{where}: {e}") from None
        return cls(name or str(path), tuple(layers), params_dtype, f"read from {path}")


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer by its shape.

    Attributes
    ----------
    name : str
    layers, hidden, heads, seq_len, vocab : int
        Transformer layers, model width h, attention heads, sequence length s, vocabulary V.
    ffn_hidden : int
        MLP width (0: 4 h).
    kv_heads : int
        Key/value heads (grouped-query attention; 0: ``heads``).
    gated_mlp : bool
        SwiGLU-style MLP with three weight matrices (LLaMA) instead of two.
    bias : bool
        Linear layers have biases (GPT) or not (LLaMA).
    learned_positions : bool
        A learned ``s x h`` position embedding (GPT) or none (rotary, LLaMA).
    tied_embeddings : bool
        The output projection reuses the input embedding.
    experts, top_k : int
        Mixture of experts: every layer's MLP is ``experts`` experts with a router, each
        token going to ``top_k`` of them (experts = 0: dense).
    params_dtype : str
        Data type of weights and activations in compute.
    source : str
    """

    name: str
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn_hidden: int = 0
    kv_heads: int = 0
    gated_mlp: bool = False
    bias: bool = True
    learned_positions: bool = True
    tied_embeddings: bool = True
    experts: int = 0
    top_k: int = 1
    params_dtype: str = "bf16"
    source: str = ""

    def __post_init__(self):
        where = f"model {self.name!r}"
        # stored as Python ints: np.uint8(16) experts overflowed the MoE byte counts
        for f, low in (("layers", 1), ("hidden", 1), ("heads", 1), ("seq_len", 1), ("vocab", 1), ("ffn_hidden", 0),
                       ("kv_heads", 0), ("experts", 0), ("top_k", 1)):
            object.__setattr__(self, f, _count(f"{where}: {f}", getattr(self, f), low))
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise bad_value(f"{where}: kv_heads", self.kv_heads, f"a divisor of heads = {self.heads}")
        if self.experts and self.top_k > self.experts:
            raise bad_value(f"{where}: top_k", self.top_k, f"at most experts = {self.experts}")
        for f in ("gated_mlp", "bias", "learned_positions", "tied_embeddings"):
            if not isinstance(getattr(self, f), bool):
                raise bad_value(f"{where}: {f}", getattr(self, f), "true or false")
        dtype_bytes(self.params_dtype, f"{where}: params_dtype")
        object.__setattr__(self, "params_dtype", parse_dtype(self.params_dtype))

    # --- parameters -------------------------------------------------------------------------

    @property
    def head_dim(self) -> float:
        return self.hidden / self.heads

    def attention_params(self) -> int:
        """Q, K, V and output projections (plus biases), and the layer norm before them."""
        h = self.hidden
        kv = round(2 * h * self.kv_heads / self.heads)  # K and V widths together
        weights = 2 * h * h + h * kv
        biases = (2 * h + kv) if self.bias else 0
        return weights + biases + self._norm_params()

    def expert_params(self) -> int:
        """One MLP (one expert of a mixture)."""
        h, f = self.hidden, self.ffn_hidden
        mats = 3 if self.gated_mlp else 2
        biases = ((2 if self.gated_mlp else 1) * f + h) if self.bias else 0
        return mats * h * f + biases

    def mlp_params(self) -> int:
        """The MLP block: all experts and the router, or the dense MLP, and its layer norm."""
        if self.experts:
            return self.experts * self.expert_params() + self.hidden * self.experts + self._norm_params()
        return self.expert_params() + self._norm_params()

    def _norm_params(self) -> int:
        return (2 if self.bias else 1) * self.hidden  # LayerNorm has a bias, RMSNorm does not

    def layer_params(self) -> int:
        """Parameters of one transformer layer."""
        return self.attention_params() + self.mlp_params()

    def embedding_params(self) -> int:
        """Token (and learned position) embedding."""
        return self.vocab * self.hidden + (self.seq_len * self.hidden if self.learned_positions else 0)

    def head_params(self) -> int:
        """Final norm and, unless tied, the output projection."""
        return self._norm_params() + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def params(self) -> int:
        """All parameters (Kaplan et al.'s N is ``12 layers h^2`` of it, for a dense 4h MLP)."""
        return self.embedding_params() + self.layers * self.layer_params() + self.head_params()

    # --- FLOPs and bytes, forward, one micro-batch of ``batch`` sequences --------------------

    def attention_forward_flops(self, batch: int = 1) -> float:
        """Projections ``2 x weights x tokens`` plus scores and weighted sum ``4 b s^2 h``."""
        tokens = batch * self.seq_len
        h = self.hidden
        kv = 2 * h * self.kv_heads / self.heads
        return 2.0 * tokens * (2 * h * h + h * kv) + 4.0 * batch * self.seq_len ** 2 * h

    def mlp_forward_flops(self, batch: int = 1) -> float:
        """Each token through ``top_k`` experts (or the dense MLP), plus the router."""
        tokens = batch * self.seq_len
        mats = 3 if self.gated_mlp else 2
        per_token = 2.0 * mats * self.hidden * self.ffn_hidden
        if self.experts:
            return tokens * (self.top_k * per_token + 2.0 * self.hidden * self.experts)
        return tokens * per_token

    def layer_forward_flops(self, batch: int = 1) -> float:
        """One layer's forward: ``24 b s h^2 + 4 b s^2 h`` for a dense GPT layer."""
        return self.attention_forward_flops(batch) + self.mlp_forward_flops(batch)

    def logits_forward_flops(self, batch: int = 1) -> float:
        """The output projection: ``2 b s h V``."""
        return 2.0 * batch * self.seq_len * self.hidden * self.vocab

    def forward_flops(self, batch: int = 1) -> float:
        """The whole forward pass of ``batch`` sequences."""
        return self.layers * self.layer_forward_flops(batch) + self.logits_forward_flops(batch)

    def activation_elements(self, batch: int = 1) -> int:
        """``b s h``: a layer's output, what tensor parallelism reduces and pipeline
        stages send."""
        return batch * self.seq_len * self.hidden

    def layer_activation_bytes(self, batch: int = 1) -> float:
        """Activation bytes one layer stores in forward for its backward, 16-bit, without
        recomputation: ``s b h (34 + 5 a s / h)`` (Korthikanti et al. 2022, "Reducing
        Activation Recomputation in Large Transformer Models", eq. 1); used as the bytes
        a layer's forward writes (and its backward reads), for the roofline."""
        s, h = self.seq_len, self.hidden
        return s * batch * h * (34 + 5 * self.heads * s / h) * dtype_bytes(self.params_dtype) / 2

    def layer_table(self, batch: int = 1) -> LayerTable:
        """The model as embedding, ``layers`` transformer layers and the output head, for
        ``batch`` sequences per sample row (FLOPs and bytes per sample = per sequence when
        ``batch`` is 1)."""
        e = dtype_bytes(self.params_dtype)
        act = self.activation_elements(batch) * e
        rows = [Layer("embedding", 0.0, float(act), self.embedding_params())]
        rows += [Layer(f"layer{i}", self.layer_forward_flops(batch), self.layer_activation_bytes(batch),
                       self.layer_params()) for i in range(self.layers)]
        rows.append(Layer("head", self.logits_forward_flops(batch),
                          float(act + batch * self.seq_len * self.vocab * e), self.head_params()))
        return LayerTable(self.name, tuple(rows), self.params_dtype, self.source)


# --- presets ----------------------------------------------------------------------------------

GPT3_SOURCE = "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1 (n_ctx 2048, GPT-2 BPE vocabulary 50257)"
LLAMA2_SOURCE = "Touvron et al. 2023, Llama 2, Table 1 and the released configurations (vocab 32000, context 4096)"

_GPT3 = {  # name: (layers, d_model, heads) from Table 2.1
    "gpt3-125m": (12, 768, 12),
    "gpt3-350m": (24, 1024, 16),
    "gpt3-760m": (24, 1536, 16),
    "gpt3-1.3b": (24, 2048, 24),
    "gpt3-2.7b": (32, 2560, 32),
    "gpt3-6.7b": (32, 4096, 32),
    # the table prints d_model 5140 beside 40 heads of d_head 128 = 5120; 5120 is used (and is
    # what Megatron-LM's GPT-3 13B configurations take), so TP 8 divides it
    "gpt3-13b": (40, 5120, 40),
    "gpt3-175b": (96, 12288, 96),
}

_LLAMA2 = {  # name: (layers, hidden, heads, kv_heads, ffn_hidden)
    "llama2-7b": (32, 4096, 32, 32, 11008),
    "llama2-13b": (40, 5120, 40, 40, 13824),
    "llama2-70b": (80, 8192, 64, 8, 28672),
}


def gpt3(name: str) -> Transformer:
    """A GPT-3 size from Brown et al. 2020, Table 2.1 (``gpt3-125m`` ... ``gpt3-175b``)."""
    if name not in _GPT3:
        raise unknown_name("model", name, _GPT3)
    layers, hidden, heads = _GPT3[name]
    return Transformer(name, layers, hidden, heads, seq_len=2048, vocab=50257, source=GPT3_SOURCE)


def llama2(name: str) -> Transformer:
    """A LLaMA-2 size (``llama2-7b``, ``llama2-13b``, ``llama2-70b``)."""
    if name not in _LLAMA2:
        raise unknown_name("model", name, _LLAMA2)
    layers, hidden, heads, kv, ffn = _LLAMA2[name]
    return Transformer(name, layers, hidden, heads, seq_len=4096, vocab=32000, ffn_hidden=ffn, kv_heads=kv,
                       gated_mlp=True, bias=False, learned_positions=False, tied_embeddings=False,
                       source=LLAMA2_SOURCE)


RESNET50_SOURCE = ("He et al. 2016, Deep Residual Learning, Table 1 (50-layer column); torchvision resnet50 "
                   "(v1.5: stride on the 3x3 convolution); counts computed from the layer shapes")


def _conv(cin: int, cout: int, k: int, hw_out: int) -> tuple[int, int]:
    """(parameters, multiply-accumulates) of a bias-free k x k convolution."""
    params = k * k * cin * cout
    return params, params * hw_out * hw_out


def resnet50(dtype: str = "fp16", image: int = 224, classes: int = 1000) -> LayerTable:
    """ResNet-50 as 18 rows: the stem, the 16 bottleneck blocks, and the classifier.

    Per block: three convolutions (1x1, 3x3, 1x1 with 4x expansion), a 1x1 projection on
    each stage's first block, batch norm (2 parameters per channel) after each. FLOPs are
    2 x multiply-accumulates (the ~4.1 G "FLOPs" usually quoted for a 224 x 224 image, and
    torchvision's 4.09 GFLOPS, count multiply-accumulates: this table sums to 4.09 G MACs,
    8.2 GFLOP). ``forward_bytes`` counts each convolution's input and output activations once
    in ``dtype`` (an estimate: batch norm and ReLU are assumed fused).
    """
    e = dtype_bytes(dtype)
    rows = []
    side = (image + 2 * 3 - 7) // 2 + 1  # conv1: 7x7 stride 2 pad 3
    p, macs = _conv(3, 64, 7, side)
    p += 2 * 64
    nbytes = (3 * image * image + 64 * side * side) * e
    rows.append(Layer("conv1", 2.0 * macs, float(nbytes), p))
    side = (side + 2 - 3) // 2 + 1  # max pool 3x3 stride 2 pad 1
    cin = 64
    for stage, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512)), start=1):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 1) else 1
            out_side = side // stride
            cout = 4 * width
            # (in channels, out channels, kernel, input side, output side)
            convs = [(cin, width, 1, side, side), (width, width, 3, side, out_side),
                     (width, cout, 1, out_side, out_side)]
            if b == 0:
                convs.append((cin, cout, 1, side, out_side))
            p = macs = nbytes = 0
            for ci, co, k, s_in, s_out in convs:
                cp, cm = _conv(ci, co, k, s_out)
                p += cp + 2 * co
                macs += cm
                nbytes += (ci * s_in * s_in + co * s_out * s_out) * e
            rows.append(Layer(f"layer{stage}.{b}", 2.0 * macs, float(nbytes), p))
            cin, side = cout, out_side
    fc_params = cin * classes + classes
    rows.append(Layer("fc", 2.0 * cin * classes, float((cin * side * side + classes) * e), fc_params))
    return LayerTable("resnet50", tuple(rows), dtype, RESNET50_SOURCE)


PRESETS = {**{n: (lambda n=n: gpt3(n)) for n in _GPT3},
           **{n: (lambda n=n: llama2(n)) for n in _LLAMA2},
           "resnet50": resnet50}
"""Preset name -> function returning the model."""


def preset(name: str):
    """The preset model ``name`` (a key of :data:`PRESETS`)."""
    if not isinstance(name, str) or name not in PRESETS:
        raise unknown_name("model", name, PRESETS)
    return PRESETS[name]()


_TRANSFORMER_FIELDS = ("name", "layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "kv_heads", "gated_mlp",
                      "bias", "learned_positions", "tied_embeddings", "experts", "top_k", "params_dtype", "source")


def load_model(value):
    """A model from what a scenario or a caller gives: a :class:`Transformer` or
    :class:`LayerTable` (returned as it is), a preset name, or a mapping: ``{preset: name,
    <field>: value ...}`` (a preset with fields changed), Transformer fields, or ``{csv:
    path, params_dtype: ...}`` (a layer table).

    Examples
    --------
    >>> load_model({"preset": "gpt3-1.3b", "seq_len": 1024}).seq_len
    1024
    """
    if isinstance(value, (Transformer, LayerTable)):
        return value
    if isinstance(value, str):
        return preset(value)
    if not isinstance(value, dict):
        raise bad_value("model", value, "a preset name (" + ", ".join(PRESETS) + "), a mapping, or a model object")
    d = dict(value)
    if "csv" in d:
        extra = set(d) - {"csv", "name", "params_dtype"}
        if extra:
            raise bad_value("model", sorted(extra)[0], "a key of csv, name, params_dtype (a layer table)")
        return LayerTable.from_csv(d["csv"], name=d.get("name"), params_dtype=d.get("params_dtype", "fp16"))
    base = preset(d.pop("preset")) if "preset" in d else None
    if isinstance(base, LayerTable):
        if d:
            raise bad_value("model", sorted(d)[0], f"nothing besides preset for the layer table {base.name!r}")
        return base
    for k in d:
        if k not in _TRANSFORMER_FIELDS:
            raise bad_value("model", k, "a key of preset, csv, " + ", ".join(_TRANSFORMER_FIELDS))
    if base is not None:
        if "ffn_hidden" not in d and base.ffn_hidden == 4 * base.hidden:
            d["ffn_hidden"] = 0  # still 4 h of the new h
        if "kv_heads" not in d and base.kv_heads == base.heads:
            d["kv_heads"] = 0
        return dataclasses.replace(base, **d)
    d.setdefault("name", "transformer")
    missing = [k for k in ("layers", "hidden", "heads", "seq_len", "vocab") if k not in d]
    if missing:
        raise bad_value("model", missing[0], "given (a transformer needs layers, hidden, heads, seq_len, vocab)")
    return Transformer(**d)


__all__ = ["FLOAT_DTYPES", "PRESETS", "Layer", "LayerTable", "Transformer", "dtype_bytes", "gpt3", "llama2",
           "load_model", "preset", "resnet50"]
