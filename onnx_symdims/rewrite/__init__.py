"""Shape-driven rewrites and the ``optimize`` pipeline (uses onnxscript).

Rules ask :class:`ShapeFacts` (shapes the graph proves from its inputs and ops) for a
proof before they rewrite. Use them through :func:`optimize`, as one pass
(:class:`OptimizePass`), or inside your own onnxscript pipeline::

    from onnx_symdims.rewrite import ShapeFacts, shape_rules
    facts = ShapeFacts.analyze(model)
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=shape_rules(facts))
"""

from __future__ import annotations

__all__ = [
    "BroadcastScalarOperandsPass",
    "CollapseReshapeChainsPass",
    "DropExpandBeforeBroadcastPass",
    "DropLeadingOnesBeforeBroadcastPass",
    "FlattenConcatsPass",
    "GatherNDOfIndexGridPass",
    "GatherOfFlatIndexGridPass",
    "GatherOfIotaPass",
    "GroupedTransposePass",
    "InputShapeError",
    "LiftScalarArithmeticPass",
    "MergeDisjointSlicesPass",
    "OptimizePass",
    "OptimizeResult",
    "ProvenValuesPass",
    "ReduceDropsKeptAxesPass",
    "ReshapesAroundElementwisePass",
    "ReuseEqualValuesPass",
    "ShapeFacts",
    "ShapeRulesPass",
    "SlicesToSplitPass",
    "TransposeThroughBinaryPass",
    "VectorizeShapeLanesPass",
    "analyze",
    "apply_input_shapes",
    "count_nodes",
    "optimize",
    "shape_rules",
]

from onnx_symdims.rewrite._around_elementwise import ReshapesAroundElementwisePass
from onnx_symdims.rewrite._broadcast import BroadcastScalarOperandsPass
from onnx_symdims.rewrite._expand import DropExpandBeforeBroadcastPass
from onnx_symdims.rewrite._facts import ShapeFacts, analyze
from onnx_symdims.rewrite._flat_gather import GatherOfFlatIndexGridPass
from onnx_symdims.rewrite._gather import GatherNDOfIndexGridPass
from onnx_symdims.rewrite._input_shapes import InputShapeError, apply_input_shapes
from onnx_symdims.rewrite._iota_gather import GatherOfIotaPass
from onnx_symdims.rewrite._lanes import VectorizeShapeLanesPass
from onnx_symdims.rewrite._layout import (
    CollapseReshapeChainsPass,
    FlattenConcatsPass,
    GroupedTransposePass,
)
from onnx_symdims.rewrite._leading_ones import DropLeadingOnesBeforeBroadcastPass
from onnx_symdims.rewrite._lift import LiftScalarArithmeticPass
from onnx_symdims.rewrite._pipeline import OptimizePass, OptimizeResult, count_nodes, optimize
from onnx_symdims.rewrite._reduce import ReduceDropsKeptAxesPass
from onnx_symdims.rewrite._reuse import ReuseEqualValuesPass
from onnx_symdims.rewrite._rules import ShapeRulesPass, shape_rules
from onnx_symdims.rewrite._slices import MergeDisjointSlicesPass
from onnx_symdims.rewrite._split import SlicesToSplitPass
from onnx_symdims.rewrite._transpose import TransposeThroughBinaryPass
from onnx_symdims.rewrite._values import ProvenValuesPass
