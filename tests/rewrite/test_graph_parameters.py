"""optimize() on model-local functions whose bodies take graphs from the call.

onnx-ir's inliner refuses them and its passes fail on the body's reference (it holds no
graph): optimize inlined nothing and ended in an internal error. Now onnx's inliner
inlines them, or (``inline=False``) they stay calls, untouched by the passes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

import onnx_symdims
from onnx_symdims import cli
from onnx_symdims.rewrite._graph_parameters import graph_parameter_functions
from tests.rewrite._rewrite_testing import proto, session

# F(c, x): If(c) with both branches given by the call. The then-branch expands x to its
# own shape (a no-op our rules remove once the branch is inlined).
_MODEL = """
<ir_version: 10, opset_import: ["" : 18, "local" : 1]>
g (bool c, float[N, 3] x) => (float[N, 3] y) {
    y = local.F <then_branch: graph = t () => (float[N, 3] ty) {
            s = Shape(x)
            e = Expand(x, s)
            ty = Relu(e)
        }, else_branch: graph = f () => (float[N, 3] fy) {
            fy = Neg(x)
        }> (c, x)
}
<domain: "local", opset_import: ["" : 18]>
F <then_branch, else_branch> (c, x) => (y) {
    y = If <then_branch: graph = @then_branch, else_branch: graph = @else_branch> (c)
}
"""


def _model() -> ir.Model:
    return ir.from_onnx_text(_MODEL)


def _assert_same_outputs(before: onnx.ModelProto, after: onnx.ModelProto) -> None:
    original, optimized = session(before), session(after)
    rng = np.random.default_rng(0)
    for n in (0, 1, 4):
        for c in (True, False):
            feeds = {"c": np.array(c), "x": rng.standard_normal((n, 3)).astype(np.float32)}
            expected = original.run(None, feeds)
            actual = optimized.run(None, feeds)
            np.testing.assert_array_equal(actual[0], expected[0], err_msg=f"N={n}, c={c}")


def test_the_function_is_recognised():
    m = _model()
    assert [key[1] for key in graph_parameter_functions(m)] == ["F"]


def test_a_function_taking_graphs_is_inlined_and_optimized():
    m = _model()
    before = proto(m)
    result = onnx_symdims.optimize(m)
    assert not result.functions
    (node,) = result.graph
    assert node.op_type == "If"
    then_ops = [n.op_type for n in node.attributes["then_branch"].as_graph()]
    assert then_ops == ["Relu"]  # the call's graph, optimized after inlining
    assert list(result.graph.outputs[0].shape) == ["N", 3]
    _assert_same_outputs(before, proto(result))


def test_without_inlining_the_function_and_its_call_stay():
    m = _model()
    before = proto(m)
    result = onnx_symdims.optimize(m, inline=False)
    assert [key[1] for key in result.functions] == ["F"]
    assert [n.op_type for n in result.graph] == ["F"]
    _assert_same_outputs(before, proto(result))


def test_the_cli_optimizes_and_verifies_it(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(proto(_model()), path)
    args = ["optimize", str(path), "-o", str(tmp_path / "o.onnx"), "--verify", "2", "-q"]
    assert cli.main(args) == 0
    assert "internal error" not in capsys.readouterr().err
