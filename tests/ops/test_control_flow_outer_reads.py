"""A loop's growth over sizes its body reads from outside (each outer value read once).

``_outer_symbols`` decides which symbols a carried dim's per-iteration growth may use for
``initial + count*delta``: sizes and values of the node's inputs and of the values its
body reads from enclosing graphs, a value read by several body nodes counted once.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_symdims import expr
from tests.ops._ort_oracle import check_runs, infer_graph


def _feeds(counts: tuple[int, ...]) -> list[dict[str, np.ndarray]]:
    return [
        {
            "M": np.array(m, np.int64),
            "x": np.ones(n, np.float32),
            "w": np.ones(k, np.float32),
        }
        for m in counts
        for n in (0, 3)
        for k in (0, 2)
    ]


# w is read by two body nodes: the growth of 2*L a round is over an outer size.
SHAPE_READ_TWICE = """
g (int64 M, float[N] x, float[L] w) => (xf) {
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Identity(c)
     w2 = Relu(w)
     xo = Concat<axis=0>(xin, w, w2)
  }>
}
"""

# The growth is an outer *value* (the elements of kshape, [L]), read by two body nodes.
VALUE_READ_TWICE = """
g (int64 M, float[N] x, float[L] w) => (xf) {
  kshape = Shape(w)
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Identity(c)
     a = ConstantOfShape<value = float[1] {1}>(kshape)
     b = ConstantOfShape<value = float[1] {2}>(kshape)
     xo = Concat<axis=0>(xin, a, b)
  }>
}
"""


@pytest.mark.parametrize("text", [SHAPE_READ_TWICE, VALUE_READ_TWICE], ids=["shape", "value"])
def test_growth_over_an_outer_size_read_twice_is_affine(text):
    result = infer_graph(text)
    (final,) = result.dims("xf")
    # N + count*(2*L), count a fresh symbol (M is unknown): not a fresh symbol of its own.
    assert isinstance(final, expr.DimExpr) and not final.is_symbol
    (count,) = final.symbols() - {"N", "L"}
    assert final == expr.sym("N") + expr.sym(count) * 2 * expr.sym("L")
    check_runs(result, _feeds((0, 1, 3)))


def test_growth_over_a_size_the_body_mints_is_not_affine():
    # NonZero's count is minted inside the body: not the same in every iteration.
    result = infer_graph("""
g (int64 M, float[N] x, float[L] w) => (xf) {
  xf = Loop(M, , x) <body = body(int64 i, bool c, xin) => (bool co, xo) {
     co = Identity(c)
     nz = NonZero(w)
     minus1 = Constant<value = int64[1] {-1}>()
     flat = Reshape(nz, minus1)
     flatf = Cast<to=1>(flat)
     xo = Concat<axis=0>(xin, flatf, w)
  }>
}
""")
    (final,) = result.dims("xf")
    assert isinstance(final, expr.DimExpr) and final.is_symbol
    check_runs(result, _feeds((0, 2)))
