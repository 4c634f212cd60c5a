"""The engine's memo of hook results: repeated layers reuse them, results never change."""

from __future__ import annotations

import pathlib

import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import expr
from onnx_symdims.passes import _inference
from tests.engine._engine_testing import dims, model

DATA = pathlib.Path(__file__).parent.parent / "data"


def _layer(i: int, x: str) -> str:
    return f"""
    s{i} = Shape({x})
    b{i} = Gather<axis=0>(s{i}, zero)
    t{i} = Gather<axis=0>(s{i}, one)
    bu{i} = Unsqueeze(b{i}, ax0)
    tu{i} = Unsqueeze(t{i}, ax0)
    target{i} = Concat<axis=0>(bu{i}, tu{i}, heads)
    r{i} = Reshape({x}, target{i})
    p{i} = Transpose<perm=[0, 2, 1, 3]>(r{i})
    q{i} = Transpose<perm=[0, 2, 1, 3]>(p{i})
    f{i} = Reshape(q{i}, flat)
    h{i} = MatMul(f{i}, W)
    x{i + 1} = Add(h{i}, {x})
    """


LAYERS = (
    "g (float[batch, seq, 8] x0, float[8, 8] W) => (float[batch, seq, 8] x3)"
    " <int64 zero = {0}, int64 one = {1}, int64[1] ax0 = {0}, int64[2] heads = {2, 4},"
    " int64[3] flat = {0, 0, 8}> {" + "".join(_layer(i, f"x{i}") for i in range(3)) + "}"
)


def _written(m: ir.Model) -> dict[str, list]:
    """Every value's written dims and dtype (by name)."""
    found = {}
    for node in ir.traversal.RecursiveGraphIterator(m.graph):
        for value in node.outputs:
            shape = value.shape
            found[value.name] = (
                None
                if shape is None
                else [d if isinstance(d, int) else d.value for d in shape],
                value.dtype,
            )
    for value in m.graph.outputs:
        found[value.name] = (
            [d if isinstance(d, int) else d.value for d in value.shape],
            value.dtype,
        )
    return found


def _all_values(m: ir.Model) -> list[ir.Value]:
    values = [*m.graph.inputs, *m.graph.initializers.values()]
    for node in ir.traversal.RecursiveGraphIterator(m.graph):
        values.extend(node.outputs)
    return values


@pytest.fixture(autouse=True)
def _memo_in_small_models(monkeypatch):
    """The test models are small: memoize them anyway."""
    monkeypatch.setattr(_inference.InferenceEngine, "memo_min_nodes", 0)


def _run(m: ir.Model, memoize: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(_inference.InferenceEngine, "memoize", memoize)
    result = _inference.SymbolicShapeInferencePass()(m)
    ctx = result.context
    return {
        "written": _written(m),
        "constraints": ctx.constraints(),
        "bounds": ctx.less_equal_constraints(),
        "symbols": sorted(ctx.generated_symbols),
        "diagnostics": [str(d) for d in result.diagnostics],
        # Tables fill lazily (the memo reads more of them): compare what queries answer.
        "values": {v.name: (ctx.shape_of(v), ctx.value_of(v)) for v in _all_values(m)},
    }


def _replays(monkeypatch: pytest.MonkeyPatch) -> list[ir.Node]:
    replayed: list[ir.Node] = []
    original = _inference.InferenceEngine._replay

    def counting(self, node, entry):
        replayed.append(node)
        original(self, node, entry)

    monkeypatch.setattr(_inference.InferenceEngine, "_replay", counting)
    return replayed


def test_repeated_layers_reuse_hook_results(monkeypatch):
    replayed = _replays(monkeypatch)
    m = model(LAYERS)
    _inference.SymbolicShapeInferencePass()(m)
    # Layers 1 and 2 repeat layer 0 on the same shapes: all their nodes are replayed.
    assert len(replayed) >= 2 * 12
    assert {n.op_type for n in replayed} >= {"Shape", "Gather", "Concat", "Reshape", "MatMul"}
    assert dims(m, "r2") == ["batch", "seq", 2, 4]
    assert dims(m, "p2") == ["batch", 2, "seq", 4]
    assert dims(m, "x3") == ["batch", "seq", 8]


@pytest.mark.parametrize(
    "source",
    [LAYERS, *sorted(p.name for p in DATA.glob("*.onnx"))],
    ids=lambda s: s if s.endswith(".onnx") else "layers",
)
def test_memo_on_and_off_give_the_same_model(source, monkeypatch):
    def load() -> ir.Model:
        return model(LAYERS) if source is LAYERS else ir.load(DATA / source)

    assert _run(load(), True, monkeypatch) == _run(load(), False, monkeypatch)


def test_minted_symbols_are_never_shared():
    """A hook that mints a symbol is not memoized: two NonZero give two counts."""
    m = model("""g (float[N] x) => (int64[1, a] y, int64[1, b] z) {
        y1 = NonZero(x)
        z1 = NonZero(x)
        y = Identity(y1)
        z = Identity(z1)
    }""")
    result = _inference.SymbolicShapeInferencePass()(m)
    y, z = dims(m, "y1")[1], dims(m, "z1")[1]
    assert y != z
    assert result.context.is_generated(y)
    assert result.context.is_generated(z)


def test_fresh_dims_are_never_shared():
    """Equal input facts, different runtime data: each Reshape gets its own symbols."""
    m = model("""g (float[N] x, int64[2] s, int64[2] t) => (float[a, b] y, float[c, d] z) {
        y1 = Reshape(x, s)
        z1 = Reshape(x, t)
        y = Identity(y1)
        z = Identity(z1)
    }""")
    result = _inference.SymbolicShapeInferencePass()(m)
    y, z = dims(m, "y1"), dims(m, "z1")
    assert set(y).isdisjoint(z)
    assert all(result.context.is_generated(d) for d in y + z)


def test_float_constants_are_not_keyed_away():
    """Range reads float constants (not values as shape): equal shapes, different sizes."""
    m = model("""g (float[N] x) => (float[a] y, float[b] z)
        <float s = {0.0}, float d = {1.0}, float l1 = {5.0}, float l2 = {10.0}> {
        y1 = Range(s, l1, d)
        z1 = Range(s, l2, d)
        y = Identity(y1)
        z = Identity(z1)
    }""")
    _inference.SymbolicShapeInferencePass()(m)
    assert [dims(m, "y1"), dims(m, "z1")] == [[5], [10]]


def test_attributes_are_part_of_the_key():
    m = model("""g (float[A, B, C] x) => (float[C, A, B] y, float[B, C, A] z) {
        y = Transpose<perm=[2, 0, 1]>(x)
        z = Transpose<perm=[1, 2, 0]>(x)
    }""")
    _inference.SymbolicShapeInferencePass()(m)
    assert dims(m, "y") == ["C", "A", "B"]
    assert dims(m, "z") == ["B", "C", "A"]


def test_small_models_are_not_memoized(monkeypatch):
    monkeypatch.undo()  # the default threshold
    replayed = _replays(monkeypatch)
    m = model(LAYERS)
    _inference.SymbolicShapeInferencePass()(m)
    assert replayed == []
    assert dims(m, "x3") == ["batch", "seq", 8]


def test_pipeline_output_is_the_same_without_memo(monkeypatch):
    """The anchor pass sees the same context either way (renames included)."""
    path = DATA / "gpt2_kv_legacy.onnx"
    monkeypatch.setattr(_inference.InferenceEngine, "memoize", True)
    with_memo = _written(onnx_symdims.infer_symbolic_shapes(ir.load(path)))
    monkeypatch.setattr(_inference.InferenceEngine, "memoize", False)
    without = _written(onnx_symdims.infer_symbolic_shapes(ir.load(path)))
    assert with_memo == without


def test_unknown_elements_are_never_shared():
    """An unknown element stands for one runtime value: equal facts of ``u`` and ``v``
    do not make their contents equal, so the two Concats must not share one."""
    m = model("""g (float[N, 3] x, int64[1] u, int64[1] v) => (int64[2] c1, int64[2] c2) {
        s = Shape<end=1>(x)
        c1 = Concat<axis=0>(s, u)
        c2 = Concat<axis=0>(s, v)
    }""")
    result = _inference.SymbolicShapeInferencePass()(m)
    first, second = result.context.value_as_shape("c1"), result.context.value_as_shape("c2")
    assert first[0] is second[0] is expr.sym("N")
    assert first[1].is_unknown and second[1].is_unknown
    assert first[1] is not second[1]
