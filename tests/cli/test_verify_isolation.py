"""Verification survives onnxruntime crashing: the session lives in a child process.

onnxruntime 1.32 kills its process with SIGFPE on ``Einsum("ij,kj->ik")`` of an empty
``j`` axis (an integer division by zero in the kernel); verification tries each size at
0 on purpose. Run in the caller's process, that ended ``--verify`` without a word.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import infer_symbolic_shapes
from onnx_symdims._verify_worker import IsolatedSession, OnnxruntimeCrash
from onnx_symdims.cli import main
from onnx_symdims.verify import compare_models, verify_model

pytest.importorskip("onnxruntime")

EINSUM = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[B, L] x) => (float[B, B] y) {
    y = Einsum<equation = "ij,kj->ik">(x, x)
}
"""


def _model() -> ir.Model:
    return ir.from_onnx_text(EINSUM)


def _session() -> IsolatedSession:
    return IsolatedSession(ir.serde.serialize_model(_model()).SerializeToString())


def test_a_crash_fails_one_run_and_the_next_run_gets_a_new_process():
    session = _session()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (before,) = session.run(["y"], {"x": x})
    with pytest.raises(OnnxruntimeCrash, match="SIGFPE"):
        session.run(["y"], {"x": np.zeros((2, 0), np.float32)})
    (after,) = session.run(["y"], {"x": x})
    np.testing.assert_array_equal(after, x @ x.T)
    np.testing.assert_array_equal(before, after)
    session.close()


def test_an_error_onnxruntime_raises_is_a_runtime_error_and_keeps_the_process():
    session = _session()
    with pytest.raises(RuntimeError, match="x") as raised:
        session.run(["y"], {"x": np.zeros((2, 3, 4), np.float32)})  # wrong rank
    assert not isinstance(raised.value, OnnxruntimeCrash)
    assert session.run(["y"], {"x": np.ones((1, 2), np.float32)})[0].tolist() == [[2.0]]
    session.close()


def test_verify_model_records_the_crash_as_a_failed_edge_run():
    model = infer_symbolic_shapes(_model())
    report = verify_model(model, runs=2, edges=True)
    assert report.mismatches == []
    crashed = [e for e in report.edges if "crashed (SIGFPE)" in e.error]
    assert [e.binding["L"] for e in crashed] == [0], report.edges
    assert any(not e.error for e in report.edges)  # the other edge sizes ran


def test_compare_models_survives_the_crash():
    report = compare_models(_model(), _model(), runs=2, edges=True)
    assert report.differences == []
    assert report.runs > 0


@pytest.mark.parametrize("command", ["infer", "optimize"])
def test_cli_verify_ends_normally(tmp_path, capsys, command):
    path = tmp_path / "einsum.onnx"
    ir.save(_model(), path)
    code = main([command, str(path), "-o", str(tmp_path / "out.onnx"), "--verify"])
    out = capsys.readouterr()
    assert code == 0, out
    assert "verify:" in out.out + out.err
