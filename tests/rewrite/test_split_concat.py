"""SlicesToSplitPass and FlattenConcatsPass: fire on proofs, decline without, same outputs."""

from __future__ import annotations

import pytest

from onnx_symdims.rewrite import analyze
from onnx_symdims.rewrite._layout import FlattenConcatsPass
from onnx_symdims.rewrite._split import SlicesToSplitPass
from tests.rewrite._rewrite_testing import (
    assert_equivalent,
    cleanup,
    constant_array,
    model,
    ops,
    proto,
)

SIZES_N = [{"N": 0}, {"N": 1}, {"N": 3}]


def _run(pass_type, body: str, opset: int = 18):
    m = model(body, opset)
    before = proto(m)
    p = pass_type(analyze(m))
    p(m)
    cleanup(m)
    return before, m, p


def _slice(name: str, start: int, end: int, axis: int = 1, step: int | None = None) -> str:
    steps = f", {name}_p" if step is not None else ""
    step_node = (
        f"{name}_p = Constant<value = int64[1] {{{step}}}>()\n" if step is not None else ""
    )
    return f"""
        {name}_s = Constant<value = int64[1] {{{start}}}>()
        {name}_e = Constant<value = int64[1] {{{end}}}>()
        {name}_a = Constant<value = int64[1] {{{axis}}}>()
        {step_node}
        {name} = Slice(x, {name}_s, {name}_e, {name}_a{steps})
    """


def _slices_graph(width: int, *slices: str) -> str:
    names = [s.split("=")[-2].split()[-1] for s in slices]
    body = "\n".join(slices)
    tail = "\n".join(f"r{i} = Relu({n})" for i, n in enumerate(names))
    outs = ", ".join(f"float r{i}" for i in range(len(names)))
    return f"""
        g (float[N, {width}] x) => ({outs}) {{
            {body}
            {tail}
        }}
    """


SPLITS = {
    # rotate_half: two halves of the last axis.
    "halves": (_slices_graph(8, _slice("a", 0, 4), _slice("b", 4, 100)), [4, 4]),
    # An odd axis splits where the slices do, not in equal parts.
    "odd_axis": (_slices_graph(7, _slice("a", 0, 3), _slice("b", 3, 7)), [3, 4]),
    "negative_bounds_and_axis": (
        _slices_graph(6, _slice("a", -6, -4, axis=-1), _slice("b", -4, 6, axis=-1)),
        [2, 4],
    ),
    "three_parts_explicit_steps": (
        _slices_graph(
            6, _slice("a", 0, 1, step=1), _slice("b", 1, 3, step=1), _slice("c", 3, 6, step=1)
        ),
        [1, 2, 3],
    ),
}


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("case", sorted(SPLITS))
def test_slices_partitioning_an_axis_become_one_split(case, opset):
    body, sizes = SPLITS[case]
    before, after, p = _run(SlicesToSplitPass, body, opset)
    assert p.fired == {"slices_to_split": len(sizes)}, p.declined
    assert ops(after).count("Split") == 1 and "Slice" not in ops(after)
    (split,) = (n for n in after.graph if n.op_type == "Split")
    assert constant_array(split.inputs[1]).tolist() == sizes
    assert_equivalent(before, after, SIZES_N)


def test_slices_to_split_before_opset_13_uses_the_attribute():
    body, sizes = SPLITS["halves"]
    before, after, _ = _run(SlicesToSplitPass, body, opset=11)
    (split,) = (n for n in after.graph if n.op_type == "Split")
    assert list(split.attributes["split"].as_ints()) == sizes
    assert_equivalent(before, after, SIZES_N)


SPLIT_DECLINES = {
    "gap": (_slices_graph(8, _slice("a", 0, 3), _slice("b", 4, 8)), "do not partition"),
    "overlap": (_slices_graph(8, _slice("a", 0, 5), _slice("b", 4, 8)), "do not partition"),
    "short_of_the_end": (_slices_graph(8, _slice("a", 0, 4), _slice("b", 4, 7)), "partition"),
    "duplicate": (
        _slices_graph(8, _slice("a", 0, 4), _slice("b", 0, 4), _slice("c", 4, 8)),
        "do not partition",
    ),
    "empty_slice": (
        _slices_graph(8, _slice("a", 0, 8), _slice("b", 8, 8)),
        "do not partition",
    ),
    "graph_output": (
        """
        g (float[N, 8] x) => (float r0, float b) {
        """
        + _slice("a", 0, 4)
        + _slice("b", 4, 8)
        + """
            r0 = Relu(a)
        }
        """,
        "graph output",
    ),
}


@pytest.mark.parametrize("case", sorted(SPLIT_DECLINES))
def test_slices_to_split_declines(case):
    body, reason = SPLIT_DECLINES[case]
    _, after, p = _run(SlicesToSplitPass, body)
    assert p.fired == {}
    assert [r for r in p.declined if reason in r], p.declined
    assert "Split" not in ops(after)


@pytest.mark.parametrize(
    "body",
    [
        _slices_graph(8, _slice("a", 0, 4, step=2), _slice("b", 4, 8)),  # step 2
        _slices_graph(8, _slice("a", 0, 4, axis=0), _slice("b", 4, 8, axis=0)),  # N axis
    ],
    ids=["step_two", "symbolic_axis"],
)
def test_slices_without_a_proven_interval_are_left_alone(body):
    _, after, p = _run(SlicesToSplitPass, body)
    assert p.fired == {}
    assert ops(after).count("Slice") == 2


# ------------------------------------------------------------------------------------
# FlattenConcatsPass
# ------------------------------------------------------------------------------------
def _concat_graph(inner_axis: int, outer_axis: int, extra_use: bool = False) -> str:
    use = "w = Relu(i)" if extra_use else ""
    outs = "float[N, ?] y, float[N, ?] w" if extra_use else "float[N, ?] y"
    return f"""
        g (float[N, 2] a, float[N, 3] b, float[N, 4] c) => ({outs}) {{
            i = Concat<axis = {inner_axis}>(b, c)
            o = Concat<axis = {outer_axis}>(a, i, b)
            y = Relu(o)
            {use}
        }}
    """


@pytest.mark.parametrize(("inner", "outer"), [(1, 1), (-1, 1), (1, -1), (-1, -1)])
def test_nested_concats_on_one_axis_are_flattened(inner, outer):
    before, after, p = _run(FlattenConcatsPass, _concat_graph(inner, outer))
    assert p.fired == {"flatten_concat": 1}
    (concat,) = (n for n in after.graph if n.op_type == "Concat")
    assert [v.name for v in concat.inputs] == ["a", "b", "c", "b"]
    assert_equivalent(before, after, SIZES_N)


@pytest.mark.parametrize(
    "body",
    [
        """
        g (float[2, 3] a, float[2, 3] b) => (float[?, ?] y) {
            i = Concat<axis = 0>(a, b)
            o = Concat<axis = 1>(i, i)
            y = Relu(o)
        }
        """,
        _concat_graph(1, 1, extra_use=True),
        """
        g (float[2, 3] a, float[2, 3] b) => (float[?, ?] y) {
            i = Concat<axis = 0>(a, b)
            o = Concat<axis = 1>(i, a)
            y = Relu(o)
        }
        """,
    ],
    ids=["inner_used_twice", "inner_used_elsewhere", "other_axis"],
)
def test_concats_that_cannot_be_flattened_are_left_alone(body):
    _, after, p = _run(FlattenConcatsPass, body)
    assert p.fired == {}
    assert ops(after).count("Concat") == 2


def test_slices_of_two_axes_without_axes_are_left_alone():
    """``Slice(x, [0, 0], [1, 2])`` without axes slices axes 0 and 1; reading only its
    first start and end (axis 0) would see a partition of axis 0 by the two slices and
    drop their cuts of axis 1 (found by a mutation audit)."""
    body = """
        g (float[2, 4] x) => (float[?, ?] r0, float[?, ?] r1) {
            a_s = Constant<value = int64[2] {0, 0}>()
            a_e = Constant<value = int64[2] {1, 2}>()
            a = Slice(x, a_s, a_e)
            b_s = Constant<value = int64[2] {1, 1}>()
            b_e = Constant<value = int64[2] {2, 4}>()
            b = Slice(x, b_s, b_e)
            r0 = Relu(a)
            r1 = Relu(b)
        }
    """
    before, after, p = _run(SlicesToSplitPass, body)
    assert p.fired == {}
    assert ops(after).count("Slice") == 2
    assert_equivalent(before, after, [{}])
