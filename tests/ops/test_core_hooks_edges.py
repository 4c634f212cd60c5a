"""Edge cases of the core shape hooks against onnxruntime (a soundness hunt's reproducers).

Each case is a small graph over ``x[N, M]`` (fed float data, see
``tests/fuzz/oracle.py``), checked by ``oracle.check_case`` on sizes 0, 1 and more.
Each failed before its fix (the engine wrote a dim onnxruntime's successful run
contradicts, or called a valid node malformed); ``why`` says what was wrong. Where
onnxruntime departs from the ONNX spec, the engine writes only what holds under both (a
fresh symbol or an unknown rank), as for a backward ``Slice`` ending at ``INT64_MAX``.
"""

from __future__ import annotations

import pytest

from tests.fuzz import oracle
from tests.ops._ort_oracle import check_against_ort

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

_SQUEEZE_REPEATED = (
    "Squeeze with a repeated axis ([1, -2] on rank 3): onnxruntime squeezes it once and "
    "onnx's strict shape inference accepts it ([2, 1, 3] -> [2, 3]; only the numpy "
    "reference evaluator refuses); the engine calls the node malformed ('repeated axis') "
    "because shape_ops.infer_squeeze normalizes the axes with ctx.normalize_axes, which "
    "fails on a repeat (its own _squeezed_by_runtime_axes accepts repeats)"
)
CASES = [
    pytest.param(
        "squeeze11_repeated_axis",
        11,
        """
        g (float[N,M] x) => (float[] y) {
        u = Unsqueeze<axes=[1]>(x)
        y = Squeeze<axes=[1, -2]>(u) }
        """,
        _SQUEEZE_REPEATED,
    ),
    pytest.param(
        "prelu_slope_broadcasts_both_ways",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        t = Transpose(x)
        y = PRelu(x, t) }
        """,
        _PRELU,
    ),
    pytest.param(
        "squeeze11_empty_axes_attribute",
        11,
        """
        g (float[N,M] x) => (float[] y) { y = Squeeze<axes: ints = []>(x) }
        """,
        _SQUEEZE_EMPTY_ATTRIBUTE,
    ),
    pytest.param(
        "squeeze_empty_constant_axes",
        18,
        """
        g (float[N,M] x) => (float[] y) {
        e = Constant<value=int64[0] {}>()
        y = Squeeze(x, e) }
        """,
        _SQUEEZE_EMPTY,
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
        _SQUEEZE_EMPTY,
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
        _SQUEEZE_EMPTY,
    ),
]


@pytest.mark.parametrize(("name", "opset", "graph", "why"), CASES)
def test_core_hook_edge_matches_onnxruntime(
    name: str, opset: int, graph: str, why: str
) -> None:
    case = oracle.case_from_text(HEADER.format(opset=opset) + graph, BINDINGS)
    outcome = oracle.check_case_quietly(case)
    found = [oracle.report(case, f) for f in outcome.findings]
    assert not found, why + "\n\n" + "\n\n".join(found)
    assert outcome.runs, f"{name}: no binding ran in onnxruntime: {outcome}"


@pytest.mark.parametrize("axes", ["1, 1", "1, -2"])
def test_squeeze13_repeated_axis_matches_onnxruntime(axes: str) -> None:
    # The reference evaluator refuses a repeated axis, so the fuzz oracle skips these
    # runs; check_against_ort asks onnxruntime alone (and no error diagnostic).
    text = (
        HEADER.format(opset=18)
        + f"""
        g (float[N,M] x) => (float[] y) {{
        u = Constant<value=int64[1] {{1}}>()
        x3 = Unsqueeze(x, u)
        a = Constant<value=int64[2] {{{axes}}}>()
        y = Squeeze(x3, a) }}
    """
    )
    check_against_ort(text, [{"N": 2, "M": 3}, {"N": 0, "M": 1}])
