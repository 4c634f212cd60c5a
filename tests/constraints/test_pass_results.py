"""The propagation pass's result types, and the planner's inputs computed on demand."""

from __future__ import annotations

import copy
import dataclasses
import pathlib

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import AnchorPropagationResult, SymbolicShapeInferencePass
from onnx_symdims.passes._anchor_renames import RenamePlan, plan_renames
from onnx_symdims.passes._anchors import _equality_symbols, _shape_symbols
from onnx_symdims.shapes import ShapesContext

DATA = pathlib.Path(__file__).parent.parent / "data"
BUNDLED = pathlib.Path(__file__).parent.parent.parent / "onnx_symdims" / "data"


def _model() -> ir.Model:
    return ir.from_onnx_text(
        '<ir_version: 10, opset_import: ["" : 21]>\ng (float[N] x) => (float[N] y) { y = Relu(x) }'
    )


def test_result_is_a_dataclass_with_fresh_defaults():
    model = _model()
    a, b = AnchorPropagationResult(model, False), AnchorPropagationResult(model, False)
    assert [f.name for f in dataclasses.fields(a)] == [
        "model",
        "modified",
        "context",
        "renames",
        "implied_equalities",
        "diagnostics",
    ]
    assert isinstance(a.context, ShapesContext) and a.context is not b.context
    a.renames["g"] = "N"
    assert b.renames == {} and a.implied_equalities is not b.implied_equalities
    assert AnchorPropagationResult(model, False, None).context is None  # given: kept


def test_result_equality_repr_and_replace_follow_the_fields():
    model = _model()
    ctx = ShapesContext()
    a = AnchorPropagationResult(model, True, ctx, {"g": "N"})
    assert a == AnchorPropagationResult(model, True, ctx, {"g": "N"})
    assert a != AnchorPropagationResult(model, True, ctx, {"g": "M"})
    assert a != AnchorPropagationResult(model, False, ctx, {"g": "N"})
    assert a != ir.passes.PassResult(model, True)
    text = repr(a)
    assert text.startswith("AnchorPropagationResult(model=") and "renames={'g': 'N'}" in text
    b = dataclasses.replace(a, modified=False)
    assert b.modified is False and b.context is ctx and b.renames == {"g": "N"}
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(TypeError):
        AnchorPropagationResult(model)  # type: ignore[call-arg]


def test_rename_plan_is_immutable_compared_by_value_and_copies():
    n = expr.sym("N")
    plan = RenamePlan({expr.sym("g"): n}, ((n, 3),), ())
    assert plan == RenamePlan({expr.sym("g"): n}, ((n, 3),), ())
    assert plan != RenamePlan({}, ((n, 3),), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mapping = {}  # type: ignore[misc]
    assert copy.deepcopy(plan) == plan
    assert plan.text_mapping() == {"g": "N"}
    assert repr(plan).startswith("RenamePlan(mapping=")


def _anchored_models() -> list[pathlib.Path]:
    return sorted([*DATA.glob("*.onnx"), *BUNDLED.glob("*.onnx")])


@pytest.mark.parametrize("path", _anchored_models(), ids=lambda p: p.name)
def test_planner_sees_the_same_declared_names_as_with_a_full_scan(path):
    # The pass reads only the declared names the equalities use (and stops scanning once
    # it has them): the plan must be the one a scan of every main-graph dim gives.
    model = ir.load(path)
    result = SymbolicShapeInferencePass()(model)
    ctx = result.context
    equalities = ctx.constraint_dims()
    renamable = ctx.generated_symbols
    wanted = _equality_symbols(equalities) - renamable
    main_values = result.snapshot.main_values
    full = _shape_symbols(main_values, ctx)
    partial = _shape_symbols(main_values, ctx, wanted)
    assert partial <= full and full & wanted == partial & wanted
    inputs = _shape_symbols(model.graph.inputs, ctx) - renamable

    def plan(preferred):
        return plan_renames(
            equalities, renamable=renamable, input_symbols=inputs, preferred=preferred
        )

    assert plan(partial & wanted) == plan(full - renamable)


def test_equality_symbols_cover_both_sides():
    a, b = expr.parse_dim("past+seq"), expr.parse_dim("2*total")
    assert _equality_symbols([(a, b), (3, expr.sym("k"))]) == {"past", "seq", "total", "k"}
