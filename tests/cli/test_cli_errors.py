"""Every CLI failure is one line on stderr naming the file and the cause (issue 9)."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto
from onnx import helper as h

import onnx_symdims
from onnx_symdims import _cli_infer, cli
from tests.cli._cli_testing import (
    GOOD,
    assert_one_line_error,
    write_external_model,
    write_text_model,
)


def _dup_outputs_proto() -> onnx.ModelProto:
    x = h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])
    graph = h.make_graph(
        [
            h.make_node("Relu", ["X"], ["Z"], name="a"),
            h.make_node("Neg", ["X"], ["Z"], name="b"),
        ],
        "g",
        [x],
        [h.make_tensor_value_info("Z", TensorProto.FLOAT, None)],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])


def _undefined_attribute_proto() -> onnx.ModelProto:
    node = h.make_node("Relu", ["X"], ["Z"], name="a")
    node.attribute.add().name = "weird"  # type UNDEFINED: onnx-ir loads it, cannot save it
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("Z", TensorProto.FLOAT, None)],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])


def _make(kind: str, tmp_path) -> str:
    path = tmp_path / f"{kind}.onnx"
    if kind == "missing":
        return str(path)
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("this is not a model\n")
    elif kind == "json":
        path.write_text('{"graph": {}}')
    elif kind == "png":
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    elif kind == "truncated":
        full = tmp_path / "full.onnx"
        write_text_model(full, GOOD)
        path.write_bytes(full.read_bytes()[:-7])
    elif kind == "duplicate_outputs":
        path.write_bytes(_dup_outputs_proto().SerializeToString())
    return str(path)


@pytest.mark.parametrize(
    ("kind", "cause"),
    [
        ("missing", "no such file"),
        ("directory", "is a directory"),
        ("empty", "empty file (0 bytes)"),
        ("text", "looks like a text file"),
        ("json", "looks like a JSON"),
        ("png", "looks like a PNG image"),
        ("truncated", "truncated"),
        ("duplicate_outputs", "Output 'Z' is redeclared"),
    ],
)
def test_a_bad_model_file_is_one_line_and_nothing_is_written(kind, cause, tmp_path, capsys):
    path = _make(kind, tmp_path)
    out = tmp_path / "out.onnx"
    assert cli.main(["infer", path, "-o", str(out), "--json", str(tmp_path / "r.json")]) == 1
    assert_one_line_error(capsys.readouterr().err, path, cause)
    assert not out.exists()
    assert not (tmp_path / "r.json").exists()


def test_the_api_names_the_real_cause_of_an_unloadable_model(tmp_path):
    path = tmp_path / "dup.onnx"
    path.write_bytes(_dup_outputs_proto().SerializeToString())
    with pytest.raises(onnx_symdims.ModelLoadError, match="Output 'Z' is redeclared"):
        onnx_symdims.infer_symbolic_shapes(str(path))
    with pytest.raises(onnx_symdims.ModelLoadError, match="Output 'Z' is redeclared"):
        onnx_symdims.infer_symbolic_shapes(_dup_outputs_proto())
    with pytest.raises(onnx_symdims.ModelLoadError, match="empty file"):
        (tmp_path / "empty.onnx").write_bytes(b"")
        onnx_symdims.infer_symbolic_shapes(tmp_path / "empty.onnx")


def test_a_model_that_cannot_be_saved_is_one_line_and_leaves_no_file(tmp_path, capsys):
    path = tmp_path / "undef.onnx"
    path.write_bytes(_undefined_attribute_proto().SerializeToString())
    out = tmp_path / "out.onnx"
    assert cli.main(["infer", str(path), "-o", str(out)]) == 1
    assert_one_line_error(capsys.readouterr().err, str(out), "UNDEFINED")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["undef.onnx"]


def test_an_unwritable_output_fails_before_inference(tmp_path, capsys, monkeypatch):
    def no_inference(*args, **kwargs):
        raise AssertionError("inference ran although the output cannot be written")

    monkeypatch.setattr(_cli_infer, "SymbolicShapeInferencePass", no_inference)
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    assert cli.main(["infer", path, "-o", str(tmp_path / "no" / "out.onnx")]) == 1
    assert_one_line_error(capsys.readouterr().err, "does not exist")


def test_onnxruntime_refusing_the_model_is_one_line(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    x = h.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])
    w = h.make_tensor_value_info("W", TensorProto.FLOAT, ["N", 4, 1])
    graph = h.make_graph(
        [h.make_node("Concat", ["X", "W"], ["Z"], axis=0, name="BAD_NODE")],
        "g",
        [x, w],
        [h.make_tensor_value_info("Z", TensorProto.FLOAT, None)],
    )
    path = tmp_path / "concat.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), path)
    assert cli.main(["infer", str(path), "--verify"]) == 1
    assert_one_line_error(
        capsys.readouterr().err, str(path), "onnxruntime cannot load", "BAD_NODE"
    )


def test_an_unexpected_exception_is_one_line_unless_debugging(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(_cli_infer, "build_report", broken)
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    assert cli.main(["infer", path]) == 3
    assert_one_line_error(
        capsys.readouterr().err, "internal error: RuntimeError: boom second line"
    )
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["--debug", "infer", path])
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["infer", path, "--debug"])
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["infer", path])


def test_strict_error_is_one_line(tmp_path, capsys):
    path = write_text_model(
        tmp_path / "bad.onnx", "g (float[3] a, float[4] b) => (c) { c = Add(a, b) }"
    )
    assert cli.main(["infer", path, "--strict"]) == 1
    assert_one_line_error(capsys.readouterr().err, path, "cannot broadcast")


def test_loaded_models_keep_their_graph(tmp_path):
    # The checks around loading must not reject a real model.
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    assert [n.op_type for n in ir.load(path).graph] == ["Shape", "Concat", "Reshape"]
    assert [n.op_type for n in onnx_symdims.infer_symbolic_shapes(path).graph] == [
        "Shape",
        "Concat",
        "Reshape",
    ]


def test_bytes_that_parse_as_an_empty_model_are_not_a_model(tmp_path, capsys):
    # b"\x12\x00" is a valid protobuf (an empty field 2) but no ONNX model.
    path = tmp_path / "bytes.onnx"
    path.write_bytes(b"\x12\x00")
    assert cli.main(["infer", str(path)]) == 1
    assert_one_line_error(capsys.readouterr().err, str(path), "not an ONNX model")


@pytest.mark.parametrize("command", ["infer", "optimize"])
@pytest.mark.parametrize(
    "flag", [["--verify"], ["--verify-sizes", "N=2"], ["--verify-runs", "2"]]
)
def test_verify_without_onnxruntime_fails_before_any_work(
    command, flag, tmp_path, capsys, monkeypatch
):
    # A usage error (exit 2) found before loading, optimizing or writing anything.
    model = write_text_model(tmp_path / "m.onnx", GOOD)
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # not installed
    out = tmp_path / "out.onnx"
    code = cli.main(
        [command, model, "-o", str(out), "--json", str(tmp_path / "r.json"), *flag]
    )
    assert code == 2
    captured = capsys.readouterr()
    assert_one_line_error(captured.err, "--verify needs onnxruntime", "[verify]")
    assert captured.out == ""  # no summary: nothing ran
    assert not out.exists() and not (tmp_path / "r.json").exists()


def test_verify_runs_alone_asks_for_a_verify(tmp_path, capsys):
    # `--verify-runs N` implies --verify, as --verify-sizes and --verify-bind do.
    pytest.importorskip("onnxruntime")
    model = write_text_model(tmp_path / "m.onnx", GOOD)
    assert cli.main(["optimize", model, "--verify-runs", "1"]) == 0
    assert "outputs compared, 0 differences" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["optimize", "{m}"],  # was an internal error (exit 3)
        ["optimize", "{m}", "-o", "{out}"],
        ["infer", "{m}", "-o", "{out}"],  # was `error: OUT: no such file`, about the output
        ["infer", "{m}", "--verify"],
    ],
    ids=" ".join,
)
def test_missing_external_weights_are_named_before_any_work(argv, tmp_path, capsys):
    model = write_external_model(tmp_path)
    (tmp_path / "m.onnx.data").unlink()
    (tmp_path / "elsewhere").mkdir()
    out = tmp_path / "elsewhere" / "out.onnx"
    code = cli.main([a.format(m=model, out=out) for a in argv])
    assert code == 1
    captured = capsys.readouterr()
    assert_one_line_error(captured.err, model, "m.onnx.data does not exist", "'w'")
    assert captured.out == "" and not out.exists()


def test_infer_needs_no_external_weights_to_infer_or_to_write_beside_them(tmp_path, capsys):
    # Inference reads no weights; -o into the model's directory keeps pointing at the file.
    model = write_external_model(tmp_path)
    (tmp_path / "m.onnx.data").unlink()
    assert cli.main(["infer", model, "-q"]) == 0
    assert cli.main(["infer", model, "-q", "-o", str(tmp_path / "out.onnx")]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["infer", "optimize"])
@pytest.mark.parametrize("name", ["out.json", "out.textproto", "out.onnxtxt"])
def test_an_output_name_onnx_reads_as_another_format_is_refused(
    command, name, tmp_path, capsys
):
    # The commands write binary ONNX; `-o out.json` wrote a file that neither onnx.load nor
    # onnx-symdims could read back (parsed as JSON: UnicodeDecodeError).
    model = write_text_model(tmp_path / "m.onnx", GOOD)
    assert cli.main([command, model, "-o", str(tmp_path / name)]) == 2
    assert_one_line_error(capsys.readouterr().err, name, "name it .onnx", "--json REPORT")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (
            ["optimize", "--assume-nonempty"],
            ["--assume-nonempty", "onnx-symdims optimize --help"],
        ),
        (["infer", "--bogus"], ["--bogus", "onnx-symdims infer --help"]),
        (["frob"], ["invalid choice: 'frob'", "onnx-symdims --help"]),
    ],
)
def test_a_usage_error_points_at_the_help_that_lists_the_options(argv, needles, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert_one_line_error(capsys.readouterr().err, *needles)
