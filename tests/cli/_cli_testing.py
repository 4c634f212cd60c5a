"""Shared helpers of the CLI tests: small models on disk and a one-line-error check."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto
from onnx import helper as h

from onnx_symdims import cli

GOOD = """g (float[batch, seq, 64] x) => (float[batch, seq, 4, 16] y) <int64[2] heads = {4, 16}> {
    s = Shape<start=0, end=2>(x)
    t = Concat<axis=0>(s, heads)
    y = Reshape(x, t)
}"""


def example_path() -> str:
    return str(importlib.resources.files("onnx_symdims") / "data" / cli.EXAMPLE_MODEL)


def model_from_text(body: str, opset: int = 18) -> ir.Model:
    return ir.from_onnx_text(f'<ir_version: 10, opset_import: ["" : {opset}]>\n{body}')


def write_text_model(path: Path, body: str) -> str:
    ir.save(model_from_text(body), path)
    return str(path)


def write_external_model(directory: Path) -> str:
    """``y = MatMul(x[N, 64], w[64, 64])`` with ``w`` in ``m.onnx.data`` beside it."""
    w = onnx.numpy_helper.from_array(
        (np.arange(64 * 64, dtype=np.float32) / 4096).reshape(64, 64), "w"
    )
    graph = h.make_graph(
        [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path = directory / "m.onnx"
    onnx.save(
        model, path, save_as_external_data=True, location="m.onnx.data", size_threshold=0
    )
    return str(path)


def assert_one_line_error(err: str, *needles: str) -> None:
    """stderr is exactly one ``error:`` line containing every needle, no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, err)
