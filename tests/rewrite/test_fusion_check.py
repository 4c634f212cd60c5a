"""``fusions="ort"``: the fused outputs are compared with the unfused ones in onnxruntime.

The guard proves shapes; a fusion that keeps every shape but computes something else
passes it. After the guarded steps, the model before the fusions and the fused one run in
onnxruntime on the same random inputs; a step that changes an output beyond the kernels'
rounding is found by bisecting the kept steps, undone, and reported. onnxruntime is the
oracle of every test here.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims.rewrite._fusion_check as fusion_check
import onnx_symdims.rewrite._guard as guard
from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import proto, session
from tests.rewrite.test_packed_attention import _assert_close, _block
from tests.rewrite.test_pipeline import _HAS_SDPA_VIA_MHA

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def _numeric(result) -> list[str]:
    """The diagnostics of the output check (the others are the final inference's)."""
    return [d for d in result.diagnostics if isinstance(d, str) and "onnxruntime" in d]


@pytest.fixture
def reference_runs(monkeypatch):
    """The references the check made (a ``str``: why it was skipped)."""
    made = []
    original = guard.reference_runs

    def spy(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(guard, "reference_runs", spy)
    return made


def test_a_misfire_that_keeps_every_shape_is_undone(monkeypatch):
    """onnxscript's cross-attention rule with a sequence-first key of 2 positions and 2
    heads (the Perceiver case) without the guard's ``_keys_heads_first``: every shape
    holds, the outputs differ. ``mha2`` is undone, and ``sdpa_via_mha`` (which reads
    the key format) fuses the same attention right."""
    monkeypatch.setattr(guard, "_keys_heads_first", lambda step: step)
    m = _block(cross=True, memory="2", value_size=4)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    [message] = _numeric(result)
    assert message.startswith("fusions 'ort.mha2' undone: output 'y' differs")
    assert "fusion.mha2" not in result.fired
    if _HAS_SDPA_VIA_MHA:
        assert result.fired["fusion.sdpa_via_mha"] == 1
    else:  # onnxscript 0.5 (the floors): its SDPA node, left unconsumed, is undone too
        assert not [n for n in m.graph if n.domain == "com.microsoft"]
    _assert_close(before, m)


def test_the_misfire_is_kept_without_the_check(monkeypatch):
    """The same model with ``verify_fusions=False``: the misfire stays (what the check
    guards against is real)."""
    monkeypatch.setattr(guard, "_keys_heads_first", lambda step: step)
    m = _block(cross=True, memory="2", value_size=4)
    before = proto(m)
    result = OptimizePass(fusions="ort", verify_fusions=False)(m)
    assert result.fired["fusion.mha2"] == 1
    assert not _numeric(result)
    with pytest.raises(AssertionError):
        _assert_close(before, m)


_CHAIN = """<ir_version: 10, opset_import: ["" : 18]>
g (float[n, 4] x) => (float[n, 4] y) {
    r = Relu(x)
    s = Sigmoid(r)
    y = Neg(s)
}"""


def _replace_op(old: str, new: str):
    """A fusion step that replaces every ``old`` node by a ``new`` one (same shapes)."""

    def step(model: ir.Model) -> int:
        count = 0
        for node in list(model.graph):
            if node.op_type == old:
                replacement = ir.node(new, list(node.inputs))
                model.graph.insert_before(node, replacement)
                replacement.outputs[0].dtype = node.outputs[0].dtype
                node.outputs[0].replace_all_uses_with(
                    replacement.outputs[0], replace_graph_outputs=True
                )
                model.graph.remove(node, safe=True)
                count += 1
        return count

    return step


def test_the_step_that_changed_the_outputs_is_found_among_kept_ones(monkeypatch):
    """Three kept steps, the last two wrong (``Sigmoid`` -> ``Tanh``, ``Neg`` dropped;
    same shapes): bisection finds the first, which is undone, the steps after it run
    again and the check then finds the other; the exact first step stays."""
    steps = [
        ("relu_as_max", _max_of_zero),
        ("wrong", _replace_op("Sigmoid", "Tanh")),
        ("neg_dropped", _replace_op("Neg", "Identity")),  # wrong too: found next
        ("cleanup", lambda model: None),
    ]
    monkeypatch.setattr(guard, "_ort_steps", lambda cleanup: steps)
    m = ir.from_onnx_text(_CHAIN)
    before = proto(m)
    result = OptimizePass(fusions="ort")(m)
    messages = _numeric(result)
    assert [message.split(" undone")[0] for message in messages] == [
        "fusions 'ort.wrong'",
        "fusions 'ort.neg_dropped'",
    ]
    assert result.fired["fusion.relu_as_max"] == 1
    assert "fusion.wrong" not in result.fired and "fusion.neg_dropped" not in result.fired
    assert [n.op_type for n in m.graph if n.op_type != "Constant"] == ["Max", "Sigmoid", "Neg"]
    _assert_close(before, m, [{"n": 3}, {"n": 1}])


def _max_of_zero(model: ir.Model) -> int:
    """``Relu(x)`` -> ``Max(x, 0)``: exact."""
    count = 0
    for node in list(model.graph):
        if node.op_type == "Relu":
            zero = ir.node(
                "Constant", [], attributes={"value": ir.tensor(np.array(0, np.float32))}
            )
            new = ir.node("Max", [node.inputs[0], zero.outputs[0]])
            model.graph.insert_before(node, [zero, new])
            new.outputs[0].dtype = ir.DataType.FLOAT
            node.outputs[0].replace_all_uses_with(new.outputs[0])
            model.graph.remove(node, safe=True)
            count += 1
    return count


def test_a_correct_fusion_is_kept(reference_runs):
    """The packed self-attention fusion (``Attention`` without a bias) and the fusions
    of an exported BERT (SkipLayerNormalization, MultiHeadAttention) and GPT-2 (a KV
    cache: ``total_seq_len = past_seq_len + seq_len`` read from the present keys'
    declared length) are checked and kept."""
    m = _block()
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.attention_no_bias"] == 1
    assert not _numeric(result)
    for name in ("bert_dynamo", "gpt2_kv_legacy"):
        result = OptimizePass(fusions="ort")(ir.load(DATA / f"{name}.onnx"))
        assert any(k.startswith("fusion.") for k in result.fired), name
        assert not _numeric(result), name
    assert len(reference_runs) == 3
    assert all(isinstance(r, fusion_check.Reference) for r in reference_runs)
    gpt2_sizes = [binding for binding, _, _ in reference_runs[-1].runs]
    assert len(gpt2_sizes) == fusion_check.MAX_BINDINGS
    assert all(b["total_seq_len"] == b["past_seq_len"] + b["seq_len"] for b in gpt2_sizes)


_GELU_OF_EMBEDDING = """<ir_version: 10, opset_import: ["" : 18]>
g (int64[b, s] ids) => (float[b, s, 4] y)
<float[1, 4] table = {0.1, -0.2, 0.3, 0.4}, int64 five = {5}, float half = {0.5},
 float one = {1.0}, float root2 = {1.4142135}>
{
    shifted = Add(ids, five)
    e = Gather(table, shifted)
    d = Div(e, root2)
    f = Erf(d)
    p = Add(f, one)
    m = Mul(e, p)
    y = Mul(m, half)
}"""


def test_a_model_that_runs_at_no_size_is_not_checked(reference_runs):
    """Token ids shifted past the end of a one-row table: the unfused model runs at no
    size tried; the check is skipped with a diagnostic, the Gelu fusion stays."""
    m = ir.from_onnx_text(_GELU_OF_EMBEDDING)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.gelu"] == 1
    [message] = _numeric(result)
    assert message.startswith(
        "fusions 'ort' not checked in onnxruntime: the unfused model runs at none of the"
    )
    assert "Gather" in message
    assert isinstance(reference_runs[0], str)


def test_an_integer_input_of_one_row_is_given_zeros(reference_runs):
    """Token types into a one-row table: the check gives that input zeros and runs."""
    m = ir.from_onnx_text(_GELU_OF_EMBEDDING.replace("Add(ids, five)", "Mul(ids, five)"))
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.gelu"] == 1
    assert not _numeric(result)
    [reference] = reference_runs
    assert all(not feeds["ids"].any() for _, feeds, _ in reference.runs)


def test_without_onnxruntime_the_fusions_run_as_before(monkeypatch):
    """onnxruntime not importable: no check, no diagnostic; the misfire of the first
    test stays, as with ``verify_fusions=False``."""
    monkeypatch.setattr(guard, "_keys_heads_first", lambda step: step)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # ``import`` raises ImportError
    assert fusion_check.onnxruntime_or_none() is None
    m = _block(cross=True, memory="2", value_size=4)
    result = OptimizePass(fusions="ort")(m)
    unchecked = _block(cross=True, memory="2", value_size=4)
    expected = OptimizePass(fusions="ort", verify_fusions=False)(unchecked)
    assert result.fired == expected.fired and result.fired["fusion.mha2"] == 1
    assert result.diagnostics == expected.diagnostics
    assert [n.op_type for n in m.graph] == [n.op_type for n in unchecked.graph]


def test_outputs_are_compared_relative_to_their_scale():
    """Rounding at 1e-4 of the output's scale passes; 2 % of it (the Perceiver misfire)
    does not; a NaN of the unfused output is not compared."""
    expected = np.array([[1000.0, -3.0], [np.nan, 0.5]], np.float32)
    rounded = expected + np.float32(0.1)
    misfire = expected + np.float32(20.0)
    difference, scale, bound = fusion_check._difference(rounded, expected)
    assert scale == 1000.0 and difference <= bound
    difference, _, bound = fusion_check._difference(misfire, expected)
    assert difference > bound
    ints = np.array([1, 2, 3])
    assert fusion_check._difference(ints, ints)[0] == 0
    assert fusion_check._difference(ints + 1, ints)[0] == 3


def test_the_random_inputs_run_the_unfused_model():
    """The check's feeds are valid runs: the first element of a mask row is 1."""
    text = _GELU_OF_EMBEDDING.replace("Add(ids, five)", "Identity(ids)")
    m = ir.from_onnx_text(
        text.replace("float[1, 4] table = {0.1,", "float[2, 4] table = {5, 6, 7, 8, 0.1,")
    )
    reference = session(proto(m))
    facts = guard.analyze(m)
    plan = fusion_check.size_plan(m, facts)
    made = fusion_check.reference_runs(fusion_check.onnxruntime_or_none(), m, plan, {})
    assert isinstance(made, fusion_check.Reference)
    for _, feeds, outputs in made.runs:
        assert (feeds["ids"][..., 0] == 1).all()
        np.testing.assert_array_equal(reference.run(None, feeds)[0], outputs[0])


_SLICED_MASK = """<ir_version: 10, opset_import: ["" : 18]>
g (float[b, s, 4] x, float[b, p, 4] past, float[b, t] mask) => (float[b, n] y, float[b, s, 4] g)
<int64[1] zero = {0}, int64[1] one = {1}, int64[1] end = {2}, float half = {0.5},
 float unit = {1.0}, float root2 = {1.4142135}>
{
    kv = Concat<axis = 1>(past, x)
    keys = ReduceSum<keepdims = 0>(kv, end)
    shape = Shape(kv)
    n = Slice(shape, one, end)
    sliced = Slice(mask, zero, n, one)
    y = Mul(keys, sliced)
    d = Div(x, root2)
    f = Erf(d)
    a = Add(f, unit)
    m = Mul(x, a)
    g = Mul(m, half)
}"""


def test_a_mask_sliced_to_the_keys_length_relates_the_sizes(reference_runs):
    """A mask of ``t`` columns sliced to the ``p + s`` keys (``min(t, p+s)``, as a
    dynamo-exported decoder writes it) runs only when ``t >= p + s``: the check sizes
    ``t = p + s`` from the ``min`` term and runs at every binding it draws."""
    m = ir.from_onnx_text(_SLICED_MASK)
    result = OptimizePass(fusions="ort")(m)
    assert result.fired["fusion.gelu"] == 1
    assert not _numeric(result)
    [reference] = reference_runs
    sizes = [binding for binding, _, _ in reference.runs]
    assert len(sizes) == fusion_check.MAX_BINDINGS
    assert all(b["t"] == b["p"] + b["s"] for b in sizes)


_RESHAPED_MASK = """<ir_version: 10, opset_import: ["" : 18]>
g (float[b, s, 4] x, float[b, p, 4] past, float[b, t] mask) => (float[b, n] y)
<int64[1] two = {2}>
{
    kv = Concat<axis = 1>(past, x)
    keys = ReduceSum<keepdims = 0>(kv, two)
    shape = Shape(keys)
    flat = Reshape(mask, shape)
    y = Mul(keys, flat)
}"""


def test_a_rarely_used_size_is_tried_as_a_sum_the_dims_use():
    """A mask of ``t`` columns reshaped to the ``p + s`` keys (Mistral's sliding-window
    mask: no node puts the two side by side, nothing proves them equal) runs only when
    ``t = p + s``: the check tries ``t``, used once, as the sum the other dims use."""
    m = ir.from_onnx_text(_RESHAPED_MASK)
    facts = guard.analyze(m)
    plan = fusion_check.size_plan(m, facts)
    made = fusion_check.reference_runs(fusion_check.onnxruntime_or_none(), m, plan, {})
    assert isinstance(made, fusion_check.Reference), made
    sizes = [binding for binding, _, _ in made.runs]
    assert len(sizes) == fusion_check.MAX_BINDINGS
    assert all(b["t"] == b["p"] + b["s"] for b in sizes)
