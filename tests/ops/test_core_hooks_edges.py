"""Edge cases of the core shape hooks against onnxruntime (a soundness hunt's reproducers).

Each case is a small graph over ``x[N, M]`` (fed float data, see
``tests/fuzz/oracle.py``), checked by ``oracle.check_case`` on sizes 0, 1 and more.
The open ones are ``xfail(strict=True)``: the engine writes a dim that onnxruntime's
successful run contradicts. Where onnxruntime departs from the ONNX spec, the reason
says so: the engine should then write only what holds under both (a fresh symbol or an
unknown rank), as it does for a backward ``Slice`` ending at ``INT64_MAX``.
"""

from __future__ import annotations

import pytest

from tests.fuzz import oracle

HEADER = '<ir_version: 10, opset_import: ["" : {opset}]>\n'
BINDINGS = [{"N": n, "M": m} for n in (0, 1, 2) for m in (1, 2)]

_SQUEEZE_EMPTY = (
    "onnxruntime squeezes every size-1 dim when Squeeze's axes input is an empty "
    "tensor (as if absent); the reference evaluator and onnx's shape inference squeeze "
    "none: the engine keeps [N, M] (shape_ops.infer_squeeze / "
    "_squeezed_by_runtime_axes count == 0), false when N or M is 1 in onnxruntime"
)

_SQUEEZE_EMPTY_ATTRIBUTE = (
    "Squeeze-11 with axes=[] (an empty attribute): onnxruntime and the reference "
    "evaluator both squeeze every size-1 dim, as without axes; the engine reads the "
    "empty list as 'no axis' and keeps [N, M] (shape_ops._axes_input_or_attr gives "
    "given=True for an empty attribute)"
)

_PRELU = (
    "PRelu whose slope does not broadcast to X unidirectionally: onnxruntime and the "
    "reference evaluator broadcast both ways (x[1, 2], slope[2, 1] -> [2, 2]); the "
    "engine writes X's shape (elementwise.infer_prelu), false when N or M is 1"
)

OPEN = [
    pytest.param(
        "prelu_slope_broadcasts_both_ways",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        t = Transpose(x)
        y = PRelu(x, t) }
        """,
        marks=pytest.mark.xfail(strict=True, reason=_PRELU),
    ),
    pytest.param(
        "squeeze11_empty_axes_attribute",
        11,
        """
        g (float[N,M] x) => (float[] y) { y = Squeeze<axes: ints = []>(x) }
        """,
        marks=pytest.mark.xfail(strict=True, reason=_SQUEEZE_EMPTY_ATTRIBUTE),
    ),
    pytest.param(
        "squeeze_empty_constant_axes",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        e = Constant<value=int64[0] {}>()
        y = Squeeze(x, e) }
        """,
        marks=pytest.mark.xfail(strict=True, reason=_SQUEEZE_EMPTY),
    ),
    pytest.param(
        "squeeze_empty_axes_from_shape",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        s = Shape(x)
        z = Constant<value=int64[1] {0}>()
        e = Slice(s, z, z)
        y = Squeeze(x, e) }
        """,
        marks=pytest.mark.xfail(strict=True, reason=_SQUEEZE_EMPTY),
    ),
    pytest.param(
        "squeeze_empty_axes_at_runtime",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        c = Cast<to=7>(x)
        f = Flatten<axis=0>(c)
        z = Constant<value=int64[1] {0}>()
        o = Constant<value=int64[1] {1}>()
        e1 = Slice(f, z, z, o)
        m1 = Constant<value=int64[1] {-1}>()
        e = Reshape(e1, m1)
        y = Squeeze(x, e) }
        """,
        marks=pytest.mark.xfail(strict=True, reason=_SQUEEZE_EMPTY),
    ),
]


@pytest.mark.parametrize(("name", "opset", "graph"), OPEN)
def test_core_hook_edge_matches_onnxruntime(name: str, opset: int, graph: str) -> None:
    case = oracle.case_from_text(HEADER.format(opset=opset) + graph, BINDINGS)
    outcome = oracle.check_case_quietly(case)
    assert not outcome.findings, "\n\n".join(oracle.report(case, f) for f in outcome.findings)
    assert outcome.runs, f"{name}: no binding ran in onnxruntime: {outcome}"
