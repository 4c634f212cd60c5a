"""Folds float nodes of constants with onnxruntime's own kernels (``exact_floats=False``).

onnxscript's folder evaluates a node by the ONNX reference implementation (numpy). For
the float ops whose numpy results differ from onnxruntime's in the last bits
(:mod:`~onnx_symdims.rewrite._folding`: ``MatMul``, ``Exp``, ``Softmax``,
``LayerNormalization``, reductions, ...) the folded model then computes other values
than the original. This pass evaluates such a node in onnxruntime instead, one node per
session with every graph optimization off: the same CPU kernel that onnxruntime's own
constant folding runs on the original model when it loads it, so on this machine the
folded constant has the bits the original computes. (On another CPU onnxruntime may pick
other kernels for the original, which is why ``optimize`` keeps such nodes by default.)
It also folds what the reference cannot: a ``LayerNormalization`` (whose reference
returns three outputs where the node has one, which onnxscript's folder declines).

Folded: standard-domain nodes whose inputs are all constants (initializers that are not
graph inputs, ``Constant`` outputs), which :func:`~onnx_symdims.rewrite._folding.
inexact_on_floats` reports, with tensor outputs of types numpy holds (not ``float16``),
none of them a graph output; an input above ``input_size_limit`` elements only when this node is its
sole consumer (as onnxscript's folder), outputs up to ``output_size_limit`` elements in
all. Random ops are never folded. Without onnxruntime the pass does nothing.

Example::

    >>> import onnx_ir as ir
    >>> model = ir.from_onnx_text('''
    ...     <ir_version: 10, opset_import: ["" : 20]>
    ...     g (float[2, 3] x) => (float[2, 3] y) <float[3, 3] w = {1., 2., 3., 4., 5., 6., 7., 8., 9.}> {
    ...         e = Exp(w)
    ...         y = MatMul(x, e)
    ...     }
    ... ''')
    >>> FoldFloatsInOnnxruntimePass()(model).modified
    True
    >>> [n.op_type for n in model.graph]
    ['MatMul']
"""

from __future__ import annotations

__all__ = ["FoldFloatsInOnnxruntimePass", "onnxruntime_available"]

import functools
import logging

import numpy as np
import onnx_ir as ir

from onnx_symdims.rewrite._facts import INTEGER_AND_BOOL_TYPES
from onnx_symdims.rewrite._folding import inexact_on_floats

logger = logging.getLogger(__name__)

#: Ops whose result is not a function of their inputs.
_NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Bernoulli",
        "Multinomial",
        "Dropout",
    }
)

#: Input types the folded nodes may read (numpy holds them exactly).
_FOLDABLE_TYPES = INTEGER_AND_BOOL_TYPES | {
    ir.DataType.FLOAT16,
    ir.DataType.FLOAT,
    ir.DataType.DOUBLE,
}

#: Output types the folded constants may have: not ``float16``. onnxruntime's CPU
#: provider computes most ``float16`` ops in ``float`` and drops the casts between two
#: such ops, so in the model ``Mul(Add(a, b), c)`` of ``float16`` constants never
#: rounds ``Add``'s result to ``float16``; folded alone, node by node, it does (measured:
#: ``Add(x, Mul(Add(a, b), c))`` differed in 14 of 64 elements).
_FOLDABLE_OUTPUT_TYPES = _FOLDABLE_TYPES - {ir.DataType.FLOAT16}


@functools.cache
def onnxruntime_available() -> bool:
    """True when onnxruntime can be imported (the ``verify`` extra)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


class FoldFloatsInOnnxruntimePass(ir.passes.InPlacePass):
    """Replaces float nodes of constants by their values computed in onnxruntime.

    Args:
        input_size_limit: Inputs larger than this (elements) are folded only into their
            sole consumer (onnxscript's folder's default).
        output_size_limit: Largest total number of output elements folded.
    """

    def __init__(self, input_size_limit: int = 8192, output_size_limit: int = 262144) -> None:
        super().__init__()
        self.input_size_limit = input_size_limit
        self.output_size_limit = output_size_limit

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not onnxruntime_available():
            return ir.passes.PassResult(model, modified=False)
        opset = model.opset_imports.get("", None)
        folded = 0
        if opset is not None:
            for node in list(model.graph):
                inputs = self._constant_inputs(node)
                if inputs is None:
                    continue
                values = _evaluate(node, inputs, opset, model.ir_version)
                if values is None or sum(a.size for a in values) > self.output_size_limit:
                    continue
                _replace(model.graph, node, values)
                folded += 1
        if folded:
            logger.debug("folded %d float nodes in onnxruntime", folded)
        return ir.passes.PassResult(model, modified=folded > 0)

    def _constant_inputs(self, node: ir.Node) -> list[ir.TensorProtocol | None] | None:
        """The node's constant inputs when it is one to fold here, else None."""
        if node.domain not in ("", "ai.onnx") or node.op_type in _NONDETERMINISTIC:
            return None
        if not node.inputs or not inexact_on_floats(node):
            return None
        if any(
            a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
            for a in node.attributes.values()
        ):
            return None
        outputs = [v for v in node.outputs if v.uses() or v.is_graph_output()]
        if not outputs or any(v.is_graph_output() for v in node.outputs):
            return None
        if any(
            v.dtype is not None and v.dtype not in _FOLDABLE_OUTPUT_TYPES for v in node.outputs
        ):
            return None
        if any(
            v.type is not None and not isinstance(v.type, ir.TensorType) for v in node.outputs
        ):
            return None  # a sequence or optional: folded into tensors only
        tensors: list[ir.TensorProtocol | None] = []
        for value in node.inputs:
            if value is None:
                tensors.append(None)
                continue
            tensor = None if value.is_graph_input() else _const_tensor(value)
            if tensor is None or tensor.dtype not in _FOLDABLE_TYPES:
                return None
            if tensor.size > self.input_size_limit and len(value.uses()) != 1:
                return None  # folding would copy a large constant another node keeps
            tensors.append(tensor)
        sizes = [_numel(v) for v in outputs]
        if None not in sizes and sum(sizes) > self.output_size_limit:
            return None  # known too large before running it (else checked after)
        return tensors


def _const_tensor(value: ir.Value) -> ir.TensorProtocol | None:
    try:
        return ir.convenience.get_const_tensor(value)
    except ValueError:  # a malformed Constant (two attributes, ...): not a constant here
        return None


def _numel(value: ir.Value) -> int | None:
    shape = value.shape
    if shape is None or not shape.is_static():
        return None
    return int(np.prod(shape.numpy(), dtype=np.int64))


def _evaluate(
    node: ir.Node, inputs: list[ir.TensorProtocol | None], opset: int, ir_version: int
) -> list[np.ndarray] | None:
    """The node's outputs computed by onnxruntime's CPU kernel, or None when it fails."""
    import onnxruntime as ort

    graph_inputs = []
    node_inputs: list[ir.Value | None] = []
    feeds = {}
    for i, tensor in enumerate(inputs):
        if tensor is None:
            node_inputs.append(None)
            continue
        value = ir.Value(
            name=f"i{i}", type=ir.TensorType(tensor.dtype), shape=ir.Shape(tensor.shape)
        )
        graph_inputs.append(value)
        node_inputs.append(value)
        feeds[value.name] = tensor.numpy()
    attributes = [
        ir.from_proto(ir.serde.serialize_attribute(a)) for a in node.attributes.values()
    ]
    copy = ir.Node("", node.op_type, node_inputs, attributes, num_outputs=len(node.outputs))
    for i, (mine, theirs) in enumerate(zip(copy.outputs, node.outputs)):
        mine.name = f"o{i}"
        mine.type = theirs.type
    graph = ir.Graph(graph_inputs, copy.outputs, nodes=[copy], opset_imports={"": opset})
    proto = ir.serde.serialize_model(ir.Model(graph, ir_version=max(ir_version, 7)))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(
            proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        results = session.run(None, feeds)
    except Exception as e:  # a kernel onnxruntime lacks or rejects: keep the node
        logger.debug("onnxruntime cannot fold %s: %s", node.name or node.op_type, e)
        return None
    for value, array in zip(node.outputs, results):
        if not isinstance(array, np.ndarray) or ir.DataType.from_numpy(array.dtype) not in (
            _FOLDABLE_OUTPUT_TYPES
        ):
            return None  # a sequence (its type was not known before running it), ...
        if (
            value.shape is not None
            and value.shape.is_static()
            and (tuple(value.shape.numpy()) != array.shape)
        ):
            return None  # the inferred shape disagrees: leave the node to the checks
    return results


def _replace(graph: ir.Graph, node: ir.Node, arrays: list[np.ndarray]) -> None:
    """Replaces the node's used outputs by initializers holding ``arrays``."""
    old, new = [], []
    for value, array in zip(node.outputs, arrays):
        if not value.uses():
            continue
        old.append(value)
        new.append(ir.Value(const_value=ir.tensor(array)))
    ir.convenience.replace_nodes_and_values(graph, node, [node], [], old, new)
    for value in new:
        value.const_value.name = value.name
        graph.register_initializer(value)
