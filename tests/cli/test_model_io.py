"""Writing models whose weights are external data (issue 9)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import cli
from onnx_symdims._modelio import ModelSaveError, save_model
from tests.cli._cli_testing import assert_one_line_error, write_external_model

ort = pytest.importorskip("onnxruntime")


def _runs(path) -> float:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return float(session.run(None, {"x": np.ones((2, 64), np.float32)})[0].sum())


@pytest.fixture
def external(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    path = write_external_model(source)
    return path, _runs(path)


def test_output_in_another_directory_gets_the_weights_next_to_it(external, tmp_path, capsys):
    path, expected = external
    target = tmp_path / "other"
    target.mkdir()
    out = target / "out.onnx"
    assert cli.main(["infer", path, "-o", str(out)]) == 0
    assert "wrote them to out.onnx.data next to the output" in capsys.readouterr().out
    assert sorted(p.name for p in target.iterdir()) == ["out.onnx", "out.onnx.data"]
    assert _runs(out) == expected


def test_output_beside_the_weights_keeps_referencing_them(external, capsys):
    path, expected = external
    out = path.replace("m.onnx", "out.onnx")
    assert cli.main(["infer", path, "-o", out]) == 0
    assert "(the weights" not in capsys.readouterr().out
    (tensor,) = (v.const_value for v in ir.load(out).graph.initializers.values())
    assert tensor.location == "m.onnx.data"
    assert _runs(out) == expected


def test_save_as_external_data_names_the_file(external, tmp_path, capsys):
    path, expected = external
    out = tmp_path / "o.onnx"
    argv = ["infer", path, "-o", str(out), "--save-as-external-data", "weights.bin"]
    assert cli.main(argv) == 0
    assert "wrote the weights to weights.bin" in capsys.readouterr().out
    assert (tmp_path / "weights.bin").stat().st_size == 64 * 64 * 4
    assert _runs(out) == expected
    argv[-1] = "../escape.bin"
    assert cli.main(argv) == 1
    assert_one_line_error(capsys.readouterr().err, "must be a plain file name")


def test_in_place_with_external_weights_keeps_a_loadable_model(external, capsys):
    path, expected = external
    assert cli.main(["infer", path, "-i", "--verify-runs", "1", "--verify"]) == 0
    assert " 0 mismatches" in capsys.readouterr().out
    assert _runs(path) == expected


def test_save_model_refuses_to_overwrite_the_weights_it_reads(external):
    path, expected = external
    model = ir.load(path)
    result = save_model(model, path, external_data="m.onnx.data")
    assert result.external_data is None and "stay in m.onnx.data" in result.note
    assert _runs(path) == expected
    with pytest.raises(ModelSaveError, match="is a directory"):
        save_model(model, path.rsplit("/", 1)[0])
