"""ProvenValuesPass: proven integer values published as constants, shape chains rebuilt.

Every firing case is run before and after in onnxruntime on several sizes (0 and 1
included) and must give equal outputs; every declining case names its reason.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims.rewrite import ProvenValuesPass, analyze
from tests.rewrite._rewrite_testing import (
    assert_equivalent,
    cleanup,
    constant_array,
    model,
    ops,
    proto,
    reshape_targets,
    run,
)

SIZES_N = [{"N": 0}, {"N": 1}, {"N": 3}]
SIZES_NM = [{"N": 0, "M": 2}, {"N": 1, "M": 1}, {"N": 3, "M": 0}, {"N": 2, "M": 5}]


def _run_pass(body: str, **options):
    m = model(body)
    before = proto(m)
    values = ProvenValuesPass(analyze(m), **options)
    values(m)
    cleanup(m)
    return before, m, values


# ------------------------------------------------------------------------------------
# Publishing proven values
# ------------------------------------------------------------------------------------
PUBLISH = {
    "shape_gather_unsqueeze_concat_of_static_dims": (
        """
        g (float[N, 4, 5] x) => (float[N, 20] y) {
            s = Shape(x)
            i1 = Constant<value = int64 {1}>()
            i2 = Constant<value = int64 {2}>()
            a = Gather(s, i1)
            b = Gather(s, i2)
            z = Constant<value = int64[1] {0}>()
            ua = Unsqueeze(a, z)
            ub = Unsqueeze(b, z)
            p = Mul(ua, ub)
            m1 = Constant<value = int64[1] {-1}>()
            t = Concat<axis = 0>(m1, p)
            y = Reshape(x, t)
        }
        """,
        "publish",
        ["Reshape"],
    ),
    # TorchScript's idiom for the target of an Expand: -1 entries mean "keep".
    "where_equal_minus_one_torchscript_idiom": (
        """
        g (float[N, 1, 5] x) => (float[N, 4, 5] y) {
            s4 = Shape<start = 1>(x)
            four = Constant<value = int64[2] {4, 1}>()
            s = Mul(s4, four)
            neg = Constant<value = int64 {-1}>()
            one = Constant<value = int64 {1}>()
            eq = Equal(s, neg)
            w = Where(eq, one, s)
            y = Expand(x, w)
        }
        """,
        "publish",
        ["Expand"],
    ),
    "constant_of_shape_of_a_proven_shape": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            s = Shape<start = 1>(x)
            c = ConstantOfShape<value = float[1] {2.5}>(s)
            y = Mul(x, c)
        }
        """,
        "constant_of_shape",
        ["Mul"],
    ),
    "constant_of_shape_default_fill": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            s = Shape<start = 1>(x)
            c = ConstantOfShape(s)
            y = Add(x, c)
        }
        """,
        "constant_of_shape",
        ["Add"],
    ),
}


@pytest.mark.parametrize("case", sorted(PUBLISH))
def test_publish_fires_and_keeps_outputs(case):
    body, what, remaining = PUBLISH[case]
    before, after, values = _run_pass(body)
    assert values.fired[what] >= 1, (values.fired, values.declined)
    assert ops(after) == remaining
    assert_equivalent(before, after, SIZES_N)


def test_published_reshape_target_is_the_proven_value():
    _, after, _ = _run_pass(PUBLISH["shape_gather_unsqueeze_concat_of_static_dims"][0])
    assert reshape_targets(after) == [[-1, 20]]


def test_published_where_idiom_is_the_target_without_minus_one():
    _, after, _ = _run_pass(PUBLISH["where_equal_minus_one_torchscript_idiom"][0])
    (expand,) = (n for n in after.graph if n.op_type == "Expand")
    assert constant_array(expand.inputs[1]).tolist() == [4, 5]


DECLINE = {
    "constant_of_shape_too_large": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            s = Shape<start = 1>(x)
            c = ConstantOfShape<value = float[1] {2.5}>(s)
            y = Mul(x, c)
        }
        """,
        {"max_constant_elements": 3},
        "constant_of_shape: larger than max_constant_elements",
        "ConstantOfShape",
    ),
}


@pytest.mark.parametrize("case", sorted(DECLINE))
def test_publish_declines_with_reason(case):
    body, options, reason, kept = DECLINE[case]
    before, after, values = _run_pass(body, **options)
    assert values.declined[reason] == 1, values.declined
    assert kept in ops(after)
    # What was rewritten around the declined node still computes the same.
    assert_equivalent(before, after, SIZES_N)


def test_a_graph_output_is_not_published():
    """``s`` is proven ``[4]`` but is a graph output (also read by the Expand): it keeps its
    node (found by a mutation audit: only fuzz seed 100044 had a used integer output)."""
    body = """
        g (float[N, 4] x) => (float[N, 4] y, int64[1] s) {
            s = Shape<start = 1>(x)
            y = Expand(x, s)
        }
    """
    before, after, values = _run_pass(body)
    assert not values.fired
    assert ops(after) == ["Shape", "Expand"]
    assert_equivalent(before, after, SIZES_N)


NOT_FROM_INPUTS = """
        g (float[N, M, 4] x) => (float[4, ?] y) {
            s = Shape(x)
            i0 = Constant<value = int64 {0}>()
            i1 = Constant<value = int64 {1}>()
            a = Gather(s, i0)
            b = Gather(s, i1)
            ab = Mul(a, b)
            z = Constant<value = int64[1] {0}>()
            u = Unsqueeze(ab, z)
            c = Constant<value = int64[1] {4}>()
            t = Concat<axis = 0>(c, u)
            y = Reshape(x, t)
        }
"""


# Elements that do not fit the dtype: onnxruntime wraps them; a published constant must
# not hold the exact arithmetic (ProvenValuesPass also checks each element's range).
OUT_OF_RANGE = {
    # int32 arithmetic: 4 * 2e9 does not fit; onnxruntime wraps it.
    "int32_element_out_of_range": (
        """
        g (float[N, 4] x) => (int32[1] y) {
            s = Shape<start = 1>(x)
            s32 = Cast<to = 6>(s)
            k = Constant<value = int32[1] {2000000000}>()
            y1 = Mul(s32, k)
            y = Relu(y1)
        }
        """,
        "Mul",
    ),
    "uint8_element_out_of_range": (
        """
        g (float[N, 4] x) => (uint8[1] y) {
            s = Shape<start = 1>(x)
            s8 = Cast<to = 2>(s)
            k = Constant<value = uint8[1] {100}>()
            y1 = Mul(s8, k)
            y = Identity(y1)
        }
        """,
        "Mul",
    ),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_out_of_range_elements_are_not_published(case):
    body, kept = OUT_OF_RANGE[case]
    before, after, _ = _run_pass(body)
    assert kept in ops(after)
    assert_equivalent(before, after, SIZES_N)


def test_symbolic_elements_not_from_inputs_are_not_published_nor_rebuilt():
    # t = [4, N*M]: N*M is no bare input dim, so neither a constant nor a Shape slice.
    _, after, values = _run_pass(NOT_FROM_INPUTS)
    assert values.fired == {}, values.fired
    assert any("not a dim" in reason for reason in values.declined), values.declined
    assert reshape_targets(after) == [None]
    assert ops(after) == ops(model(NOT_FROM_INPUTS))


# ------------------------------------------------------------------------------------
# Rebuilding shape chains
# ------------------------------------------------------------------------------------
def test_rebuild_chain_fires_when_it_saves_nodes():
    before, after, values = _run_pass(
        """
        g (float[N, M, 4] x) => (float[N, M, 2, 2] y) {
            s = Shape(x)
            i0 = Constant<value = int64 {0}>()
            i1 = Constant<value = int64 {1}>()
            a = Gather(s, i0)
            b = Gather(s, i1)
            z = Constant<value = int64[1] {0}>()
            ua = Unsqueeze(a, z)
            ub = Unsqueeze(b, z)
            c = Constant<value = int64[2] {2, 2}>()
            t = Concat<axis = 0>(ua, ub, c)
            y = Reshape(x, t)
        }
        """
    )
    assert values.fired == {"rebuild_chain": 1}
    assert ops(after) == ["Shape", "Concat", "Reshape"]
    (shape,) = (n for n in after.graph if n.op_type == "Shape")
    assert (shape.attributes["start"].as_int(), shape.attributes["end"].as_int()) == (0, 2)
    assert_equivalent(before, after, SIZES_NM)


def test_rebuild_chain_declines_when_it_saves_nothing():
    # Concat(Shape(x, 0, 1), [2, 2]) is already the shortest chain.
    _, after, values = _run_pass(
        """
        g (float[N, 4] x) => (float[N, 2, 2] y) {
            s = Shape<start = 0, end = 1>(x)
            c = Constant<value = int64[2] {2, 2}>()
            t = Concat<axis = 0>(s, c)
            y = Reshape(x, t)
        }
        """
    )
    assert values.fired == {}
    assert values.declined == {"rebuild_chain: removes no more nodes than it adds": 2}
    assert ops(after) == ["Shape", "Concat", "Reshape"]


def test_rebuild_chain_of_a_scalar_ends_in_squeeze():
    before, after, values = _run_pass(
        """
        g (float[N, 4] x) => (int64[N] y) {
            s = Shape(x)
            i0 = Constant<value = int64 {0}>()
            a = Gather(s, i0)
            z = Constant<value = int64[1] {0}>()
            u = Unsqueeze(a, z)
            q = Squeeze(u, z)
            zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            y = Range(zero, q, one)
        }
        """
    )
    assert values.fired == {"rebuild_chain": 1}
    assert ops(after) == ["Shape", "Squeeze", "Range"]
    assert_equivalent(before, after, SIZES_N)


TWO_INPUTS = """
    g (float[N, 4] x, float[N, 3] w) => (float[N, 4] y1, float[N, 3, 1] y2) {
        y1 = Relu(x)
        s = Shape(w)
        i0 = Constant<value = int64 {0}>()
        i1 = Constant<value = int64 {1}>()
        a = Gather(s, i0)
        b = Gather(s, i1)
        z = Constant<value = int64[1] {0}>()
        ua = Unsqueeze(a, z)
        ub = Unsqueeze(b, z)
        c = Constant<value = int64[1] {1}>()
        t = Concat<axis = 0>(ua, ub, c)
        y2 = Reshape(w, t)
    }
"""


def test_rebuild_chain_with_two_inputs_sharing_a_dim_name():
    # N is declared on x and on w: the rebuilt chain reads it from one Shape slice.
    before, after, values = _run_pass(TWO_INPUTS)
    assert values.fired == {"rebuild_chain": 1}
    assert ops(after).count("Shape") == 1
    assert_equivalent(before, after, [{"N": 0}, {"N": 1}, {"N": 4}])


def test_rebuild_chain_reads_the_dim_from_the_input_the_chain_read():
    """onnxruntime does not check that inputs sharing a dim name agree: the rebuilt chain
    reads the dim from the tensor the original chain read, so such feeds stay exact."""
    before, after, _ = _run_pass(TWO_INPUTS)
    feeds = {"x": np.zeros((2, 4), np.float32), "w": np.ones((3, 3), np.float32)}
    expected = run(before, feeds)  # onnxruntime accepts N=2 on x and N=3 on w
    actual = run(after, feeds)
    assert [a.shape for a in actual] == [e.shape for e in expected]


# Every second row and column of x has [N, C, (H+1)//2, (W+1)//2]; the target recomputes
# those from x's dims by arithmetic (no tensor the chain reads has them): they are read
# from the strided slice.
FROM_A_TENSOR_BEFORE = """
    g (float[N, C, H, W] x) => (float[?, ?, ?, ?] y) {
        i0 = Constant<value = int64[1] {0}>()
        i1 = Constant<value = int64[1] {1}>()
        i2 = Constant<value = int64[1] {2}>()
        i3 = Constant<value = int64[1] {3}>()
        i4 = Constant<value = int64[1] {4}>()
        zeros = Constant<value = int64[2] {0, 0}>()
        ends = Constant<value = int64[2] {9223372036854775807, 9223372036854775807}>()
        axes = Constant<value = int64[2] {2, 3}>()
        steps = Constant<value = int64[2] {2, 2}>()
        p = Slice(x, zeros, ends, axes, steps)
        t = Transpose<perm = [0, 1, 3, 2]>(p)
        s = Shape(x)
        nc = Slice(s, i0, i2)
        h = Slice(s, i2, i3)
        w = Slice(s, i3, i4)
        h1 = Add(h, i1)
        w1 = Add(w, i1)
        h2 = Div(h1, i2)
        w2 = Div(w1, i2)
        target = Concat<axis = 0>(nc, h2, w2)
        y = Reshape(t, target)
    }
"""


def test_rebuild_chain_reads_a_dim_from_a_tensor_computed_before_it():
    before, after, values = _run_pass(FROM_A_TENSOR_BEFORE)
    assert values.fired == {"rebuild_chain": 1}
    shapes = [n for n in after.graph if n.op_type == "Shape"]
    assert sorted(n.inputs[0].name for n in shapes) == ["p", "x"]
    assert "Div" not in ops(after)
    sizes = [
        {"N": 0, "C": 2, "H": 4, "W": 6},
        {"N": 2, "C": 1, "H": 5, "W": 3},
        {"N": 1, "C": 3, "H": 0, "W": 0},
        {"N": 1, "C": 1, "H": 1, "W": 1},
    ]
    assert_equivalent(before, after, sizes)


def test_rebuild_chain_never_reads_a_dim_from_a_tensor_computed_after_it():
    # Without the slice, (H+1)//2 first appears on the output of the node the target feeds.
    body = (
        FROM_A_TENSOR_BEFORE.replace("p = Slice(x, zeros, ends, axes, steps)", "")
        .replace("t = Transpose<perm = [0, 1, 3, 2]>(p)", "")
        .replace("y = Reshape(t, target)", "y = ConstantOfShape(target)")
    )
    _, after, values = _run_pass(body)
    assert "rebuild_chain" not in values.fired
    assert (
        values.declined[
            "rebuild_chain: an element is not a dim of a tensor computed before it"
        ]
        >= 1
    )
    assert "Div" in ops(after)


# ------------------------------------------------------------------------------------
# Narrow integer dtypes: the facts are the exact arithmetic, onnxruntime wraps
# ------------------------------------------------------------------------------------
WRAPPING = {
    # 4 * 100 = 400 in uint8 is 144 at run time; Cast to int64 keeps 144.
    "uint8_mul_then_cast_to_int64": """
        g (float[N, 4] x) => (int64[1] y) {
            s = Shape<start = 1>(x)
            s8 = Cast<to = 2>(s)
            k = Constant<value = uint8[1] {100}>()
            p = Mul(s8, k)
            y1 = Cast<to = 7>(p)
            y = Identity(y1)
        }
    """,
    # 4 * 2e9 wraps in int32; dividing by 8 lands back in range with another value.
    "int32_mul_then_div": """
        g (float[N, 4] x) => (int32[1] y) {
            s = Shape<start = 1>(x)
            s32 = Cast<to = 6>(s)
            k = Constant<value = int32[1] {2000000000}>()
            p = Mul(s32, k)
            d = Constant<value = int32[1] {8}>()
            y1 = Div(p, d)
            y = Identity(y1)
        }
    """,
}


@pytest.mark.parametrize("case", sorted(WRAPPING))
def test_overflowing_narrow_integer_values_are_not_published_wrong(case):
    before, after, _ = _run_pass(WRAPPING[case])
    assert_equivalent(before, after, SIZES_N)


# N * 65536 wraps in int32 from N = 32768 on; dividing back gives another value than N.
SYMBOLIC_INT32_WRAP = """
    g (float[N, 1] x) => (int64[2] y) {
        s = Shape(x)
        s32 = Cast<to = 6>(s)
        k = Constant<value = int32[1] {65536}>()
        p = Mul(s32, k)
        q = Div(p, k)
        q64 = Cast<to = 7>(q)
        d = Sub(q64, s)
        y = Identity(d)
    }
"""


def test_a_symbolic_int32_product_that_may_wrap_is_not_published_exact():
    before, after, _ = _run_pass(SYMBOLIC_INT32_WRAP)
    assert_equivalent(before, after, [{"N": 0}, {"N": 1}, {"N": 40000}])


# N * 2**62 wraps in int64 from N = 2 on (0 at N = 4), N * 2**61 from N = 4 on (-1 after
# dividing back at N = 7: fuzz seed 800360): dividing back does not give N. Every int64
# element is assumed in range only where its dims are tensor sizes.
SYMBOLIC_INT64_WRAP = """
    g (float[N, 1] x) => (int64[1] y) {
        s = Shape<end = 1>(x)
        k = Constant<value = int64[1] {%d}>()
        p = Mul(s, k)
        q = Div(p, k)
        y = Sub(q, s)
    }
"""


@pytest.mark.parametrize("power", [61, 62])
def test_a_symbolic_int64_product_that_may_wrap_is_not_published_exact(power):
    before, after, _ = _run_pass(SYMBOLIC_INT64_WRAP % 2**power)
    assert_equivalent(before, after, [{"N": 0}, {"N": 1}, {"N": 4}, {"N": 5}, {"N": 7}])


# ------------------------------------------------------------------------------------
# New pieces go before the graph's first node: that node may have died meanwhile
# ------------------------------------------------------------------------------------
# The walk goes last node first: publishing t = [-1, 4] kills Shape(x), the graph's first
# node; rebuilding c = [M, 3] afterwards inserts Shape(w) before it.
HEAD_DIES = """
    g (float[N, 4] x, float[M, 3] w) => (float[N, 4] y, float[M, 3] r) {
        s = Shape(x)
        i1 = Constant<value = int64 {1}>()
        g1 = Gather(s, i1)
        sw = Shape(w)
        i0 = Constant<value = int64 {0}>()
        gw = Gather(sw, i0)
        z = Constant<value = int64[1] {0}>()
        u = Unsqueeze(gw, z)
        three = Constant<value = int64[1] {3}>()
        c = Concat<axis = 0>(u, three)
        r = Reshape(w, c)
        m1 = Constant<value = int64[1] {-1}>()
        u1 = Unsqueeze(g1, z)
        t = Concat<axis = 0>(m1, u1)
        y = Reshape(x, t)
    }
"""


def test_rebuild_after_the_first_node_died():
    """Regression: new pieces were inserted before the graph's first node taken at the
    start of the walk, which publishing ``t`` had removed (a ValueError)."""
    before, after, values = _run_pass(HEAD_DIES)
    assert values.fired["rebuild_chain"] == 1
    assert_equivalent(before, after, SIZES_NM)


# ------------------------------------------------------------------------------------
# Found by a mutation audit: checks no other test exercised
# ------------------------------------------------------------------------------------
#: The chain of test_rebuild_chain_fires_when_it_saves_nodes, then {tail}.
_CHAIN = """
    g (float[N, M, 4] x) => ({outputs}) {{
        s = Shape(x)
        i0 = Constant<value = int64 {{0}}>()
        i1 = Constant<value = int64 {{1}}>()
        a = Gather(s, i0)
        b = Gather(s, i1)
        z = Constant<value = int64[1] {{0}}>()
        ua = Unsqueeze(a, z)
        ub = Unsqueeze(b, z)
        t = Concat<axis = 0>(ub, ua)
        {tail}
    }}
"""


def test_rebuild_chain_keeps_an_int32_value_int32():
    """``Cast<int32>([M, N])``: a ``Shape`` slice would be int64 (the Concat of the int32
    value and its copy would no longer type-check)."""
    body = _CHAIN.format(
        outputs="int32[4] y",
        tail="""t32 = Cast<to = 6>(t)
        y = Concat<axis = 0>(t32, t32)""",
    )
    before, after, values = _run_pass(body)
    assert values.fired == {"rebuild_chain": 1}  # the int64 [M, N] only
    assert "Cast" in ops(after)
    assert_equivalent(before, after, SIZES_NM)


def test_rebuild_chain_before_opset_15_keeps_the_chain():
    """``Shape(x, start, end)`` needs opset 15; before it the chain stays."""
    body = _CHAIN.format(outputs="float[?, ?, ?] y", tail="y = Reshape(x, t2)").replace(
        "t = Concat<axis = 0>(ub, ua)",
        """four = Constant<value = int64[1] {4}>()
        t2 = Concat<axis = 0>(ub, ua, four)""",
    )
    m = model(body, opset=14)
    before = proto(m)
    values = ProvenValuesPass(analyze(m))
    values(m)
    cleanup(m)
    assert values.fired == {}
    # (no 0: the target [M, N, 4] is read with allowzero=0)
    assert_equivalent(before, m, [{"N": n, "M": k} for n, k in ((1, 2), (1, 1), (2, 3))])
