"""CLI and API hunt, stop 44: declared names kept, weights onnxruntime can load."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import onnx_symdims
from onnx_symdims import ModelLoadError, cli
from onnx_symdims._modelio import ModelSaveError, save_model
from tests.cli._cli_testing import assert_one_line_error

ort = pytest.importorskip("onnxruntime")


def _duplicate_input_model(path) -> str:
    """``Y = Add(X, X)`` with two graph inputs both named ``X`` (invalid: not SSA)."""
    x = h.make_tensor_value_info("X", TensorProto.FLOAT, ["N"])
    graph = h.make_graph(
        [h.make_node("Add", ["X", "X"], ["Y"], name="add")],
        "g",
        [x, x],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, ["N"])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("command", ["optimize", "infer"])
def test_a_duplicate_input_name_is_one_invalid_model_line(command, tmp_path, capsys):
    # optimize wrote inputs [X, X_1] with the Add reading X_1 twice (a declared input
    # renamed, exit 0); onnxruntime refuses the model ("Duplicate definition-site").
    path = _duplicate_input_model(tmp_path / "dup.onnx")
    out = tmp_path / "out.onnx"
    assert cli.main([command, path, "-o", str(out)]) == 1
    assert_one_line_error(
        capsys.readouterr().err, path, "invalid model", "graph input 'X' is declared twice"
    )
    assert not out.exists()
    with pytest.raises(Exception, match="Duplicate definition-site"):
        ort.InferenceSession(path)


@pytest.mark.parametrize("function", ["optimize", "infer_symbolic_shapes"])
@pytest.mark.parametrize("given", ["path", "proto"])
def test_the_api_refuses_a_duplicate_input_name(function, given, tmp_path):
    path = _duplicate_input_model(tmp_path / "dup.onnx")
    model = path if given == "path" else onnx.load(path)
    with pytest.raises(ModelLoadError, match="graph input 'X' is declared twice"):
        getattr(onnx_symdims, function)(model)


def _weights_in_parent_model(directory) -> str:
    """``y = MatMul(x, w)`` in ``directory/a/m.onnx``, ``w`` stored in ``directory/w.bin``.

    ``onnx.save`` refuses to write such a location, so the proto is built by hand.
    """
    values = (np.arange(16 * 16, dtype=np.float32) / 256).reshape(16, 16)
    (directory / "w.bin").write_bytes(values.tobytes())
    weight = onnx.TensorProto(
        name="w",
        data_type=TensorProto.FLOAT,
        dims=[16, 16],
        data_location=TensorProto.EXTERNAL,
    )
    for key, value in (("location", "../w.bin"), ("offset", "0"), ("length", "1024")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = h.make_graph(
        [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weight],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    (directory / "a").mkdir()
    path = directory / "a" / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize(
    ("command", "where"),
    [
        *((c, w) for c in ("optimize", "infer") for w in ("elsewhere", "sibling", "in_place")),
        ("optimize", "verify"),
        ("infer", "verify"),
        ("optimize", "summary"),  # folding reads weights
    ],
)
def test_weights_outside_the_model_directory_are_one_error_line(
    command, where, tmp_path, capsys
):
    # -o b/out.onnx wrote location '../w.bin' (it reaches the same file from b/), a model
    # onnxruntime refuses ("External data path escapes model directory"); the weights
    # cannot be copied either (onnx-ir will not read them: a path traversal guard).
    path = _weights_in_parent_model(tmp_path)
    (tmp_path / "b").mkdir()
    out = {
        "elsewhere": tmp_path / "out.onnx",
        "sibling": tmp_path / "b" / "out.onnx",
        "in_place": None,
        "verify": None,
        "summary": None,
    }[where]
    argv = [command, path, "-q"]
    argv += {"in_place": ["-i"], "verify": ["--verify"], "summary": []}.get(
        where, ["-o", str(out)]
    )
    before = (tmp_path / "a" / "m.onnx").read_bytes()
    assert cli.main(argv) == 1
    assert_one_line_error(
        capsys.readouterr().err, path, "initializer 'w'", "'../w.bin'", "outside"
    )
    assert out is None or not out.exists()
    assert (tmp_path / "a" / "m.onnx").read_bytes() == before
    with pytest.raises(Exception, match="escapes model directory"):
        ort.InferenceSession(path)


def test_infer_of_weights_outside_the_model_directory_still_prints_shapes(tmp_path):
    # Nothing is written and nothing runs: inference needs no weights. optimize refuses
    # the model above even without -o: folding reads weights.
    assert cli.main(["infer", _weights_in_parent_model(tmp_path), "-q"]) == 0


def test_save_model_refuses_weights_outside_the_model_directory(tmp_path):
    model = onnx_symdims.infer_symbolic_shapes(_weights_in_parent_model(tmp_path))
    with pytest.raises(ModelSaveError, match=r"'\.\./w\.bin', outside the model's directory"):
        save_model(model, tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()
