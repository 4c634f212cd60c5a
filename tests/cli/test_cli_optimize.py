"""``onnx-symdims optimize``: counts, report, writing, --verify, one-line errors."""

from __future__ import annotations

import json

import onnx
import pytest

from onnx_symdims import cli
from tests.cli._cli_testing import GOOD, example_path, write_external_model, write_text_model

pytest.importorskip("onnxruntime")


def test_optimize_writes_a_smaller_model_and_a_report(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", GOOD)
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    assert cli.main(["optimize", src, "-o", str(out), "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "nodes: 3 -> 1" in printed and "MaterializeReshapeTarget" in printed
    written = onnx.load(str(out))
    assert [n.op_type for n in written.graph.node] == ["Reshape"]
    assert [d.dim_param or d.dim_value for d in written.graph.output[0].type.tensor_type.shape.dim] == [
        "batch", "seq", 4, 16
    ]
    data = json.loads(report.read_text())
    assert data["schema"] == "onnx-symdims.optimize-report/1"
    assert data["nodes"]["before"] == 3 and data["nodes"]["after"] == 1
    assert data["fired"]["MaterializeReshapeTarget"] == 1
    assert "total" in data["timings"]


def test_optimize_verify_compares_outputs_on_the_bundled_decoder(capsys):
    assert cli.main(["optimize", "--verify"]) == 0
    printed = capsys.readouterr().out
    assert "0 differences" in printed and "nothing written" in printed


def test_optimize_keeps_external_weights_loadable(tmp_path, capsys):
    import onnxruntime as ort

    (tmp_path / "src").mkdir()
    src = write_external_model(tmp_path / "src")
    out = tmp_path / "other" / "o.onnx"
    out.parent.mkdir()
    assert cli.main(["optimize", src, "-o", str(out)]) == 0
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize(
    "argv",
    [
        ["optimize", "missing.onnx", "-o", "x.onnx"],
        ["optimize", "--fusions", "tensorrt"],
        ["optimize", example_path(), "--verify-sizes", "nosuchdim=3"],
    ],
)
def test_optimize_failures_are_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    try:
        status = cli.main(argv)
    except SystemExit as e:  # argparse's usage errors exit, with the same one line
        status = e.code
    assert status != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert not (tmp_path / "x.onnx").exists()
