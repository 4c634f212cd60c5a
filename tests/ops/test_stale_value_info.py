"""A stale intermediate ``value_info`` over the same sizes the engine infers.

Found by the attack4 corpus (``tools/build_attack4_corpus.py``, model
``bert_legacy_stale_seq1_vi``: value_info inferred with ``seq_len = 1``, the inputs made
dynamic again). The Flatten of an attention mask ``[batch, seq_len]`` at ``axis=2`` is
``[batch*seq_len, 1]``; the value_info says ``[batch, 1]``, true only where ``seq_len`` is
1. The declared text is a relation between sizes of the author's names that nothing
implies: writing it was a wrong dim in every run with ``seq_len != 1``. The inferred dim
is written (``shapes/_merge.py``), with a conflict; the declared text stays only where the
inferred dim holds a symbol the engine minted (it may know less than the author).
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from tests.ops._ort_oracle import Inferred, infer, run_ort

STALE_FLATTEN = """
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[batch, seq_len] x) => (float[?, ?] z) <float[D, 1] y>
{
    y = Flatten <axis = 2> (x)
    z = Relu (y)
}
"""


def _written(inferred, name: str) -> list[int | str]:
    """The dims written on the model's value ``name`` (not the engine's own table)."""
    value = next(v for n in inferred.model.graph for v in n.outputs if v.name == name)
    return [d if isinstance(d, int) else d.value for d in value.shape.dims]


def _infer_declaring(text: str, name: str, dims: list[int | str]) -> Inferred:
    """Infers ``text`` after declaring ``dims`` on ``name`` (the text syntax spells no ``2*b``)."""
    model = ir.from_onnx_text(text)
    for value in model.graph.outputs:
        value.shape = None
    next(v for n in model.graph for v in n.outputs if v.name == name).shape = ir.Shape(dims)
    result = SymbolicShapeInferencePass()(model)
    return Inferred(model, result.context)


# Declared texts over the author's names that hold in some runs only: the inferred
# ``batch*seq_len`` is written in each case, with a conflict.
@pytest.mark.parametrize("declared", ["batch", "seq_len", "2*batch", "Flat"])
def test_a_stale_value_info_over_the_inferred_symbols_is_not_written(declared):
    inferred = _infer_declaring(STALE_FLATTEN, "y", [declared, 1])
    assert _written(inferred, "y") == ["batch*seq_len", 1]
    assert any("not implied" in w for w in inferred.warnings), inferred.warnings
    for binding in ({"batch": 3, "seq_len": 7}, {"batch": 1, "seq_len": 1}):
        true_shape = list(run_ort(inferred, binding)["y"].shape)  # [batch*seq_len, 1]
        written = [
            d if isinstance(d, int) else expr.evaluate(expr.parse_dim(d), binding)
            for d in _written(inferred, "y")
        ]
        assert written == true_shape, (binding, _written(inferred, "y"))


# NonZero's count is a data-dependent size (a minted symbol with the bound nnz <= N): a
# declared name there is a trace's claim, not used (docs/engine.md §8, stop 44). The minted
# count is written, with a warning; its bound stays usable downstream.
DECLARED_COUNT = """
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[N] x) => (int64[?, ?] z) <int64[1, K] y>
{
    y = NonZero (x)
    z = Identity (y)
}
"""


def test_a_declared_name_for_a_data_dependent_count_is_not_used():
    inferred = infer(DECLARED_COUNT)
    assert _written(inferred, "y") == [1, "NonZero_y_nnz"]
    assert _written(inferred, "z") == [1, "NonZero_y_nnz"]
    assert any("output 'y'" in w and "declared [1, K]" in w for w in inferred.warnings)


# Names another tool minted for a size it did not know declare nothing on an intermediate:
# the inferred dim is written, without a conflict (onnxruntime's symbolic shape inference
# writes ``{op}{scope}_{node}_o{output}__d{axis}``; found on attack4's
# ``gpt2_kv_legacy_ortopt_vi``, where each was a "not implied" warning).
@pytest.mark.parametrize("declared", ["unk__3", "Flatten_35_o0__d0", "Reshape_1_12_o0__d1"])
def test_a_name_another_tool_minted_declares_nothing(declared):
    inferred = _infer_declaring(STALE_FLATTEN, "y", [declared, 1])
    assert _written(inferred, "y") == ["batch*seq_len", 1]
    assert not inferred.warnings, inferred.warnings
