"""Bugs the stop-44 CLI hunt (helper-83) found outside the CLI's files, now fixed.

Each test failed before its fix (they were strict xfails naming the file to fix):
``optimize(ir.Model)`` renamed a duplicate input name (``_api.py``); a numeric
``dim_param`` was read as a size (``shapes/_context.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnx_symdims
from onnx_symdims import cli

ort = pytest.importorskip("onnxruntime")


def test_the_optimize_api_refuses_an_ir_model_with_a_duplicate_input_name():
    import onnx_ir as ir

    x = ir.Value(name="X", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["N"]))
    x2 = ir.Value(name="X", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["N"]))
    add = ir.node("Add", [x2, x2], name="add")
    add.outputs[0].name = "Y"
    graph = ir.Graph([x, x2], add.outputs, nodes=[add], opset_imports={"": 18}, name="g")
    model = ir.Model(graph, ir_version=10)
    with pytest.raises(ValueError, match="graph input 'X' is declared twice"):
        onnx_symdims.optimize(model)


@pytest.mark.parametrize("text", ["4", "0"])
def test_a_numeric_dim_param_is_not_read_as_a_size(text, tmp_path):
    import onnx
    from onnx import TensorProto
    from onnx import helper as h

    graph = h.make_graph(
        [h.make_node("Concat", ["X", "Z"], ["Y"], axis=0, name="cat")],
        "g",
        [
            h.make_tensor_value_info("X", TensorProto.FLOAT, [text, 4]),
            h.make_tensor_value_info("Z", TensorProto.FLOAT, ["M", 4]),
        ],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), path)
    out = tmp_path / "out.onnx"
    assert cli.main(["infer", str(path), "-o", str(out), "-q"]) == 0
    feeds = {"X": np.ones((3, 4), np.float32), "Z": np.ones((2, 4), np.float32)}
    (y,) = ort.InferenceSession(str(out)).run(None, feeds)
    written = onnx.load(out).graph.output[0].type.tensor_type.shape.dim[0]
    # 3 + 2 rows: no dim written in M alone (or M plus a constant) can say 5 here.
    assert y.shape[0] == 5
    assert written.dim_param not in ("M", f"M+{text}")
