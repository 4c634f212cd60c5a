"""CollapseReshapeChainsPass: chains of Reshape/Squeeze/Unsqueeze/Flatten collapsed.

Firing cases run before and after in onnxruntime; declining cases name their reason,
and the ``-1`` decline is backed by what onnxruntime (and the spec) do with a ``-1``
next to a zero-size dim.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from onnx_symdims.rewrite import CollapseReshapeChainsPass
from tests.rewrite._rewrite_testing import (
    apply_pass,
    assert_equivalent,
    model,
    ops,
    reshape_targets,
    run,
)

FIRES = {
    "unsqueeze_of_squeeze_cancels": (
        """
        g (float[N, 1, 4] x) => (float[N, 1, 4] y) {
            a = Constant<value = int64[1] {1}>()
            s = Squeeze(x, a)
            u = Unsqueeze(s, a)
            y = Relu(u)
        }
        """,
        "chain_to_input",
        ["Relu"],
        None,
        [{"N": 0}, {"N": 1}, {"N": 3}],
    ),
    "reshape_back_to_the_input_shape": (
        """
        g (float[N, 4, 6] x) => (float[N, 4, 6] y) {
            t1 = Constant<value = int64[2] {0, 24}>()
            r1 = Reshape(x, t1)
            s = Shape(x)
            r2 = Reshape(r1, s)
            y = Relu(r2)
        }
        """,
        "chain_to_input",
        ["Relu"],
        None,
        [{"N": 0}, {"N": 1}, {"N": 3}],
    ),
    "reshape_of_reshape_to_one_constant_reshape": (
        """
        g (float[N, 4, 6] x) => (float[N, 24] y) {
            t1 = Constant<value = int64[4] {0, 2, 2, 6}>()
            r1 = Reshape(x, t1)
            t2 = Constant<value = int64[2] {0, 24}>()
            r2 = Reshape(r1, t2)
            y = Relu(r2)
        }
        """,
        "chain_to_reshape",
        ["Reshape", "Relu"],
        [[0, 24]],
        [{"N": 0}, {"N": 1}, {"N": 3}],
    ),
    "flatten_then_reshape_with_minus_one_next_to_ints": (
        """
        g (float[N, M, 6] x) => (float[?, 6] y) {
            f = Flatten<axis = 2>(x)
            t2 = Constant<value = int64[2] {-1, 6}>()
            r2 = Reshape(f, t2)
            y = Relu(r2)
        }
        """,
        "chain_to_reshape",
        ["Reshape", "Relu"],
        [[-1, 6]],
        [{"N": 0, "M": 2}, {"N": 1, "M": 1}, {"N": 3, "M": 0}, {"N": 2, "M": 3}],
    ),
    # A graph output keeps its Reshape (and its name); only the chain before it goes
    # (Swin's pooler: Squeeze of a [batch, 64, 1, 1] pooling, then Reshape to [-1, 64]).
    "graph_output_reshape_reads_the_chain_input": (
        """
        g (float[N, 64, 1, 1] x) => (float[N, 64] y) {
            a = Constant<value = int64[1] {3}>()
            s = Squeeze(x, a)
            t = Constant<value = int64[2] {-1, 64}>()
            y = Reshape<allowzero = 1>(s, t)
        }
        """,
        "chain_to_last_target",
        ["Reshape"],
        [[-1, 64]],
        [{"N": 0}, {"N": 1}, {"N": 3}],
    ),
    # Multi-query attention's one KV head: view(b, s, 1, d).transpose(1, 2) moves only
    # the size-1 axis (a reshape); [0, 1, -1, 16] cannot be read with N = 0: Unsqueeze.
    "view_then_transpose_of_a_size_one_axis": (
        """
        g (float[N, S, 16] x) => (float[N, 1, S, 16] y) {
            t = Constant<value = int64[4] {0, 0, 1, 16}>()
            r = Reshape(x, t)
            p = Transpose<perm = [0, 2, 1, 3]>(r)
            y = Relu(p)
        }
        """,
        "chain_to_size_one_axes",
        ["Unsqueeze", "Relu"],
        None,
        [{"N": 0, "S": 2}, {"N": 1, "S": 1}, {"N": 3, "S": 0}, {"N": 2, "S": 5}],
    ),
    "transpose_of_a_size_one_axis_then_squeeze": (
        """
        g (float[N, 1, S] x) => (float[N, S] y) {
            p = Transpose<perm = [1, 0, 2]>(x)
            a = Constant<value = int64[1] {0}>()
            q = Squeeze(p, a)
            y = Relu(q)
        }
        """,
        "chain_to_size_one_axes",
        ["Squeeze", "Relu"],
        None,
        [{"N": 0, "S": 2}, {"N": 1, "S": 1}, {"N": 3, "S": 4}],
    ),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_chain_collapses_and_keeps_outputs(case):
    body, what, remaining, targets, sizes = FIRES[case]
    before, after, chains = apply_pass(CollapseReshapeChainsPass, body)
    assert chains.fired == {what: 1}, (chains.fired, chains.declined)
    assert ops(after) == remaining
    if targets is not None:
        assert reshape_targets(after) == targets
    assert_equivalent(before, after, sizes)


# The original computes its target [N, 3*M] from the shape: it runs with N = 0 (the 0
# then copies u's dim 0, also 0). The only constant target from x is [0, -1], which
# cannot be resolved when N is 0.
MINUS_ONE_NEXT_TO_MAYBE_ZERO = """
    g (float[N, M, 3] x) => (float[N, ?] y) {
        z = Constant<value = int64[1] {3}>()
        u = Unsqueeze(x, z)
        n = Shape<start = 0, end = 1>(x)
        m = Shape<start = 1, end = 2>(x)
        three = Constant<value = int64[1] {3}>()
        m3 = Mul(m, three)
        t = Concat<axis = 0>(n, m3)
        r = Reshape(u, t)
        y = Relu(r)
    }
"""

# [N, M, 6] -> [M, N, 6]: two output dims are neither ints nor copies of their input dim.
TWO_SYMBOLIC = """
    g (float[N, M, 6] x) => (float[M, N, 6] y) {
        z = Constant<value = int64[1] {0}>()
        u = Unsqueeze(x, z)
        n = Shape<start = 0, end = 1>(x)
        m = Shape<start = 1, end = 2>(x)
        six = Constant<value = int64[1] {6}>()
        t = Concat<axis = 0>(m, n, six)
        r = Reshape(u, t)
        y = Relu(r)
    }
"""

DECLINES = {
    # MINUS_ONE_NEXT_TO_MAYBE_ZERO: no constant target, but the computed one reads the
    # same against x (chain_to_last_target, tests/rewrite/test_slices.py)
    "two_symbolic_dims": (
        TWO_SYMBOLIC,
        "more than one output dim is neither an int nor a copied dim",
    ),
    # The squeezed axis is 4, not 1: the node is malformed and its output unknown.
    "unproven_rank": (
        """
        g (float[N, 4] x) => (float[N, 4] y) {
            a = Constant<value = int64[1] {1}>()
            s = Squeeze(x, a)
            u = Unsqueeze(s, a)
            y = Relu(u)
        }
        """,
        "rank or dtype of the chain's ends not proven",
    ),
    # Only a graph output's Reshape may read the chain's input: Unsqueeze(x, [1]) would
    # be [N, 1, 6] (found by a mutation audit: only fuzz seed 100155 had such an output).
    "graph_output_unsqueeze": (
        """
        g (float[N, 6] x) => (float[N, 1, 2, 3] y) {
            t = Constant<value = int64[3] {0, 2, 3}>()
            r = Reshape(x, t)
            a = Constant<value = int64[1] {1}>()
            y = Unsqueeze(r, a)
        }
        """,
        "a graph output whose Reshape cannot read the chain's input",
    ),
}


def test_a_transpose_reordering_axes_of_other_sizes_is_no_chain():
    # [N, 1, S] -> [S, 1, N]: N and S swap (S = 1 would make it a reshape: not proven)
    body = """
        g (float[N, 1, S] x) => (float[N, S] y) {
            p = Transpose<perm = [2, 1, 0]>(x)
            a = Constant<value = int64[1] {1}>()
            q = Squeeze(p, a)
            z = Transpose<perm = [1, 0]>(q)
            y = Relu(z)
        }
    """
    _, after, chains = apply_pass(CollapseReshapeChainsPass, body)
    assert chains.fired == {}
    assert ops(after) == ops(model(body))


@pytest.mark.parametrize("case", sorted(DECLINES))
def test_chain_declines_with_reason(case):
    body, reason = DECLINES[case]
    _, after, chains = apply_pass(CollapseReshapeChainsPass, body)
    assert chains.fired == {}
    assert chains.declined == {reason: 1}
    assert ops(after) == ops(model(body))


def test_the_declined_chains_run_on_sizes_the_rewrite_could_not_keep():
    """The originals run where the rejected constant target would fail."""
    x = np.random.default_rng(0).standard_normal((0, 2, 3)).astype(np.float32)
    assert run(model(MINUS_ONE_NEXT_TO_MAYBE_ZERO), {"x": x})[0].shape == (0, 6)
    x = np.random.default_rng(0).standard_normal((2, 3, 6)).astype(np.float32)
    assert run(model(TWO_SYMBOLIC), {"x": x})[0].shape == (3, 2, 6)


@pytest.mark.parametrize(
    ("input_shape", "target"),
    [((2, 0, 3), [-1, 0]), ((0, 2, 3), [0, -1]), ((2, 0, 3), [-1, 0, 3])],
)
def test_onnxruntime_rejects_minus_one_next_to_a_zero_size_dim(input_shape, target):
    """Why the ``-1`` decline exists.

    The spec infers ``-1`` "from the size of the tensor and the remaining dimensions";
    when the remaining dims multiply to 0 that size is not determined, and onnxruntime
    rejects the run. We follow the spec: never write a ``-1`` that may face this.
    """
    m = model(
        f"""
        g (float[{", ".join(map(str, input_shape))}] x, int64[{len(target)}] t)
            => (float y) {{
            y = Reshape(x, t)
        }}
        """
    )
    feeds = {"x": np.zeros(input_shape, np.float32), "t": np.array(target, np.int64)}
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="cannot be reshaped"):
        run(m, feeds)
