"""Malformed models found by a robustness hunt: each fails in one named line, or goes on."""

from __future__ import annotations

import os
import stat

import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h

from onnx_symdims import ModelLoadError, cli
from tests.cli._cli_testing import (
    GOOD,
    assert_one_line_error,
    write_external_model,
    write_text_model,
)


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


@pytest.mark.parametrize("given", ["path", "proto", "ir"])
def test_the_optimize_api_names_a_weight_whose_data_does_not_fill_its_shape(given, tmp_path):
    # Was numpy's "cannot reshape array of size 2 into shape (4,)" from deep in a rule.
    import onnx_ir as ir

    import onnx_symdims

    path = _short_weight_model(tmp_path / "short.onnx")
    model = {
        "path": lambda: path,
        "proto": lambda: onnx.load(path),
        "ir": lambda: ir.load(path),
    }[given]()
    error = ModelLoadError if given == "path" else ValueError
    with pytest.raises(error, match="initializer 'W' \\(FLOAT\\[4\\]\\) cannot be read"):
        onnx_symdims.optimize(model)


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


@pytest.mark.parametrize(
    ("argv", "cause"),
    [
        (["--json", "{model}"], "the report (--json {model}) would overwrite the input model"),
        (["-o", "{out}", "--json", "{out}"], "would overwrite the model output"),
        (
            ["-o", "{out}", "--save-as-external-data", "m.onnx"],
            "the weights file (--save-as-external-data, {model}) would overwrite the input",
        ),
        (["-o", "{out}", "--save-as-external-data", "out.onnx"], "overwrite the model output"),
        (["-o", "-"], "writing to stdout is not supported"),
        (["-o", ""], "-o/--output: an empty file name"),
        (["--json", ""], "--json: an empty file name"),
        (["--save-as-external-data", "w.data"], "needs -o OUT or -i"),
    ],
)
@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_two_outputs_on_one_file_are_refused_before_anything_is_written(
    command, argv, cause, tmp_path, capsys, monkeypatch
):
    # Each case used to lose a file (the report or the weights written over the model)
    # or to write nothing with exit 0 (an empty name), or a file named "-".
    monkeypatch.chdir(tmp_path)
    model = write_text_model(tmp_path / "m.onnx", GOOD)
    before = (tmp_path / "m.onnx").read_bytes()
    names = {"model": model, "out": str(tmp_path / "out.onnx")}
    args = [a.format(**names) for a in argv]
    assert cli.main([command, model, "-q", *args]) == 2
    assert_one_line_error(capsys.readouterr().err, cause.format(**names))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    assert (tmp_path / "m.onnx").read_bytes() == before


@pytest.mark.parametrize("flag", ["--json", "-o"])
def test_an_output_over_the_input_weights_file_is_refused(flag, tmp_path, capsys):
    model = write_external_model(tmp_path)
    weights = tmp_path / "m.onnx.data"
    before = weights.read_bytes()
    assert cli.main(["optimize", model, "-q", flag, str(weights)]) == 2
    assert_one_line_error(capsys.readouterr().err, "would overwrite the weights file of")
    assert weights.read_bytes() == before


def test_in_place_keeps_the_file_mode(tmp_path, capsys):
    model = write_text_model(tmp_path / "m.onnx", GOOD)
    os.chmod(model, 0o600)
    assert cli.main(["infer", model, "-i", "-q"]) == 0
    assert stat.S_IMODE(os.stat(model).st_mode) == 0o600


def _missing_input_model(path) -> str:
    """``Y = Add(X, Q)`` where nothing defines ``Q``: onnx-ir warns while loading."""
    graph = h.make_graph(
        [h.make_node("Add", ["X", "Q"], ["Y"], name="a")],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_library_warnings_are_one_prefixed_line_and_quiet_under_q(tmp_path, capsys):
    # logging's last resort printed them bare; -q printed them although it means errors only.
    path = _missing_input_model(tmp_path / "m.onnx")
    assert cli.main(["infer", path]) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: Input 'Q' of node 'a' (::Add:) cannot be found")
    assert cli.main(["infer", path, "--strict", "-q"]) == 1
    assert_one_line_error(capsys.readouterr().err, "input 'Q' is defined by no node")


def test_python_warnings_are_one_line(capsys):
    handler = cli._WarningLines(debug=False)
    handler.show_warning(
        RuntimeWarning("divide by zero encountered\n  q = x // y"),
        RuntimeWarning,
        "/x/op_div.py",
        18,
    )
    assert capsys.readouterr().err == (
        "warning: RuntimeWarning: divide by zero encountered q = x // y (op_div.py:18)\n"
    )


@pytest.mark.parametrize(
    ("argv", "cause"),
    [
        # Inference under both assumptions at once proves anything.
        (
            ["infer", "--assume-nonempty", "--symbol-range", "batch=0:0"],
            "--assume-nonempty (every input size >= 1) contradicts --symbol-range batch",
        ),
        # Written dims hold inside the ranges only: a mismatch outside is no error.
        (
            ["infer", "--symbol-range", "seq=1:4", "--verify-sizes", "seq=9"],
            "--verify-sizes seq=9 is outside the sizes assumed for it (1..4",
        ),
        (
            ["infer", "--assume-nonempty", "--verify-sizes", "batch=0"],
            "--verify-sizes batch=0 is outside the sizes assumed for it (1..",
        ),
        (
            ["optimize", "--input-shape", "x=2,?,64", "--verify-sizes", "batch=3"],
            "--verify-sizes batch=3 is outside the sizes assumed for it (2..2",
        ),
        # The last one silently won.
        (
            ["optimize", "--input-shape", "x=2,?,64", "--input-shape", "x=3,?,64"],
            "--input-shape x is given twice",
        ),
        (
            ["infer", "--symbol-range", "seq=1:", "--symbol-range", "seq=2:"],
            "--symbol-range seq is given twice",
        ),
    ],
)
def test_contradicting_size_options_are_usage_errors(argv, cause, tmp_path, capsys):
    path = write_text_model(tmp_path / "m.onnx", GOOD)
    assert cli.main([argv[0], path, "-q", *argv[1:]]) == 2
    assert_one_line_error(capsys.readouterr().err, cause)


def _save(path, nodes, inputs, outputs) -> str:
    graph = h.make_graph(nodes, "g", inputs, outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_verify_of_a_sequence_output_checks_no_list_shape(tmp_path, capsys):
    # Was "MISMATCH Y: inferred [N, 1], actual [4, 8, 1]": the list's shape against the
    # elements' shape the type declares.
    pytest.importorskip("onnxruntime")
    path = _save(
        tmp_path / "split.onnx",
        [h.make_node("SplitToSequence", ["X"], ["Y"], axis=1, name="s")],
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_sequence_value_info("Y", TensorProto.FLOAT, ["N", 1])],
    )
    assert cli.main(["infer", path, "--verify", "1"]) == 0
    out = capsys.readouterr().out
    assert "MISMATCH" not in out and "0 mismatches" in out


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_verify_feeds_a_sequence_input_a_list(command, tmp_path, capsys):
    # Every run failed: "input with name: 'S' expected to be of type: 3 but received a
    # tensor".
    pytest.importorskip("onnxruntime")
    path = _save(
        tmp_path / "seq.onnx",
        [h.make_node("SequenceAt", ["S", "I"], ["Y"], name="at")],
        [
            h.make_tensor_sequence_value_info("S", TensorProto.FLOAT, ["N", 4]),
            h.make_tensor_value_info("I", TensorProto.INT64, []),
        ],
        [h.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])],
    )
    assert cli.main([command, path, "--verify", "1", "-q"]) == 0, capsys.readouterr().err
