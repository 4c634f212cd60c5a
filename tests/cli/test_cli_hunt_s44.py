"""CLI and API hunt, stop 44: declared names kept, weights onnxruntime can load."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

import onnx_symdims
from onnx_symdims import ModelLoadError, cli
from onnx_symdims._modelio import ModelSaveError, save_model
from tests.cli._cli_testing import assert_one_line_error, write_external_model

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


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        # Left onnx-ir's temporary directory '...xxxx' beside the output; "OUT: is a
        # directory" after all the work.
        (".", "'.' is a directory, not a file name"),
        ("sub", "'sub' is a directory, not a file name"),
        ("w/", "'w/' is a directory, not a file name"),
        # Was "error: out.onnx: no such file".
        ("nodir/w.data", "'nodir/w.data': directory"),
        # Failed after the work.
        ("sub/../w.data", "must be a plain file name (inside the output's directory"),
        ("../w.data", "must be a plain file name (inside the output's directory"),
    ],
)
@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_a_bad_external_data_name_fails_before_any_work(
    command, name, cause, tmp_path, capsys
):
    path = write_external_model(tmp_path)
    (tmp_path / "sub").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    out = str(tmp_path / "out.onnx")
    argv = [command, path, "-o", out, "--save-as-external-data", name, "-q"]
    assert cli.main(argv) == 1
    assert_one_line_error(capsys.readouterr().err, "--save-as-external-data", cause)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_external_data_in_a_subdirectory_loads_in_onnxruntime(tmp_path, capsys):
    path = write_external_model(tmp_path)
    (tmp_path / "b" / "w").mkdir(parents=True)
    out = tmp_path / "b" / "out.onnx"
    argv = ["optimize", path, "-o", str(out), "--save-as-external-data", "w/x.data", "-q"]
    assert cli.main(argv) == 0
    assert (tmp_path / "b" / "w" / "x.data").stat().st_size == 64 * 64 * 4
    x = np.ones((2, 64), np.float32)
    got = ort.InferenceSession(str(out)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, ort.InferenceSession(path).run(None, {"x": x})[0])


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("*".join(f"x{i}" for i in range(17)), "exceeds the expression size limits"),
        ("(a+b+c+d)*(e+f+g+h)*(i+j+k+l)*(m+n+o+p)", "exceeds the expression size limits"),
        ("a*9223372036854775807*2", "a number in its canonical form is outside int64"),
    ],
)
def test_simplify_of_an_expression_past_the_engine_limits_says_why(text, cause, capsys):
    # Was "error: cannot print an unknown (size)".
    assert cli.main(["simplify", text]) == 2
    assert_one_line_error(capsys.readouterr().err, f"cannot simplify {text!r}", cause)


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_the_report_is_written_when_onnxruntime_refuses_the_model(command, tmp_path, capsys):
    # The model was written but --json was not: a script found no report to read why.
    graph = h.make_graph(
        [h.make_node("Foo", ["X"], ["Y"], domain="my.domain", name="foo")],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N"])],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    opsets = [h.make_opsetid("", 18), h.make_opsetid("my.domain", 1)]
    path = tmp_path / "custom.onnx"
    path.write_bytes(h.make_model(graph, opset_imports=opsets).SerializeToString())
    out, report = tmp_path / "out.onnx", tmp_path / "r.json"
    argv = [command, str(path), "-o", str(out), "--json", str(report), "--verify", "1", "-q"]
    assert cli.main(argv) == 1
    assert_one_line_error(capsys.readouterr().err, "onnxruntime cannot load the model")
    written = json.loads(report.read_text())
    assert written["written"] == {
        "model": str(out),
        "external_data": None,
        "json": str(report),
    }
    assert written["verify"]["runs"] == 0
    assert "my.domain:Foo" in written["verify"]["errors"][0]


@pytest.mark.parametrize("runs", [["--verify-runs", "0"], ["--verify", "0"], ["--verify=0"]])
@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_verify_of_zero_draws_without_sizes_is_a_usage_error(command, runs, tmp_path, capsys):
    # Ran nothing and failed (exit 1) after the work with "no onnxruntime run succeeded".
    path = write_external_model(tmp_path)
    out = tmp_path / "out.onnx"
    assert cli.main([command, path, "-o", str(out), *runs]) == 2
    assert_one_line_error(
        capsys.readouterr().err, "--verify-runs 0", "nothing would be checked"
    )
    assert not out.exists()
    argv = [command, path, "--verify-runs", "0", "--verify-sizes", "N=3", "-q"]
    assert cli.main(argv) == 0


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_the_report_over_the_weights_copied_next_to_the_output_is_refused(
    command, tmp_path, capsys
):
    # -o b/out.onnx copies the weights to b/out.onnx.data; --json b/out.onnx.data then
    # wrote the report over them (exit 0, a model onnxruntime could not load).
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = write_external_model(tmp_path / "a")
    out, data = tmp_path / "b" / "out.onnx", tmp_path / "b" / "out.onnx.data"
    assert cli.main([command, path, "-o", str(out), "--json", str(data), "-q"]) == 2
    assert_one_line_error(
        capsys.readouterr().err, f"the report (--json {data}) would overwrite the weights"
    )
    assert list((tmp_path / "b").iterdir()) == []
    assert cli.main([command, path, "-o", str(out), "--json", str(tmp_path / "r.json")]) == 0
    x = np.ones((2, 64), np.float32)
    got = ort.InferenceSession(str(out)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, ort.InferenceSession(path).run(None, {"x": x})[0])


def _sparse_model(path) -> str:
    """``Y = Add(X, S)`` with ``S`` a sparse initializer (onnxruntime loads it)."""
    sparse = onnx.SparseTensorProto(dims=[4])
    sparse.values.CopyFrom(onnx.numpy_helper.from_array(np.array([1.0], np.float32), "S"))
    sparse.indices.CopyFrom(onnx.numpy_helper.from_array(np.array([2], np.int64), "S_i"))
    graph = h.make_graph(
        [h.make_node("Add", ["X", "S"], ["Y"], name="add")],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])],
        sparse_initializer=[sparse],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_a_sparse_initializer_is_one_error_line(command, tmp_path, capsys):
    # onnx-ir drops it: the written model read an undefined 'S' (onnxruntime: "Node
    # input 'S' is not a graph input, initializer, or output of a previous node"), exit 0.
    path = _sparse_model(tmp_path / "sparse.onnx")
    ort.InferenceSession(path)
    out = tmp_path / "out.onnx"
    assert cli.main([command, path, "-o", str(out), "-q"]) == 1
    assert_one_line_error(capsys.readouterr().err, path, "sparse initializer 'S'")
    assert not out.exists()


def test_the_api_refuses_a_sparse_initializer(tmp_path):
    path = _sparse_model(tmp_path / "sparse.onnx")
    for model in (path, onnx.load(path)):
        with pytest.raises(ModelLoadError, match="sparse initializer 'S' is not supported"):
            onnx_symdims.optimize(model)


def test_dropped_training_info_is_a_warning(tmp_path, capsys):
    graph = h.make_graph(
        [h.make_node("Relu", ["X"], ["Y"], name="relu")],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N"])],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, ["N"])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    model.training_info.add().algorithm.name = "step"
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert cli.main(["infer", str(path), "-o", str(tmp_path / "out.onnx")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {path}: the model's training_info is dropped (not supported)"]


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_a_truncated_weights_file_is_named_before_any_work(command, tmp_path, capsys):
    # Was "error: b/out.onnx: External data file ... is shorter than expected", naming
    # the output, after the work.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = write_external_model(tmp_path / "a")
    with open(tmp_path / "a" / "m.onnx.data", "r+b") as f:
        f.truncate(1000)
    out = tmp_path / "b" / "out.onnx"
    assert cli.main([command, path, "-o", str(out), "-q"]) == 1
    assert_one_line_error(
        capsys.readouterr().err, path, "is truncated: initializer 'w' needs bytes up to 16384"
    )
    assert list((tmp_path / "b").iterdir()) == []
