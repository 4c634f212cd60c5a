"""Synthetic benchmark models, built with onnx.helper and tiny weights.

* :func:`decoder` — a KV-cache decoder in the shape of an exported transformer: every layer
  computes its reshape targets from ``Shape -> Gather -> Unsqueeze -> Concat`` chains, concatenates
  the past keys/values, and adds a sliced causal mask; ~70 nodes per layer.
* :func:`chain` — a long chain of MatMul/Reshape/Transpose/Concat/Slice blocks (12 nodes each).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _const(name: str, values, dtype=np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def decoder(
    n_layers: int = 48, hidden: int = 32, heads: int = 4, vocab: int = 64
) -> onnx.ModelProto:
    """A decoder with ``n_layers`` layers, inputs ``input_ids[batch, seq]``, a mask
    ``attention_mask[batch, total_seq]`` and per-layer ``past_key_i/past_value_i``."""
    head_dim = hidden // heads
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(
            rng.standard_normal((vocab, hidden)).astype(np.float32), "embed"
        ),
        numpy_helper.from_array(rng.standard_normal((hidden, hidden)).astype(np.float32), "W"),
        numpy_helper.from_array(
            rng.standard_normal((hidden, 4 * hidden)).astype(np.float32), "W1"
        ),
        numpy_helper.from_array(
            rng.standard_normal((4 * hidden, hidden)).astype(np.float32), "W2"
        ),
        numpy_helper.from_array(np.zeros(hidden, np.float32), "bias"),
        _const("i0", 0),
        _const("i1", 1),
        _const("i2", 2),
        _const("ax0", [0]),
        _const("ax1", [1]),
        _const("ax_1", [-1]),
        _const("heads_hd", [heads, head_dim]),
        _const("hidden1", [hidden]),
        numpy_helper.from_array(np.array(float(head_dim) ** 0.5, np.float32), "scale"),
        numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
    ]
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["h0"], axis=0)]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info(
            "attention_mask", TensorProto.FLOAT, ["batch", "total_seq"]
        ),
    ]
    outputs = []
    x = "h0"
    for i in range(n_layers):
        p = f"l{i}_"

        names_global = {
            x,
            "W",
            "W1",
            "W2",
            "bias",
            "i0",
            "i1",
            "i2",
            "ax0",
            "ax1",
            "ax_1",
            "heads_hd",
            "hidden1",
            "scale",
            "eps",
            "two",
            "attention_mask",
            f"past_key_{i}",
            f"past_value_{i}",
        }

        def n(op, ins, outs, p=p, names_global=names_global, **kw):
            ins = [a if a in names_global else p + a for a in ins]
            nodes.append(helper.make_node(op, ins, [p + o for o in outs], **kw))

        # layer norm
        n("ReduceMean", [x], ["mean"], axes=[-1])
        n("Sub", [x, "mean"], ["xc"])
        n("Pow", ["xc", "two"], ["sq"])
        n("ReduceMean", ["sq"], ["var"], axes=[-1])
        n("Add", ["var", "eps"], ["vareps"])
        n("Sqrt", ["vareps"], ["std"])
        n("Div", ["xc", "std"], ["ln"])
        # shape pieces
        n("Shape", [x], ["shp"])
        n("Gather", ["shp", "i0"], ["b"], axis=0)
        n("Gather", ["shp", "i1"], ["s"], axis=0)
        n("Unsqueeze", ["b", "ax0"], ["b1"])
        n("Unsqueeze", ["s", "ax0"], ["s1"])
        n("Concat", ["b1", "s1", "heads_hd"], ["qkv_shape"], axis=0)
        n("Concat", ["b1", "s1", "hidden1"], ["out_shape"], axis=0)
        for t in ("q", "k", "v"):
            n("MatMul", ["ln", "W"], [t + "mm"])
            n("Add", [t + "mm", "bias"], [t + "b"])
            n("Reshape", [t + "b", "qkv_shape"], [t + "r"])
            n("Transpose", [t + "r"], [t + "t"], perm=[0, 2, 1, 3])
        n("Concat", [f"past_key_{i}", "kt"], ["present_key"], axis=2)
        n("Concat", [f"past_value_{i}", "vt"], ["present_value"], axis=2)
        n("Transpose", ["present_key"], ["kT"], perm=[0, 1, 3, 2])
        n("MatMul", ["qt", "kT"], ["scores"])
        n("Div", ["scores", "scale"], ["scaled"])
        # mask: attention_mask[:, None, None, :] sliced to the key length
        n("Shape", ["present_key"], ["pk_shape"])
        n("Gather", ["pk_shape", "i2"], ["kv_len"], axis=0)
        n("Unsqueeze", ["kv_len", "ax0"], ["kv_len1"])
        n("Slice", ["attention_mask", "ax0", "kv_len1", "ax_1"], ["mask_sl"])
        n("Unsqueeze", ["mask_sl", "ax1"], ["mask_u1"])
        n("Unsqueeze", ["mask_u1", "ax1"], ["mask_u2"])
        n("Add", ["scaled", "mask_u2"], ["masked"])
        n("Softmax", ["masked"], ["probs"], axis=-1)
        n("MatMul", ["probs", "present_value"], ["ctx"])
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3])
        n("Reshape", ["ctx_t", "out_shape"], ["ctx_r"])
        n("MatMul", ["ctx_r", "W"], ["o"])
        n("Add", [x, "o"], ["res1"])
        # MLP
        n("MatMul", ["res1", "W1"], ["up"])
        n("Tanh", ["up"], ["act"])
        n("Mul", ["up", "act"], ["gated"])
        n("MatMul", ["gated", "W2"], ["down"])
        n("Add", ["res1", "down"], ["out"])
        for kind in ("key", "value"):
            inputs.append(
                helper.make_tensor_value_info(
                    f"past_{kind}_{i}",
                    TensorProto.FLOAT,
                    ["batch", heads, "past_seq", head_dim],
                )
            )
            outputs.append(
                helper.make_tensor_value_info(
                    f"{p}present_{kind}",
                    TensorProto.FLOAT,
                    ["batch", heads, "total_seq", head_dim],
                )
            )
        x = p + "out"
    nodes.append(helper.make_node("MatMul", [x, "W"], ["logits"]))
    outputs.insert(
        0, helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", hidden])
    )
    graph = helper.make_graph(nodes, "decoder", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def chain(n_blocks: int = 1670, hidden: int = 64) -> onnx.ModelProto:
    """A chain of ``12 * n_blocks`` nodes over ``X[batch, seq, hidden]``."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.random((hidden, hidden)).astype(np.float32) * 0.01, "W"),
        numpy_helper.from_array(np.zeros(hidden, np.float32), "B"),
        _const("c416", [4, hidden // 4]),
        _const("c00h", [0, 0, hidden]),
        _const("zero1", [0]),
        _const("one1", [1]),
    ]
    nodes = []
    x = "X"
    for i in range(n_blocks):
        p = f"b{i}_"
        nodes += [
            helper.make_node("MatMul", [x, "W"], [p + "mm"]),
            helper.make_node("Add", [p + "mm", "B"], [p + "add"]),
            helper.make_node("Shape", [x], [p + "sh02"], start=0, end=2),
            helper.make_node("Concat", [p + "sh02", "c416"], [p + "newshape"], axis=0),
            helper.make_node("Reshape", [p + "add", p + "newshape"], [p + "r1"]),
            helper.make_node("Transpose", [p + "r1"], [p + "t1"], perm=[0, 2, 1, 3]),
            helper.make_node("Transpose", [p + "t1"], [p + "t2"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [p + "t2", "c00h"], [p + "r2"]),
            helper.make_node("Concat", [x, p + "r2"], [p + "cat"], axis=1),
            helper.make_node("Shape", [x], [p + "sh12"], start=1, end=2),
            helper.make_node("Slice", [p + "cat", "zero1", p + "sh12", "one1"], [p + "sl"]),
            helper.make_node("Add", [p + "sl", x], [p + "out"]),
        ]
        x = p + "out"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "seq", hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model
