"""``optimize`` on the committed exported models: outputs identical, never more nodes.

Every model of ``tests/data/*.onnx`` and the bundled ``tiny_decoder.onnx`` is optimized,
then run before and after in onnxruntime on input sizes that respect the model's
relations — read off the input names: KV-cache models take ``past_key_values.*`` of
``past_seq_len`` and an ``attention_mask`` of ``total_seq_len = past_seq_len +
seq_len`` — including the sizes users deploy (batch 1, decode ``seq_len = 1``, prefill
with an empty cache ``past_seq_len = 0``). Inputs are filled as each model's
``*.truth.json`` says (``feeds``: token ids, ones, positions from ``past_seq_len``).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import expr
from onnx_symdims.rewrite import OptimizePass
from tests.rewrite._rewrite_testing import session

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
BUNDLED = pathlib.Path(onnx_symdims.__file__).parent / "data"
MODELS = [*sorted(p.stem for p in DATA.glob("*.onnx")), "tiny_decoder"]


def _model_path(name: str) -> pathlib.Path:
    path = DATA / f"{name}.onnx"
    return path if path.exists() else BUNDLED / f"{name}.onnx"


def _bindings(truth: dict) -> list[dict[str, int]]:
    """Sizes for the model's input symbols, edge sizes first, then the recorded ones."""
    symbols = {
        d for spec in truth["inputs"].values() for d in spec["dims"] if isinstance(d, str)
    }
    if "past_seq_len" in symbols:
        triples = [(1, 1, 0), (1, 1, 6), (2, 5, 0), (1, 3, 2)]
        wanted = [
            {"batch": b, "seq_len": s, "past_seq_len": p, "total_seq_len": s + p}
            for b, s, p in triples
        ]
    elif "height" in symbols:  # conv strides and pools need room: the recorded sizes
        wanted = [{**truth["bindings"][0], "batch": 1}]
    else:
        wanted = [{"batch": 1, "seq_len": 1}, {"batch": 1, "seq_len": 9}]
    wanted += truth["bindings"]
    for binding in wanted:
        assert set(binding) == symbols, (binding, symbols)
        if "total_seq_len" in binding:
            assert binding["total_seq_len"] == binding["seq_len"] + binding["past_seq_len"]
    return wanted


def _feeds(truth: dict, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, spec in truth["inputs"].items():
        shape = tuple(d if isinstance(d, int) else sizes[d] for d in spec["dims"])
        dtype = onnx.helper.tensor_dtype_to_np_dtype(spec["elem_type"])
        how = truth["feeds"][name]
        if how["kind"] == "ids":
            array = rng.integers(0, how["high"], shape)
        elif how["kind"] == "ones":
            array = np.ones(shape)
        elif how["kind"] == "positions":
            start = sizes[how["start"]]
            array = np.broadcast_to(np.arange(start, start + shape[-1]), shape)
        else:
            assert how["kind"] == "normal", how
            array = rng.standard_normal(shape)
        feeds[name] = np.ascontiguousarray(array).astype(dtype)
    return feeds


def _nodes(graph) -> int:
    """Main-graph nodes without ``Constant`` (what the optimizers are compared on)."""
    return sum(1 for n in graph if n.op_type != "Constant")


@pytest.fixture(scope="module", params=MODELS)
def optimized(request):
    name = request.param
    path = _model_path(name)
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    return name, onnx.load(path), onnx_symdims.optimize(path), truth


def test_every_committed_model_is_covered():
    assert len(MODELS) >= 7, MODELS
    for name in MODELS:
        assert (DATA / f"{name}.truth.json").exists(), name


def test_optimized_model_gives_identical_outputs(optimized):
    name, original, after, truth = optimized
    reference, candidate = session(original), session(after)
    names = [o.name for o in original.graph.output]
    assert [o.name for o in after.graph.outputs] == names
    for k, sizes in enumerate(_bindings(truth)):
        feeds = _feeds(truth, sizes, seed=k)
        expected = reference.run(None, feeds)
        actual = candidate.run(None, feeds)
        for output, a, e in zip(names, actual, expected):
            assert a.dtype == e.dtype and a.shape == e.shape, (name, sizes, output)
            different = int(np.sum(a != e))
            assert different == 0, f"{name} {sizes} {output}: {different} elements differ"


def _with_every_value_as_output(model: ir.Model) -> tuple[onnx.ModelProto, list]:
    """The model's proto with each main-graph value that has a written shape an output."""
    p = ir.serde.serialize_model(model)
    outputs = {o.name for o in p.graph.output}
    written = [v for v in p.graph.value_info if v.name not in outputs]
    p.graph.output.extend(written)
    del p.graph.value_info[:]
    return p, [*written, *(o for o in p.graph.output if o.name in outputs)]


def _runs_a_spec_invalid_reshape(p: onnx.ModelProto, arrays: dict) -> bool:
    """True when a ``Reshape`` of the run had a ``-1`` beside other dims that multiply to 0.

    The spec leaves such a ``-1`` undefined (the run is not a successful one); onnxruntime
    departs from it under ``allowzero=1`` and takes the input's dim at that position
    (``[0, -1, 8]`` of a ``[0, 4, 1, 8]`` tensor gives ``[0, 4, 8]``). Dims are checked
    against the spec, so such runs are left out.
    """
    constants = {i.name: onnx.numpy_helper.to_array(i) for i in p.graph.initializer}
    for node in p.graph.node:
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx"):
            continue
        data, target = arrays.get(node.input[0]), arrays.get(node.input[1])
        if target is None:
            target = constants.get(node.input[1])
        if data is None or target is None:
            continue
        allowzero = any(a.name == "allowzero" and a.i for a in node.attribute)
        dims = [
            data.shape[i] if t == 0 and not allowzero and i < data.ndim else int(t)
            for i, t in enumerate(target.tolist())
        ]
        if -1 in dims and np.prod([d for d in dims if d != -1]) == 0:
            return True
    return False


def _with_zero(sizes: dict[str, int], symbol: str) -> dict[str, int]:
    if symbol not in sizes:
        return dict(sizes)
    zeroed = {**sizes, symbol: 0}
    if "total_seq_len" in zeroed:
        zeroed["total_seq_len"] = zeroed["seq_len"] + zeroed["past_seq_len"]
    return zeroed


def test_optimized_model_dims_hold_in_onnxruntime(optimized):
    """Every dim written into the optimized model holds when *it* runs (empty cache,
    seq 1 included): the shapes come from the optimized model, not from facts of
    nodes the rewrites removed."""
    name, _, after, truth = optimized
    p, values = _with_every_value_as_output(after)
    by_name = {v.name: v for v in values}
    output_names = [o.name for o in p.graph.output]
    checked = 0
    bindings = _bindings(truth)
    # Sizes the original may refuse but the optimized model may run (a rewrite can
    # drop a node that failed on them): dims must hold there too.
    for symbol in ("batch", "seq_len"):
        if symbol in bindings[0]:
            bindings.append(_with_zero(bindings[0], symbol))
    bindings.append(_with_zero(_with_zero(bindings[0], "batch"), "seq_len"))
    for k, sizes in enumerate(bindings):
        feeds = _feeds(truth, sizes, seed=k)
        try:
            results = session(p).run(None, feeds)
        except Exception:  # a run that fails proves nothing about dims
            continue
        if _runs_a_spec_invalid_reshape(p, {**feeds, **dict(zip(output_names, results))}):
            continue
        for output, array in zip(p.graph.output, results):
            declared = by_name[output.name].type.tensor_type
            if not declared.HasField("shape"):
                continue
            assert len(declared.shape.dim) == array.ndim, (name, output.name, sizes)
            for axis, d in enumerate(declared.shape.dim):
                if d.HasField("dim_value"):
                    expected = d.dim_value
                elif d.dim_param:
                    parsed = expr.parse_dim(d.dim_param)
                    if isinstance(parsed, expr.DimExpr) and not parsed.symbols() <= set(sizes):
                        continue  # a fresh symbol: any size
                    expected = expr.evaluate(parsed, sizes)
                else:
                    continue
                checked += 1
                assert array.shape[axis] == expected, (
                    f"{name} {sizes} {output.name} axis {axis}: written {d.dim_param or expected}"
                    f", onnxruntime {array.shape[axis]}"
                )
    assert checked


def test_optimized_model_dims_are_what_it_proves_alone(optimized):
    """The dims written are those a fresh inference of the optimized model gives: none
    rests on a fact of a node the rewrites removed (the rounds may use such facts; they
    hold for the original's runs, not for every run of the optimized model)."""
    name, original, after, _ = optimized
    fresh = ir.serde.deserialize_model(ir.serde.serialize_model(after))
    declared = ir.serde.deserialize_model(original)
    for node in ir.traversal.RecursiveGraphIterator(fresh.graph):
        for value in node.outputs:
            value.shape = None
    for value, theirs in zip(fresh.graph.outputs, declared.graph.outputs):
        value.shape = theirs.shape
    onnx_symdims.infer_symbolic_shapes(fresh)
    written = {
        v.name: v.shape
        for n in ir.traversal.RecursiveGraphIterator(after.graph)
        for v in n.outputs
    }
    for node in ir.traversal.RecursiveGraphIterator(fresh.graph):
        for value in node.outputs:
            assert str(value.shape) == str(written[value.name]), (name, value.name)


def test_optimized_model_keeps_inputs_and_outputs(optimized):
    _, original, after, _ = optimized
    declared = ir.serde.deserialize_model(original)
    assert [v.name for v in after.graph.inputs] == [v.name for v in declared.graph.inputs]
    for mine, theirs in zip(after.graph.inputs, declared.graph.inputs):
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, mine.name
    for mine, theirs in zip(after.graph.outputs, declared.graph.outputs):
        assert mine.dtype == theirs.dtype, mine.name
        for d_mine, d_theirs in zip(mine.shape.dims, theirs.shape.dims):
            if isinstance(d_theirs, int) or d_theirs.value:  # the author's dims stay
                assert d_mine == d_theirs, (mine.name, mine.shape, theirs.shape)


def test_no_more_nodes_than_onnxscript_alone(optimized):
    import onnxscript

    name, original, after, _ = optimized
    alone = ir.serde.deserialize_model(original)
    onnxscript.optimizer.optimize(alone)
    assert _nodes(after.graph) <= _nodes(alone.graph), name


def test_a_second_optimize_changes_nothing(optimized):
    """``optimize`` reaches its fixed point in one run: optimizing the result again removes
    no node (SEW's reshape targets needed a second run before a Conv's fact bounded
    ``audio_len``)."""
    name, _, after, _ = optimized
    again = ir.serde.deserialize_model(ir.serde.serialize_model(after))
    onnx_symdims.optimize(again)
    assert _nodes(again.graph) == _nodes(after.graph), name
    assert [n.op_type for n in again.graph] == [n.op_type for n in after.graph], name


@pytest.mark.parametrize("name", MODELS)
def test_ort_fusions_keep_the_model_running(name):
    """With onnxruntime's fused contrib ops the float math is reordered: close, not equal."""
    path = _model_path(name)
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    result = OptimizePass(fusions="ort")(m := ir.load(path))
    reference, candidate = session(onnx.load(path)), session(m)
    for k, sizes in enumerate(_bindings(truth)[:3]):
        feeds = _feeds(truth, sizes, seed=k)
        for a, e in zip(candidate.run(None, feeds), reference.run(None, feeds)):
            assert a.dtype == e.dtype and a.shape == e.shape, (name, sizes, result.fired)
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4, err_msg=f"{name} {sizes}")
