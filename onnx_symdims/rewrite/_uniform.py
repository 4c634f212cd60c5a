"""Tensors whose every element is one proven scalar, and integer element bounds.

Exports build attention masks from index arithmetic that is constant in every run:
ViT's and BERT's dynamo exports compute ``Where(arange(n)[None, None, :, None] >= 0, 0.0,
-inf)`` and add it to the scores. ``arange(n) >= 0`` holds for every element, so the mask
is all ``0.0`` and the ``Add`` a no-op, but no element is known at export time (``n``
is symbolic) and no constant folder sees it.

:func:`uniform_value` proves "every element of this value equals ``u``", from:

- constants whose elements are all equal (at most 65,536 of them; weights are not read)
  and ``ConstantOfShape``;
- ops that only copy elements (``Expand``, ``Reshape``, ``Transpose``, ``Slice``,
  ``Gather``'s data, …), ``Concat`` of equal ones, ``Where`` on a uniform condition or
  between equal branches;
- comparisons decided by :func:`element_bounds` (``x >= c`` with every ``x >= c``), or of
  two uniform operands; ``Not``/``And``/``Or``/``Xor`` of uniform booleans, ``And`` with
  a uniform ``false``, ``Or`` with a uniform ``true``.

:func:`element_bounds` proves integer bounds ``lo <= x[i] <= hi`` (either may be
unknown): a ``Range`` with a proven start and step (``>= start`` for a positive step),
``Shape``/``Size`` (``>= 0``), small constants, the copying ops, ``Where``, and
``Add``/``Sub``/``Neg`` of operands bounded on both sides (exact in Python integers;
dropped where the result may leave the integer type's range, where it would wrap).

An empty tensor satisfies every such claim (it has no element), which is what the rules
relying on them need: a rule replaces the tensor's *elements* by the scalar where the
result's *shape* is proven the same.

Both are read through the rule checks (:func:`~onnx_symdims.rewrite._rules` ``NeutralElement``,
``WhereOnProvenCondition``, ``BroadcastScalarOperands``). A value's producer and its inputs
never change in the IR (rewrites move uses, not producers), so the answers are kept for
the life of the facts object. The walk up the producers stops after 32 steps.
"""

from __future__ import annotations

__all__ = ["element_bounds", "uniform_value", "zero_sign_unseen", "zero_signs"]

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import ShapeFacts, constant_tensor

#: Constants larger than this are not read (weights).
_MAX_READ = 1 << 16
#: How far up the producers the walk goes.
_MAX_DEPTH = 32
#: A Range start beyond this is not used as a bound (kept well inside int64).
_LIMIT = 1 << 62

#: Ops whose output elements are copies of input 0's elements.
_COPIES = frozenset(
    {
        "Expand", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Identity",
        "Tile", "Slice", "Gather", "GatherElements", "GatherND",
    }
)  # fmt: skip
_COMPARISONS = {
    "Equal": np.equal,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
}
#: The integer types ONNX arithmetic takes, with their ranges.
_INT_RANGES = {
    t: (int(np.iinfo(t.numpy()).min), int(np.iinfo(t.numpy()).max))
    for t in (
        ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
    )
}  # fmt: skip
_LOGICAL = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}

Bounds = tuple["int | None", "int | None"]


def uniform_value(facts: ShapeFacts, value: ir.Value | None) -> np.ndarray | None:
    """The 0-d array every element of ``value`` equals in every run, or ``None``."""
    if value is None:
        return None
    return _walk(facts, value, _MAX_DEPTH)[0]


def element_bounds(facts: ShapeFacts, value: ir.Value | None) -> Bounds:
    """``(lo, hi)`` with ``lo <= x <= hi`` for every integer element ``x`` (``None``: unknown)."""
    if value is None:
        return None, None
    return _walk(facts, value, _MAX_DEPTH)[1]


def _walk(facts: ShapeFacts, value: ir.Value, depth: int) -> tuple[np.ndarray | None, Bounds]:
    memo = facts.derived.setdefault(__name__, {})
    known = memo.get(value)
    if known is not None:
        return known
    result = _compute(facts, value, depth) if depth > 0 else (None, (None, None))
    memo[value] = result
    return result


def _compute(
    facts: ShapeFacts, value: ir.Value, depth: int
) -> tuple[np.ndarray | None, Bounds]:
    tensor = constant_tensor(value)
    if tensor is not None:
        return _of_constant(tensor)
    elements = facts.int_elements(value)
    dtype = facts.dtype(value)
    if elements and dtype is not None and (dtype.is_integer() or dtype == ir.DataType.BOOL):
        return _of_array(np.array(elements, dtype=np.int64).astype(dtype.numpy()))
    node = value.producer()
    if node is None or node.domain != "" or value is not node.outputs[0]:
        return None, (None, None)
    op = node.op_type

    def walk(i: int) -> tuple[np.ndarray | None, Bounds]:
        if i >= len(node.inputs) or node.inputs[i] is None:
            return None, (None, None)
        return _walk(facts, node.inputs[i], depth - 1)

    if op in _COPIES:
        return walk(0)
    if op == "ConstantOfShape":
        attr = node.attributes.get("value")
        if attr is None:
            return np.array(0.0, np.float32), (None, None)
        if attr.type is not ir.AttributeType.TENSOR or attr.value.size != 1:
            return None, (None, None)
        return _of_array(attr.value.numpy().reshape(()))
    if op in ("Shape", "Size"):
        return None, (0, None)
    if op == "Range":
        return None, _range_bounds(facts, node)
    if op == "Concat":
        parts = [walk(i) for i in range(len(node.inputs))]
        return _same(p[0] for p in parts), _union(p[1] for p in parts)
    if op == "Where":
        condition, a, b = walk(0)[0], walk(1), walk(2)
        if condition is not None and condition.dtype == np.bool_:
            return a if bool(condition) else b
        return _same((a[0], b[0])), _union((a[1], b[1]))
    if op in _COMPARISONS:
        return _compare(op, walk(0), walk(1)), (None, None)
    if op == "Not":
        u = walk(0)[0]
        return (np.logical_not(u) if _is_bool(u) else None), (None, None)
    if op in _LOGICAL:
        return _logical(op, walk(0)[0], walk(1)[0]), (None, None)
    if op in ("Add", "Sub", "Neg"):
        y = walk(1)[1] if op != "Neg" else None
        return None, _arithmetic_bounds(op, walk(0)[1], y, dtype)
    return None, (None, None)


def _of_constant(tensor: ir.TensorProtocol) -> tuple[np.ndarray | None, Bounds]:
    if tensor.size == 0 or tensor.size > _MAX_READ:
        return None, (None, None)
    return _of_array(tensor.numpy())


def _of_array(array: np.ndarray) -> tuple[np.ndarray | None, Bounds]:
    """The uniform element (bit for bit: ``-0.0`` and ``0.0`` differ) and integer bounds."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.size == 0 or flat.dtype.kind not in "biuf":
        return None, (None, None)
    bounds: Bounds = (None, None)
    if np.issubdtype(flat.dtype, np.integer):
        bounds = (int(flat.min()), int(flat.max()))
    first = flat[:1]
    uniform = None
    if np.all(flat.view(np.uint8).reshape(flat.size, -1) == first.view(np.uint8)):
        uniform = flat[0].copy().reshape(())
    return uniform, bounds


def _is_bool(u: np.ndarray | None) -> bool:
    return u is not None and u.dtype == np.bool_


def _same(values) -> np.ndarray | None:
    """The one value all ``values`` are, bit for bit and of one dtype, else ``None``."""
    values = list(values)
    first = values[0]
    if first is None:
        return None
    for v in values[1:]:
        if v is None or v.dtype != first.dtype or v.tobytes() != first.tobytes():
            return None
    return first


def _union(bounds) -> Bounds:
    bounds = list(bounds)
    lows = [b[0] for b in bounds]
    highs = [b[1] for b in bounds]
    lo = None if None in lows else min(lows)
    hi = None if None in highs else max(highs)
    return lo, hi


def _range_bounds(facts: ShapeFacts, node: ir.Node) -> Bounds:
    """``Range(start, limit, delta)``: ``>= start`` for ``delta > 0``, ``<= start`` below 0."""
    if len(node.inputs) != 3:
        return None, None
    start, delta = (_int_scalar(facts, node.inputs[i]) for i in (0, 2))
    if start is None or delta is None or abs(start) > _LIMIT:
        return None, None
    if delta > 0:
        return start, None
    if delta < 0:
        return None, start
    return None, None


def _int_scalar(facts: ShapeFacts, value: ir.Value | None) -> int | None:
    dtype = facts.dtype(value)
    if value is None or dtype is None or not dtype.is_integer():
        return None
    elements = facts.int_elements(value)
    if elements is None:
        tensor = constant_tensor(value)
        if tensor is not None and tensor.size == 1:
            elements = tuple(int(x) for x in tensor.numpy().reshape(-1))
    if elements is None or len(elements) != 1:
        return None
    return elements[0]


def _compare(op: str, x, y) -> np.ndarray | None:
    """The uniform result of ``op(x, y)`` from uniform operands or integer bounds."""
    (ux, (x_lo, x_hi)), (uy, (y_lo, y_hi)) = x, y
    if ux is not None and uy is not None and ux.dtype == uy.dtype:
        return np.asarray(_COMPARISONS[op](ux, uy))
    if op == "Equal":
        decided = _order(x_hi, y_lo) or _order(y_hi, x_lo)  # x < y everywhere, or y < x
        return np.array(False) if decided else None
    if op in ("Greater", "GreaterOrEqual"):  # y < x, y <= x: swap to Less, LessOrEqual
        op = "Less" if op == "Greater" else "LessOrEqual"
        (x_lo, x_hi), (y_lo, y_hi) = (y_lo, y_hi), (x_lo, x_hi)
    strict = op == "Less"
    if _order(x_hi, y_lo, strict):
        return np.array(True)
    if _order(y_hi, x_lo, not strict):
        return np.array(False)
    return None


def _order(hi: int | None, lo: int | None, strict: bool = True) -> bool:
    """Whether every element bounded above by ``hi`` is ``<`` (``<=``) every one above ``lo``."""
    if hi is None or lo is None:
        return False
    return hi < lo if strict else hi <= lo


def _logical(op: str, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if _is_bool(a) and _is_bool(b):
        return np.asarray(_LOGICAL[op](a, b))
    absorbing = {"And": False, "Or": True}.get(op)
    if absorbing is not None and any(_is_bool(u) and bool(u) == absorbing for u in (a, b)):
        return np.array(absorbing)
    return None


def _arithmetic_bounds(
    op: str, x: Bounds, y: Bounds | None, dtype: ir.DataType | None
) -> Bounds:
    """Bounds of ``-x``, ``x + y`` or ``x - y`` in ``dtype``: only where no element can wrap.

    Integer arithmetic wraps: ``x + y`` with ``x >= 0`` is not ``>= 0`` when ``x`` may be
    near the top of its type (``2**63`` in int64, ``127`` in int8, and ``x - y`` of
    unsigned ints wraps below 0). With every operand bounded on both sides, the exact
    (Python integer) result bounds hold elementwise when they lie inside ``dtype``'s range.
    """
    operands = [x] if y is None else [x, y]
    if any(b is None for bounds in operands for b in bounds):
        return None, None
    if dtype not in _INT_RANGES:
        return None, None
    (x_lo, x_hi), (y_lo, y_hi) = x, (y if y is not None else (0, 0))
    if op == "Neg":
        lo, hi = -x_hi, -x_lo
    elif op == "Add":
        lo, hi = x_lo + y_lo, x_hi + y_hi
    else:
        lo, hi = x_lo - y_hi, x_hi - y_lo
    type_min, type_max = _INT_RANGES[dtype]
    if lo < type_min or hi > type_max:
        return None, None
    return lo, hi


# ------------------------------------------------------------------------------------
# Signs of zeros
# ------------------------------------------------------------------------------------
#: Ops whose output is the same for a ``-0.0`` and a ``+0.0`` input element, each with
#: why: ``exp(±0) = cos(±0) = 1``, ``sigmoid(±0) = 0.5``, ``|±0| = +0``; comparisons and
#: ``IsNaN``/``IsInf`` treat ``-0.0 == +0.0``; ``Softmax``/``LogSoftmax`` read an element
#: only through ``x - max`` (``±0 - ±0`` feeds ``exp`` one value, and an output zero is
#: ``x - x = +0`` whatever the sign of ``x``); ``Shape`` and ``Size`` read no element.
#: tests/rewrite/test_signed_zero_rules.py runs each on ``±0.0`` in onnxruntime.
_ZERO_SIGN_BLIND = frozenset(
    {
        "Exp", "Cos", "Sigmoid", "Abs", "Softmax", "LogSoftmax", "IsNaN", "IsInf",
        "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Shape", "Size",
    }
)  # fmt: skip
#: Ops whose output differs at most in the sign of a zero when the listed inputs do
#: (``None``: every input): the movers copy elements bit for bit; ``a + ±0`` and
#: ``a - ±0`` are ``a`` for every ``a != 0`` (inf and NaN included) and a zero for
#: ``a = ±0``; ``Neg`` and ``Relu`` map a zero to a zero; ``Where`` copies its branches;
#: ``±0 * b`` and ``±0 / b`` are a zero, or a NaN (``0 * inf``, ``0 / 0``: the CPU's
#: default NaN whatever the signs; NaN ``b``: ``b``), so ``MatMul`` and ``Gemm`` (sums of
#: such products) change at most a zero's sign too, and so do ``Conv`` and the sums
#: ``ReduceSum``/``ReduceMean``; ``LayerNormalization`` (a mean that changes at most in
#: a zero's sign, squares that do not, ``(x - mean) * inv_std * scale + bias``);
#: ``Tanh``, ``Erf``, ``Gelu`` map ``±0`` to a zero (``gelu(x) = x * (...)``). ``b / ±0``
#: is ``±inf``: ``Div`` only as the numerator.
_ZERO_SIGN_CARRIERS = {
    "Reshape": (0,), "Transpose": (0,), "Squeeze": (0,), "Unsqueeze": (0,),
    "Identity": (0,), "Flatten": (0,), "Slice": (0,), "Gather": (0,), "Expand": (0,),
    "Split": (0,), "GatherND": (0,), "GatherElements": (0,), "Tile": (0,), "Concat": None, "Add": None, "Sub": None, "Neg": (0,), "Relu": (0,),
    "Where": (1, 2), "Mul": None, "Div": (0,), "MatMul": None, "Gemm": None,
    "Conv": None, "ReduceSum": (0,), "ReduceMean": (0,), "LayerNormalization": None,
    "Tanh": (0,), "Erf": (0,), "Gelu": (0,),
}  # fmt: skip
#: How many uses past the value one proof looks at, at most (shared answers aside;
#: each use counts twice, read and followed).
_MAX_SIGN_USES = 4096
_INTEGER_OR_BOOL = frozenset(_INT_RANGES) | {ir.DataType.BOOL}


def zero_signs(facts: ShapeFacts, value: ir.Value) -> frozenset[bool] | None:
    """The sign bits of ``value``'s elements where every element is a zero, else ``None``.

    ``{True}``: all ``-0.0``; ``{False}``: all ``+0.0``; both: a mix.
    """
    tensor = constant_tensor(value)
    if tensor is not None:
        if tensor.size > _MAX_READ:
            return None
        array = tensor.numpy()
    else:
        array = uniform_value(facts, value)
        if array is None:
            return None
    array = np.asarray(array)
    if array.dtype.kind != "f":  # bfloat16, float8 (ml_dtypes): read as float32
        try:
            array = array.astype(np.float32)
        except (TypeError, ValueError):
            return None
    if array.size == 0 or np.any(array != 0):
        return None
    return frozenset(bool(s) for s in np.unique(np.signbit(array)))


def zero_sign_unseen(
    facts: ShapeFacts,
    value: ir.Value,
    main_graph: ir.Graph | None,
    memo: dict[ir.Value, str] | None = None,
) -> str:
    """``""`` when no output sees whether an element of ``value`` is ``-0.0`` or ``+0.0``.

    Proof: every use of ``value`` is an output of ``main_graph`` (compared under ``==``,
    where ``-0.0 == +0.0``), an op of ``_ZERO_SIGN_BLIND``, a ``Cast`` to an integer or
    bool type (``0`` / ``false`` for both), an ``Add``/``Sub`` whose other operand is a
    constant with no zero element (``±0 + c = c``, ``c - ±0 = c``, ``±0 - c = -c``: exact
    for every ``c != 0``, inf and NaN included), or an op whose outputs then differ at
    most in the sign of a zero (``_ZERO_SIGN_CARRIERS``, a float ``Cast``) and satisfy
    the same. At most ``_MAX_SIGN_USES`` uses are looked at per call.

    Args:
        facts: The facts of the model (dtypes).
        value: The value whose zeros may change sign.
        main_graph: The model's main graph (a subgraph's outputs are not compared).
        memo: Answers of earlier calls, by value, to share (within one pass: its
            rewrites only hand a value uses its answer already covered, those of a
            carrier it read, so an answer ``""`` stays true; a reason stays safe).

    Returns:
        ``""``, or why not (a use that may see the sign).
    """
    memo = {} if memo is None else memo
    uses_of: dict[ir.Value, list[ir.Value] | str] = {}
    budget = [_MAX_SIGN_USES]
    stack = [value]
    while stack:
        v = stack[-1]
        if v in memo:
            stack.pop()
            continue
        if v not in uses_of:
            uses_of[v] = _carried(facts, v, main_graph, budget)
        carried = uses_of[v]
        if isinstance(carried, str):
            if budget[0] < 0:
                return carried  # out of budget: not an answer about v to keep
            memo[v] = carried
            stack.pop()
            continue
        undone = [w for w in carried if w not in memo]
        if undone:
            # Each value pushes its outputs once (a DAG): more pushes than uses only
            # in a cycle, which a graph never has; never kept.
            budget[0] -= len(undone)
            if budget[0] < 0:
                return f"more than {_MAX_SIGN_USES} uses to look at"
            stack.extend(undone)
            continue
        memo[v] = next((memo[w] for w in carried if memo[w]), "")
        stack.pop()
    return memo[value]


def _carried(
    facts: ShapeFacts, v: ir.Value, main_graph: ir.Graph | None, budget: list[int]
) -> list[ir.Value] | str:
    """The outputs ``v``'s zeros' signs reach through carriers, or why a use sees them."""
    producer = v.producer()
    graph = producer.graph if producer is not None else None
    if v.is_graph_output() and (main_graph is None or graph is not main_graph):
        return "it is an output of a subgraph"
    carried: list[ir.Value] = []
    for user, index in v.uses():
        budget[0] -= 1
        if budget[0] < 0:
            return f"more than {_MAX_SIGN_USES} uses to look at"
        op = user.op_type
        if user.domain != "":
            return f"it reaches {user.domain}.{op}"
        if user.graph is not graph:
            return "it is read in a subgraph"
        if op in _ZERO_SIGN_BLIND:
            continue
        if op == "Cast":
            to = facts.dtype(user.outputs[0])
            if to in _INTEGER_OR_BOOL:
                continue
            if to is None or not to.is_floating_point():
                return "it reaches a Cast to another type"
        elif (
            op in ("Add", "Sub") and len(user.inputs) == 2 and _no_zero(user.inputs[1 - index])
        ):
            continue  # ±0 + c = c: the same output
        elif op not in _ZERO_SIGN_CARRIERS:
            return f"it reaches {op}"
        else:
            positions = _ZERO_SIGN_CARRIERS[op]
            if positions is not None and index not in positions:
                return f"it is input {index} of {op}"
        carried.extend(out for out in user.outputs if out is not None)
    return carried


def _no_zero(value: ir.Value | None) -> bool:
    tensor = None if value is None else constant_tensor(value)
    if tensor is None or tensor.size == 0 or tensor.size > _MAX_READ:
        return False
    array = np.asarray(tensor.numpy())
    if array.dtype.kind not in "fiu":
        try:
            array = array.astype(np.float32)
        except (TypeError, ValueError):
            return False
    return not bool(np.any(array == 0))
