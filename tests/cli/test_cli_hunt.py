"""Malformed models found by a robustness hunt: each fails in one named line, or goes on."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

from onnx_symdims import cli
from tests.cli._cli_testing import assert_one_line_error


def _short_weight_model(path, *, raw: bytes | None = None) -> str:
    """``Y = Add(X, W)`` with ``W: float[4]`` holding fewer values than its shape needs."""
    weight = onnx.TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4])
    if raw is None:
        weight.float_data.extend([1.0, 2.0])
    else:
        weight.raw_data = raw
    graph = h.make_graph(
        [h.make_node("Add", ["X", "W"], ["Y"], name="add")],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])],
        [weight],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize(
    ("raw", "cause"),
    [(None, "cannot reshape array of size 2"), (b"\0" * 7, "multiple of element size")],
)
def test_optimize_names_a_weight_whose_data_does_not_fill_its_shape(
    raw, cause, tmp_path, capsys
):
    # Was exit 3, "internal error: ValueError: ..." naming neither the file nor the weight.
    path = _short_weight_model(tmp_path / "short.onnx", raw=raw)
    out = tmp_path / "out.onnx"
    assert cli.main(["optimize", path, "-o", str(out)]) == 1
    assert_one_line_error(capsys.readouterr().err, path, "initializer 'W'", cause)
    assert not out.exists()


def test_infer_goes_on_past_a_weight_whose_data_does_not_fill_its_shape(tmp_path, capsys):
    path = _short_weight_model(tmp_path / "short.onnx")
    assert cli.main(["infer", path, "-q"]) == 0


def _huge_input_model(path) -> str:
    """``Y = Relu(X)`` with ``X: float[2**62, 4]``: no run can build that input."""
    graph = h.make_graph(
        [h.make_node("Relu", ["X"], ["Y"], name="relu")],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, [2**62, 4])],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_verify_of_an_input_too_big_to_build_says_so(command, tmp_path, capsys):
    # optimize --verify was exit 3 (numpy's "array is too big" out of the compare loop);
    # infer --verify blamed onnxruntime and offered "--verify-sizes " with no name.
    pytest.importorskip("onnxruntime")
    path = _huge_input_model(tmp_path / "huge.onnx")
    assert cli.main([command, path, "--verify", "1", "-q"]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err
    assert "more than 1 GiB (input 'X' has shape [4611686018427387904, 4])" in err
    assert "no named dims" in err and "--verify-sizes ." not in err
    assert err.strip().splitlines()[-1].startswith("error: verify: no onnxruntime run")
