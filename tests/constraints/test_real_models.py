"""The pass on exported models: a dim right before the pass stays right after it.

Ground truth: ``tests/data/*.truth.json`` (onnxruntime shapes of every main-graph value
under several bindings, see ``tests/data/README.md``).
"""

from __future__ import annotations

import json
import pathlib

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.passes._anchors import AnchorConstraintPropagationPass
from tests.constraints._util import _learn, copy_model

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(
    p.stem for p in DATA.glob("*.onnx") if (DATA / f"{p.stem}.truth.json").exists()
)


def _dims(model: ir.Model) -> dict[tuple[str, int], expr.Dim]:
    dims = {}
    values = [*model.graph.inputs, *(o for n in model.graph for o in n.outputs)]
    for value in values:
        if value.shape is None:
            continue
        for axis, dim in enumerate(value.shape.dims):
            if isinstance(dim, int):
                dims[value.name, axis] = dim
            elif dim.value:
                dims[value.name, axis] = expr.parse_dim(dim.value)
    return dims


def _correct(model: ir.Model, truth: dict) -> set[tuple[str, int]]:
    """The dims evaluating to the runtime size under every binding of the truth file."""
    dims = _dims(model)
    correct = set(dims)
    for index, binding in enumerate(truth["bindings"]):
        sizes = {
            key: shapes[index][key[1]]
            for key in dims
            if (shapes := truth["shapes"].get(key[0])) is not None
            and len(shapes[index]) > key[1]
        }
        bindings = dict(binding)
        for key, dim in dims.items():
            if key in sizes and isinstance(dim, expr.DimExpr) and dim.is_symbol:
                _learn(dim, sizes[key], bindings)
        for key, dim in dims.items():
            try:
                ok = key in sizes and expr.evaluate(dim, bindings) == sizes[key]
            except (KeyError, ArithmeticError, ValueError):
                ok = False
            if not ok:
                correct.discard(key)
    return correct


@pytest.mark.parametrize("name", MODELS)
def test_renaming_keeps_every_correct_dim_correct(name):
    model = ir.load(DATA / f"{name}.onnx")
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    ctx = SymbolicShapeInferencePass()(model).context
    before = copy_model(model)
    result = AnchorConstraintPropagationPass(ctx)(model)
    lost = _correct(before, truth) - _correct(model, truth)
    assert not lost, (sorted(lost)[:10], result.renames)
