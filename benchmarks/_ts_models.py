"""TorchScript-style decoder graphs, as ``torch.onnx.export(dynamo=False)`` writes them.

:func:`ts_decoder` builds a Llama-like decoder (RMSNorm, rotary embeddings computed in every
layer from ``position_ids`` as in transformers 4.38-4.44, grouped-query attention through
``scaled_dot_product_attention``, SiLU MLP; the projections as GPT-2's ``Conv1D`` by default)
the way the TorchScript exporter lowers that Python code: every ``x.size(i)`` is its own
``Shape -> Gather(scalar index)``, every ``view(bsz, q_len, ...)`` builds its target with
``Unsqueeze -> Concat``, every literal is a ``Constant`` node (one per use), ``x[:, None]``
is a ``Slice(0, INT64_MAX)`` per ``:`` then ``Unsqueeze``, ``expand`` adds the
``Where(Equal(size, -1), 1, size)`` guard, masks come from ``ConstantOfShape`` and ``Range``
of computed lengths, ``x[..., :n]`` is a ``Slice`` with a computed end, ``x // 2`` on a size
is ``Div -> Cast``, ``.to(torch.float32)`` of a float tensor is a ``Cast`` to the same type
and the attention scale is computed from ``Shape(q)``. The graphs run in onnxruntime
(``python benchmarks/_ts_models.py [layers]`` checks both variants on four sizes).

Inputs: ``input_ids[batch, seq_len]`` and ``attention_mask[batch, total_seq_len]``; with
``kv_cache=True`` also ``position_ids[batch, seq_len]`` and
``past_key_values.{i}.key/value[batch, kv_heads, past_seq_len, head_dim]``, with outputs
``present.{i}.key/value[batch, kv_heads, total_seq_len, head_dim]``
(``total_seq_len = past_seq_len + seq_len``). Without the cache the positions are computed
with ``Range`` (as the model does when none are given) and the mask is
``attention_mask[batch, seq_len]``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_INT64_MAX = 9223372036854775807
_FLOAT_MIN = float(np.finfo(np.float32).min)


class _Builder:
    """Appends nodes with fresh output names; literals become ``Constant`` nodes."""

    def __init__(self, conv1d: bool) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.conv1d = conv1d
        self._count = 0

    def op(self, op_type: str, *inputs: str, n_out: int = 1, **attrs) -> str | list[str]:
        self._count += 1
        outs = [f"/{op_type}_{self._count}_output_{k}" for k in range(n_out)]
        self.nodes.append(
            helper.make_node(
                op_type, list(inputs), outs, name=f"/{op_type}_{self._count}", **attrs
            )
        )
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=np.int64) -> str:
        """A ``Constant`` node (TorchScript writes one per use)."""
        array = np.array(value, dtype=dtype)
        return self.op("Constant", value=numpy_helper.from_array(array, ""))

    def weight(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def rename(self, old: str, new: str) -> None:
        """Gives the value ``old`` the name ``new`` (graph outputs carry the model's names)."""
        for node in self.nodes:
            for names in (node.input, node.output):
                for k, name in enumerate(names):
                    if name == old:
                        names[k] = new

    def linear(self, x: str, name: str, weight: np.ndarray, bias: np.ndarray) -> str:
        """A projection: ``nn.Linear`` (``MatMul``) or, with ``conv1d``, GPT-2's ``Conv1D``::

        size_out = x.size()[:-1] + (nf,)
        x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
        return x.view(size_out)
        """
        w = self.weight(name + ".weight", weight)
        if not self.conv1d:
            return self.op("MatMul", x, w)
        prefix = self.op(
            "Slice",
            self.op("Shape", x),
            self.const([0]),
            self.const([-1]),
            self.const([0]),
            self.const([1]),
        )
        size_out = self.op("Concat", prefix, self.const([weight.shape[1]]), axis=0)
        flat = self.view(x, -1, self.size(x, -1))
        out = self.op("Gemm", flat, w, self.weight(name + ".bias", bias))
        return self.op("Reshape", out, size_out)

    # --- the idioms of torch.onnx's TorchScript symbolics -------------------------------
    def size(self, x: str, dim: int) -> str:
        """``x.size(dim)``: a 0-d int64."""
        return self.op("Gather", self.op("Shape", x), self.const(dim), axis=0)

    def unsq(self, x: str, axis: int) -> str:
        return self.op("Unsqueeze", x, self.const([axis]))

    def shape_list(self, *items) -> str:
        """A 1-d int64 from sizes (0-d tensors) and Python ints, as ``view(a, b, 4)`` does."""
        parts = [self.const([i]) if isinstance(i, int) else self.unsq(i, 0) for i in items]
        return self.op("Concat", *parts, axis=0)

    def view(self, x: str, *items) -> str:
        return self.op("Reshape", x, self.shape_list(*items))

    def expand(self, x: str, *items) -> str:
        """``x.expand(...)``: ``-1`` entries are guarded by ``Where(Equal(size, -1), 1, size)``."""
        size = self.op("Reshape", self.shape_list(*items), self.const([-1]))
        ones = self.op(
            "ConstantOfShape",
            self.op("Shape", size),
            value=numpy_helper.from_array(np.array([1], np.int64), ""),
        )
        neg_ones = self.op("Mul", ones, self.const(-1))
        guarded = self.op("Where", self.op("Equal", size, neg_ones), ones, size)
        return self.op("Expand", x, guarded)

    def slice(self, x: str, axis: int, start, end) -> str:
        """``x[..., start:end]`` on ``axis``; a 0-d size as ``end`` is unsqueezed first."""
        s = self.const([start]) if isinstance(start, int) else self.unsq(start, 0)
        e = self.const([end]) if isinstance(end, int) else self.unsq(end, 0)
        return self.op("Slice", x, s, e, self.const([axis]), self.const([1]))

    def floordiv(self, size: str, k: int) -> str:
        """``size // k`` on a traced size: ``Div`` then a ``Cast`` back to int64."""
        return self.op("Cast", self.op("Div", size, self.const(k)), to=TensorProto.INT64)

    def to_float(self, x: str) -> str:
        return self.op("Cast", x, to=TensorProto.FLOAT)


def _rms_norm(b: _Builder, x: str, weight: str, eps: float) -> str:
    x = b.to_float(x)  # hidden_states.to(torch.float32): already float
    var = b.op("ReduceMean", b.op("Pow", x, b.const(2.0, np.float32)), axes=[-1], keepdims=1)
    rsqrt = b.op(
        "Div",
        b.const(1.0, np.float32),
        b.op("Sqrt", b.op("Add", var, b.const(eps, np.float32))),
    )
    return b.op("Mul", weight, b.to_float(b.op("Mul", x, rsqrt)))


def _rotate_half(b: _Builder, x: str) -> str:
    half = b.floordiv(b.size(x, 3), 2)
    x1 = b.slice(x, 3, 0, half)
    x2 = b.slice(x, 3, half, _INT64_MAX)
    return b.op("Concat", b.op("Neg", x2), x1, axis=-1)


def _full_slices(b: _Builder, x: str, axes) -> str:
    """The ``:`` entries of ``x[:, :, ...]``: a ``Slice(0, INT64_MAX)`` on each axis."""
    for axis in axes:
        x = b.slice(x, axis, 0, _INT64_MAX)
    return x


def _sdpa(b: _Builder, q: str, k: str, v: str, mask: str) -> str:
    """``scaled_dot_product_attention(q, k, v, attn_mask=mask)`` as the opset-14 symbolic
    writes it: the scale ``1 / sqrt(q.size(-1))`` is computed from the runtime shape."""
    scale = b.to_float(b.op("Slice", b.op("Shape", q), b.const([-1]), b.const([_INT64_MAX])))
    scale = b.to_float(b.op("Div", b.const(1.0, np.float32), b.op("Sqrt", scale)))
    k_t = b.op("Transpose", k, perm=[0, 1, 3, 2])
    q_scaled = b.op("Mul", q, b.op("Sqrt", scale))
    k_scaled = b.op("Mul", k_t, b.op("Sqrt", scale))
    scores = b.op("Add", b.op("MatMul", q_scaled, k_scaled), mask)
    return b.op("MatMul", b.op("Softmax", scores, axis=-1), v)


def _repeat_kv(b: _Builder, x: str, n_rep: int) -> str:
    """``x[:, :, None].expand(batch, kv, n_rep, slen, hd).reshape(batch, kv * n_rep, slen, hd)``."""
    batch, kv, slen, hd = (b.size(x, i) for i in range(4))
    x = _full_slices(b, b.unsq(_full_slices(b, x, (0, 1)), 2), (3, 4))
    x = b.expand(x, batch, kv, n_rep, slen, hd)
    return b.view(x, batch, b.op("Mul", kv, b.const(n_rep)), slen, hd)


def _causal_mask(b: _Builder, input_ids: str, mask_in: str, past_len: str | None) -> str:
    """``_prepare_4d_causal_attention_mask``: a float ``[batch, 1, seq, past + seq]``."""
    bsz, tgt = b.size(input_ids, 0), b.size(input_ids, 1)
    mask = b.op(
        "ConstantOfShape",
        b.shape_list(tgt, tgt),
        value=numpy_helper.from_array(np.array([_FLOAT_MIN], np.float32), ""),
    )
    n = b.size(mask, -1)
    cond = b.op("Range", b.const(0), b.op("Cast", n, to=TensorProto.INT64), b.const(1))
    rows = b.view(b.op("Add", cond, b.const(1)), b.size(mask, -1), 1)
    mask = b.op("Where", b.op("Less", cond, rows), b.const(0.0, np.float32), mask)
    src = tgt
    if past_len is not None:
        zeros = b.op(
            "ConstantOfShape",
            b.shape_list(tgt, past_len),
            value=numpy_helper.from_array(np.array([0.0], np.float32), ""),
        )
        mask = b.op("Concat", zeros, mask, axis=-1)
        src = b.op("Add", tgt, past_len)
    causal = b.expand(b.unsq(b.unsq(mask, 0), 1), bsz, 1, tgt, src)
    # the padding mask: mask[:, None, None, :].expand(bsz, 1, tgt, src_len).to(float)
    m_bsz, m_src = b.size(mask_in, 0), b.size(mask_in, 1)
    padded = b.slice(
        b.unsq(b.unsq(b.slice(mask_in, 0, 0, _INT64_MAX), 1), 2), 3, 0, _INT64_MAX
    )
    padded = b.to_float(b.expand(padded, m_bsz, 1, tgt, m_src))
    inverted = b.op("Sub", b.const(1.0, np.float32), padded)
    inverted = b.op(
        "Where",
        b.op("Cast", inverted, to=TensorProto.BOOL),
        b.const(_FLOAT_MIN, np.float32),
        inverted,
    )
    return b.op("Add", inverted, causal)


def _rotary(b: _Builder, x: str, inv_freq: str, position_ids: str) -> tuple[str, str]:
    """``LlamaRotaryEmbedding.forward(x, position_ids)`` (computed in every layer)::

    inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    """
    inv = b.unsq(b.slice(b.unsq(inv_freq, 0), 1, 0, _INT64_MAX), 2)
    inv = b.expand(b.to_float(inv), b.size(position_ids, 0), -1, 1)
    pos = b.slice(b.unsq(b.slice(position_ids, 0, 0, _INT64_MAX), 1), 2, 0, _INT64_MAX)
    pos = b.to_float(pos)
    freqs = b.op("Transpose", b.op("MatMul", b.to_float(inv), b.to_float(pos)), perm=[0, 2, 1])
    emb = b.op("Concat", freqs, freqs, axis=-1)
    return b.to_float(b.op("Cos", emb)), b.to_float(b.op("Sin", emb))


def _attention(b, cfg, x, mask, position_ids, inv_freq, w, past):
    heads, kv_heads, hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    bsz, q_len = b.size(x, 0), b.size(x, 1)
    q, k, v = (b.linear(x, *w[t]) for t in ("q", "k", "v"))
    q = b.op("Transpose", b.view(q, bsz, q_len, heads, hd), perm=[0, 2, 1, 3])
    k = b.op("Transpose", b.view(k, bsz, q_len, kv_heads, hd), perm=[0, 2, 1, 3])
    v = b.op("Transpose", b.view(v, bsz, q_len, kv_heads, hd), perm=[0, 2, 1, 3])
    cos, sin = _rotary(b, v, inv_freq, position_ids)
    cos, sin = b.unsq(cos, 1), b.unsq(sin, 1)
    q = b.op("Add", b.op("Mul", q, cos), b.op("Mul", _rotate_half(b, q), sin))
    k = b.op("Add", b.op("Mul", k, cos), b.op("Mul", _rotate_half(b, k), sin))
    present = None
    if past is not None:
        k = b.op("Concat", past[0], k, axis=2)
        v = b.op("Concat", past[1], v, axis=2)
        present = (k, v)
    k = _repeat_kv(b, k, heads // kv_heads)
    v = _repeat_kv(b, v, heads // kv_heads)
    # causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
    layer_mask = _full_slices(b, mask, (0, 1, 2))
    layer_mask = b.slice(layer_mask, 3, 0, b.size(k, -2))
    ctx = b.op("Transpose", _sdpa(b, q, k, v, layer_mask), perm=[0, 2, 1, 3])
    ctx = b.view(ctx, bsz, q_len, cfg["hidden"])
    return b.linear(ctx, *w["o"]), present


def ts_decoder(
    layers: int,
    *,
    kv_cache: bool = True,
    hidden: int = 64,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int = 128,
    vocab: int = 128,
    conv1d: bool = True,
    seed: int = 0,
) -> onnx.ModelProto:
    """A TorchScript-style decoder with ``layers`` layers: about 470 nodes each (360 with
    ``conv1d=False``), so 16 layers make 7.6k nodes and 40 make 18.9k.

    Args:
        layers: Number of decoder layers.
        kv_cache: Add ``past_key_values.*`` inputs and ``present.*`` outputs (the mask then
            spans ``total_seq_len``); without it positions are computed with ``Range``.
        conv1d: The projections as GPT-2's ``Conv1D`` (``Gemm`` on the input flattened by a
            computed ``Reshape``, then a ``Reshape`` to ``x.size()[:-1] + (nf,)``), the
            TorchScript export of GPT-2-style code; else Llama's ``nn.Linear`` (``MatMul``).
        hidden, heads, kv_heads, intermediate, vocab: Model sizes; random weights from
            ``seed``.

    Returns:
        An opset-17 ``ModelProto`` that runs in onnxruntime for every ``batch >= 1``,
        ``seq_len >= 1``, ``past_seq_len >= 0``.
    """
    rng = np.random.default_rng(seed)
    hd = hidden // heads
    cfg = {"heads": heads, "kv_heads": kv_heads, "head_dim": hd, "hidden": hidden}
    b = _Builder(conv1d)

    def rand(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    def proj(n_in, n_out):  # weight, bias
        return rand(n_in, n_out), (0.1 * rng.standard_normal(n_out)).astype(np.float32)

    embed = b.weight("model.embed_tokens.weight", rand(vocab, hidden))
    inv_freq_array = 1.0 / (10000 ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq_len"]),
        helper.make_tensor_value_info(
            "attention_mask",
            TensorProto.INT64,
            ["batch", "total_seq_len" if kv_cache else "seq_len"],
        ),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq_len", vocab])
    ]
    pasts = []
    if kv_cache:
        inputs.append(
            helper.make_tensor_value_info(
                "position_ids", TensorProto.INT64, ["batch", "seq_len"]
            )
        )
        pasts = [
            (f"past_key_values.{i}.key", f"past_key_values.{i}.value") for i in range(layers)
        ]
        inputs += [
            helper.make_tensor_value_info(
                name, TensorProto.FLOAT, ["batch", kv_heads, "past_seq_len", hd]
            )
            for pair in pasts
            for name in pair
        ]

    x = b.op("Gather", embed, "input_ids", axis=0)
    past_len = b.size(pasts[0][0], 2) if kv_cache else None
    if kv_cache:
        position_ids = "position_ids"
    else:
        # position_ids = arange(past_len, seq_length + past_len).unsqueeze(0).view(-1, seq_length)
        seq = b.size("input_ids", 1)
        pos = b.op("Range", b.const(0), b.op("Add", seq, b.const(0)), b.const(1))
        position_ids = b.view(b.unsq(pos, 0), -1, b.size("input_ids", 1))
    mask = _causal_mask(b, "input_ids", "attention_mask", past_len)

    for i in range(layers):
        p = f"model.layers.{i}."
        w = {
            "q": (p + "self_attn.q_proj", *proj(hidden, heads * hd)),
            "k": (p + "self_attn.k_proj", *proj(hidden, kv_heads * hd)),
            "v": (p + "self_attn.v_proj", *proj(hidden, kv_heads * hd)),
            "o": (p + "self_attn.o_proj", *proj(heads * hd, hidden)),
        }
        inv_freq = b.weight(p + "self_attn.rotary_emb.inv_freq", inv_freq_array)
        ln1 = b.weight(p + "input_layernorm.weight", np.ones(hidden, np.float32))
        ln2 = b.weight(p + "post_attention_layernorm.weight", np.ones(hidden, np.float32))
        h = _rms_norm(b, x, ln1, 1e-6)
        attn, present = _attention(
            b,
            cfg,
            h,
            mask,
            position_ids,
            inv_freq,
            w,
            pasts[i] if kv_cache else None,
        )
        x = b.op("Add", x, attn)
        h = _rms_norm(b, x, ln2, 1e-6)
        gate = b.linear(h, p + "mlp.gate_proj", *proj(hidden, intermediate))
        up = b.linear(h, p + "mlp.up_proj", *proj(hidden, intermediate))
        act = b.op("Mul", gate, b.op("Sigmoid", gate))
        down = b.linear(b.op("Mul", act, up), p + "mlp.down_proj", *proj(intermediate, hidden))
        x = b.op("Add", x, down)
        if present is not None:
            for kind, value in zip(("key", "value"), present):
                b.rename(value, f"present.{i}.{kind}")
                outputs.append(
                    helper.make_tensor_value_info(
                        f"present.{i}.{kind}",
                        TensorProto.FLOAT,
                        ["batch", kv_heads, "total_seq_len", hd],
                    )
                )
    x = _rms_norm(b, x, b.weight("model.norm.weight", np.ones(hidden, np.float32)), 1e-6)
    b.rename(b.op("MatMul", x, b.weight("lm_head.weight", rand(hidden, vocab))), "logits")
    graph = helper.make_graph(
        b.nodes, "main_graph", inputs, outputs, initializer=b.initializers
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch"
    )
    model.ir_version = 8
    return model


def feeds(model: onnx.ModelProto, batch: int, seq: int, past: int, seed: int = 0) -> dict:
    """Inputs for :func:`ts_decoder` models: ids in ``[0, 2)``, a mask of ones, positions
    ``past .. past + seq - 1`` and random caches."""
    rng = np.random.default_rng(seed)
    sizes = {"batch": batch, "seq_len": seq, "past_seq_len": past, "total_seq_len": past + seq}
    out = {}
    for value in model.graph.input:
        dims = [
            sizes[d.dim_param] if d.dim_param else d.dim_value
            for d in value.type.tensor_type.shape.dim
        ]
        if value.name == "input_ids":
            out[value.name] = rng.integers(0, 2, dims).astype(np.int64)
        elif value.name == "attention_mask":
            out[value.name] = np.ones(dims, np.int64)
        elif value.name == "position_ids":
            out[value.name] = np.broadcast_to(np.arange(past, past + seq), dims).astype(
                np.int64
            )
        else:
            out[value.name] = rng.standard_normal(dims).astype(np.float32)
    return out


def _check(layers: int = 2) -> None:
    """Runs both variants in onnxruntime on a few sizes (including an empty cache, seq 1),
    and checks that the cache is consistent: decoding the last token with the cache of the
    others gives the logits of the full sequence (causal mask, positions, rotary, concat)."""
    import onnxruntime as ort

    for kv_cache in (True, False):
        model = ts_decoder(layers, kv_cache=kv_cache)
        onnx.checker.check_model(model)
        ops: dict[str, int] = {}
        for node in model.graph.node:
            ops[node.op_type] = ops.get(node.op_type, 0) + 1
        sess = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        for batch, seq, past in ((1, 1, 0), (2, 3, 4), (3, 5, 0), (2, 1, 7)):
            if not kv_cache:
                past = 0
            out = sess.run(None, feeds(model, batch, seq, past))
            assert out[0].shape == (batch, seq, 128), out[0].shape
            assert np.isfinite(out[0]).all()
            if kv_cache:
                assert out[1].shape == (batch, 2, past + seq, 16), out[1].shape
        if kv_cache:
            full = feeds(model, 2, 5, 0)
            want = sess.run(None, full)[0][:, -1]
            prefix = dict(
                full,
                input_ids=full["input_ids"][:, :4],
                attention_mask=full["attention_mask"][:, :4],
                position_ids=full["position_ids"][:, :4],
            )
            names = [o.name for o in sess.get_outputs()]
            cache = dict(zip(names, sess.run(None, prefix)))
            step = {
                "input_ids": full["input_ids"][:, 4:],
                "attention_mask": full["attention_mask"],
                "position_ids": full["position_ids"][:, 4:],
            }
            step.update(
                {
                    n.replace("present", "past_key_values"): v
                    for n, v in cache.items()
                    if n.startswith("present")
                }
            )
            got = sess.run(None, step)[0][:, -1]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        top = sorted(ops.items(), key=lambda kv: -kv[1])[:8]
        print(f"kv_cache={kv_cache}: {len(model.graph.node)} nodes, runs; {top}")


if __name__ == "__main__":
    import sys

    _check(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
