"""Fallback for ops without a hook: ONNX's own C++ per-node shape inference.

The node's input types are built from *our* shapes (symbolic dims written as their
canonical ``dim_param`` text), small known integer inputs are passed as constant data,
and the result is read back: a ``dim_param`` we sent maps back to our dim, ONNX's
anonymous ``unk__N`` and anything unparseable become fresh symbols. Model-local
functions go through ``onnx.shape_inference.infer_function_output_types``. When ONNX
cannot infer the node either, its outputs get unknown shapes and a warning diagnostic.
"""

from __future__ import annotations

__all__ = ["OnnxFallback"]

import logging
from collections.abc import Mapping

import numpy as np
import onnx
import onnx.defs
import onnx.numpy_helper
import onnx.shape_inference
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes import INTEGER_DTYPES, NodeContext

logger = logging.getLogger(__name__)

Dim = expr.Dim


class _FallbackError(Exception):
    pass


def _captured_values(node: ir.Node) -> list[ir.Value]:
    """Values of enclosing graphs that the node's subgraphs read (their outer scope)."""
    inner: set[int] = set()
    captured: dict[int, ir.Value] = {}
    subgraphs = [
        attr.value for attr in node.attributes.values() if attr.type == ir.AttributeType.GRAPH
    ]
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPHS:
            subgraphs.extend(attr.value)
    for graph in subgraphs:
        inner.add(id(graph))
        for sub_node in ir.traversal.RecursiveGraphIterator(graph):
            for attr in sub_node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    inner.add(id(attr.value))
                elif attr.type == ir.AttributeType.GRAPHS:
                    inner.update(id(g) for g in attr.value)
    for graph in subgraphs:
        for sub_node in ir.traversal.RecursiveGraphIterator(graph):
            for value in sub_node.inputs:
                if value is not None and id(value.graph) not in inner and value.name:
                    captured[id(value)] = value
    return list(captured.values())


def _with_default_attributes(
    node: onnx.NodeProto, schema: onnx.defs.OpSchema
) -> onnx.NodeProto:
    """Adds the schema's default for every absent attribute.

    Some ONNX inference functions read a different default than the schema declares
    (``STFT`` treats a missing ``onesided`` as 0; the spec and onnxruntime use 1), so
    the node is made explicit before ONNX sees it.
    """
    present = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in present and attr.default_value.type:
            node.attribute.append(attr.default_value)
    return node


class OnnxFallback:
    """ONNX per-node inference for one model (opset imports and functions cached).

    Args:
        model: The model whose nodes are inferred (for opset imports, IR version and
            model-local functions).
    """

    def __init__(self, model: ir.Model) -> None:
        self._opset_items = tuple(model.opset_imports.items())
        # Built on first use: most models send no node to ONNX (each opset id is a
        # protobuf message, built for nothing on every run otherwise).
        self._opset_ids: list[onnx.OperatorSetIdProto] | None = None
        self._ir_version = model.ir_version or onnx.IR_VERSION
        self._functions = model.functions
        self._function_protos: dict[ir.OperatorIdentifier, onnx.FunctionProto] = {}

    @property
    def _opset_imports(self) -> list[onnx.OperatorSetIdProto]:
        """The model's opset imports as protos (as they were when this was made)."""
        if self._opset_ids is None:
            self._opset_ids = [
                onnx.helper.make_opsetid(domain, version)
                for domain, version in self._opset_items
            ]
        return self._opset_ids

    # ------------------------------------------------------------------------------------
    def infer(self, ctx: NodeContext) -> None:
        """Sets the node's outputs from ONNX inference, or unknown shapes with a warning."""
        node = ctx.node
        sent: dict[str, Dim] = {}
        try:
            types = self._input_types(ctx, sent)
            function = self._functions.get(node.op_identifier())
            if function is not None:
                outputs = self._infer_function(ctx, function, types)
            else:
                outputs = self._infer_with_schema(ctx, types)
        except _FallbackError as e:
            for i in range(ctx.num_outputs):
                ctx.set_output(i, None)
            ctx.ctx.add_diagnostic(node, "warning", str(e))
            return
        anonymous: dict[str, Dim] = {}
        for i, value in enumerate(node.outputs):
            self._read_output(ctx, i, value, outputs.get(value.name), sent, anonymous)

    # ------------------------------------------------------------------------------------
    def _tensor_type(
        self, ctx: NodeContext, value: ir.Value, sent: dict[str, Dim]
    ) -> onnx.TypeProto:
        type_proto = onnx.TypeProto()
        tensor_type = type_proto.tensor_type
        dtype = ctx.ctx.dtype_of(value)
        tensor_type.elem_type = 0 if dtype is None else int(dtype)
        shape = ctx.ctx.shape_of(value)
        if shape is not None:
            proto_shape = tensor_type.shape
            proto_shape.SetInParent()  # rank 0 must still be a present (empty) shape
            for d in shape:
                dim = proto_shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                else:
                    text = expr.to_onnx(d)
                    sent[text] = d
                    dim.dim_param = text
        return type_proto

    def _type_of(
        self, ctx: NodeContext, value: ir.Value, sent: dict[str, Dim]
    ) -> onnx.TypeProto:
        declared = value.type
        if declared is not None and not isinstance(declared, ir.TensorType):
            return ir.serde.serialize_type(declared)  # sequences, optionals: as declared
        return self._tensor_type(ctx, value, sent)

    def _input_types(
        self, ctx: NodeContext, sent: dict[str, Dim]
    ) -> dict[str, onnx.TypeProto]:
        types: dict[str, onnx.TypeProto] = {}
        node = ctx.node
        for value in node.inputs:
            if value is not None and value.name:
                types[value.name] = self._type_of(ctx, value, sent)
        if any(
            attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
            for attr in node.attributes.values()
        ):
            for value in _captured_values(node):
                if value.name not in types:
                    types[value.name] = self._type_of(ctx, value, sent)
        return types

    def _input_data(self, ctx: NodeContext) -> dict[str, onnx.TensorProto]:
        data: dict[str, onnx.TensorProto] = {}
        for i, value in enumerate(ctx.node.inputs):
            if value is None or not value.name:
                continue
            dtype = ctx.input_dtype(i)
            shape = ctx.input_shape(i)
            elements = ctx.input_ints(i)
            if elements is None or shape is None or dtype not in INTEGER_DTYPES:
                continue
            if not all(isinstance(d, int) for d in shape):
                continue
            try:
                array = np.array(elements, dtype=dtype.numpy()).reshape(shape)
            except (ValueError, OverflowError, TypeError):
                continue
            # numpy_helper writes the same TensorProto as ir.tensor + serialize_tensor for
            # these plain integer dtypes, 20x faster (no per-element type checks).
            data[value.name] = onnx.numpy_helper.from_array(array, value.name)
        return data

    def _infer_with_schema(
        self, ctx: NodeContext, types: Mapping[str, onnx.TypeProto]
    ) -> dict[str, onnx.TypeProto]:
        node = ctx.node
        domain = node.domain
        try:
            schema = onnx.defs.get_schema(node.op_type, ctx.opset, domain)
        except onnx.defs.SchemaError as e:
            raise _FallbackError(
                f"no shape hook for {domain or 'ai.onnx'}::{node.op_type} and no ONNX schema"
            ) from e
        try:
            return onnx.shape_inference.infer_node_outputs(
                schema,
                _with_default_attributes(ir.serde.serialize_node(node), schema),
                dict(types),
                self._input_data(ctx),
                opset_imports=self._opset_imports,
                ir_version=self._ir_version,
            )
        except Exception as e:  # onnx raises InferenceError, RuntimeError, ...
            raise _FallbackError(f"ONNX inference failed: {e}") from e

    def _infer_function(
        self, ctx: NodeContext, function: ir.Function, types: Mapping[str, onnx.TypeProto]
    ) -> dict[str, onnx.TypeProto]:
        node = ctx.node
        proto = self._function_protos.get(function.identifier())
        if proto is None:
            proto = self._function_protos[function.identifier()] = ir.serde.serialize_function(
                function
            )
        input_types = [
            types[value.name]
            if value is not None and value.name in types
            else onnx.TypeProto()
            for value in node.inputs
        ]
        attributes = [ir.serde.serialize_attribute(a) for a in node.attributes.values()]
        try:
            results = onnx.shape_inference.infer_function_output_types(
                proto, input_types, attributes
            )
        except Exception as e:
            raise _FallbackError(f"ONNX function inference failed: {e}") from e
        return {value.name: t for value, t in zip(node.outputs, results) if value.name}

    # ------------------------------------------------------------------------------------
    @staticmethod
    def _read_dim(
        ctx: NodeContext,
        dim: onnx.TensorShapeProto.Dimension,
        i: int,
        k: int,
        sent: Mapping[str, Dim],
        anonymous: dict[str, Dim],
    ) -> Dim:
        which = dim.WhichOneof("value")
        if which == "dim_value" and dim.dim_value >= 0:
            return dim.dim_value
        if which == "dim_param" and dim.dim_param:
            text = dim.dim_param
            known = sent.get(text)
            if known is not None:
                return known
            if text.startswith("unk__"):
                # One anonymous ONNX dim may appear in several outputs: one fresh symbol.
                fresh = anonymous.get(text)
                if fresh is None:
                    fresh = anonymous[text] = ctx.new_symbol(f"o{i}_d{k}")
                return fresh
            try:
                parsed = expr.parse_expr(text)
            except (expr.ExprError, ArithmeticError, OverflowError):
                parsed = None
            if isinstance(parsed, int) and parsed >= 0:
                return parsed
            if isinstance(parsed, expr.DimExpr) and not parsed.is_unknown:
                return parsed
        return ctx.new_symbol(f"o{i}_d{k}")

    def _read_output(
        self,
        ctx: NodeContext,
        i: int,
        value: ir.Value,
        type_proto: onnx.TypeProto | None,
        sent: Mapping[str, Dim],
        anonymous: dict[str, Dim],
    ) -> None:
        if type_proto is None or type_proto.WhichOneof("value") is None:
            ctx.set_output(i, None)
            return
        if type_proto.WhichOneof("value") != "tensor_type":
            # Sequence/optional/map results: the driver keeps them if none is declared.
            ctx.set_output_type(i, ir.serde.deserialize_type_proto_for_type(type_proto))
            ctx.set_output(i, None)
            return
        tensor_type = type_proto.tensor_type
        dtype = ir.DataType(tensor_type.elem_type) if tensor_type.elem_type else None
        if not tensor_type.HasField("shape"):
            ctx.set_output(i, None, dtype)
            return
        dims = [
            self._read_dim(ctx, d, i, k, sent, anonymous)
            for k, d in enumerate(tensor_type.shape.dim)
        ]
        ctx.set_output(i, dims, dtype)
