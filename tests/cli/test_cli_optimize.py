"""``onnx-symdims optimize``: counts, report, writing, --verify, the guard, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import cli
from tests.cli._cli_testing import (
    GOOD,
    assert_one_line_error,
    example_path,
    write_external_model,
    write_text_model,
)

pytest.importorskip("onnxruntime")


def test_optimize_writes_a_smaller_model_and_a_report(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", GOOD)
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    assert cli.main(["optimize", src, "-o", str(out), "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "nodes: 3 -> 1" in printed and "MaterializeReshapeTarget" in printed
    written = onnx.load(str(out))
    assert [n.op_type for n in written.graph.node] == ["Reshape"]
    assert [
        d.dim_param or d.dim_value for d in written.graph.output[0].type.tensor_type.shape.dim
    ] == ["batch", "seq", 4, 16]
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


def test_optimize_verify_reads_external_weights_beside_the_model(
    tmp_path, monkeypatch, capsys
):
    # --verify ran the original from a copy whose external weights were read from the
    # current directory, not the model's: "onnxruntime cannot load the model".
    (tmp_path / "src").mkdir()
    (tmp_path / "cwd").mkdir()
    src = write_external_model(tmp_path / "src")
    monkeypatch.chdir(tmp_path / "cwd")
    out = tmp_path / "other" / "o.onnx"
    out.parent.mkdir()
    assert cli.main(["optimize", src, "-o", str(out), "--verify", "2"]) == 0
    assert cli.main(["optimize", src, "--verify", "2"]) == 0
    assert "0 differences" in capsys.readouterr().out


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


# A Mul by a constant that is not all ones: nothing to rewrite, the rule says why.
MUL = "g (float[N, 4] x) => (y) <float[4] w = {1.0, 2.0, 3.0, 4.0}> { y = Mul(x, w) }"

REPORT_KEYS = {
    "schema",
    "tool",
    "command",
    "model",
    "options",
    "inputs",
    "outputs",
    "nodes",
    "rounds",
    "fired",
    "declined",
    "diagnostics",
    "written",
    "verify",
    "timings",
}


def test_optimize_report_has_every_documented_key(tmp_path):
    src = write_text_model(tmp_path / "m.onnx", GOOD)
    report = tmp_path / "r.json"
    assert cli.main(["optimize", src, "--json", str(report), "-q"]) == 0
    data = json.loads(report.read_text())
    assert set(data) == REPORT_KEYS
    assert data["command"] == "optimize"
    assert data["tool"] == {"name": "onnx-symdims", "version": onnx_symdims.__version__}
    assert data["model"] == {"path": src, "graph": "g", "nodes": 3, "opsets": {"": 18}}
    assert data["inputs"] == [{"name": "x", "dtype": "FLOAT", "shape": ["batch", "seq", 64]}]
    assert data["outputs"] == [
        {"name": "y", "dtype": "FLOAT", "shape": ["batch", "seq", 4, 16]}
    ]
    assert data["options"] == {
        "fusions": None,
        "max_rounds": 6,
        "max_constant_elements": 1024,
        "inexact_floats": False,
        "symbol_ranges": {},
        "input_shapes": {},
        "verify": False,
        "verify_runs": 3,
        "verify_sizes": [],
        "verify_bind": [],
        "save_as_external_data": None,
    }
    assert data["written"] == {"model": None, "external_data": None, "json": str(report)}
    assert data["verify"] is None
    assert data["diagnostics"] == {"total": 0, "by_severity": {}, "by_op": {}}
    assert set(data["timings"]) == {"load", "optimize", "total"}


def test_optimize_prints_why_rules_declined(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", MUL)
    report = tmp_path / "r.json"
    assert cli.main(["optimize", src, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "rules fired: none" in out
    reason = "MulByOne: the other operand is not proven to be all 1"
    assert f"  1 x {reason}" in out
    assert json.loads(report.read_text())["declined"][reason] == 1
    # The JSON was written, the model was not: the last lines say which.
    assert "model not written: pass -o OUT.onnx" in out
    assert "nothing written" not in out
    assert "in 1 round," in out


def test_optimize_summary_shapes_and_nothing_written(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", GOOD)
    assert cli.main(["optimize", src]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  y  float[batch, seq, 4, 16]" in lines
    assert (
        "nothing written: pass -o OUT.onnx to save the optimized model (or -i to update "
        "MODEL in place)"
    ) in lines
    assert lines[-1].startswith("time: ") and "imports and the rest" in lines[-1]
    assert len(set(lines)) == len(lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_optimize_in_place_and_quiet(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", GOOD)
    assert cli.main(["optimize", src, "-i", "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert [n.op_type for n in onnx.load(src).graph.node] == ["Reshape"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]  # no temp file left
    assert cli.main(["optimize", "-i"]) == 2  # never into the bundled example
    assert_one_line_error(capsys.readouterr().err, "needs a MODEL")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--verify-bind", "total"], "--verify-bind expects NAME=EXPR"),
        (["--verify-bind", "nosuch=batch"], "nosuch is not a symbol"),
        (["--verify-sizes", "batch=x"], "--verify-sizes expects"),
        (["--verify-sizes", "batch=1,sek=2"], "sek is not a symbol"),
    ],
)
def test_optimize_bad_verify_values_are_reported_before_anything_is_written(
    argv, needle, tmp_path, capsys
):
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    status = cli.main(
        ["optimize", example_path(), "-o", str(out), "--json", str(report), *argv]
    )
    assert status == 2
    assert_one_line_error(capsys.readouterr().err, needle)
    assert not out.exists() and not report.exists()


def test_optimize_verify_reports_a_difference_as_structured_json(
    tmp_path, monkeypatch, capsys
):
    # The real pass, then a deliberate corruption (Relu -> Neg) the comparison must catch.
    import onnx_symdims.rewrite

    real = onnx_symdims.rewrite.OptimizePass

    class Corrupting(real):
        def call(self, model):
            result = super().call(model)
            for node in model.graph:
                if node.op_type == "Relu":
                    node.op_type = "Neg"
            return result

    monkeypatch.setattr(onnx_symdims.rewrite, "OptimizePass", Corrupting)
    src = write_text_model(
        tmp_path / "m.onnx", "g (float[N, 4] x) => (y) { a = Add(x, x) \n y = Relu(a) }"
    )
    report = tmp_path / "r.json"
    assert (
        cli.main(["optimize", src, "--verify", "--verify-runs", "1", "--json", str(report)])
        == 1
    )
    assert "  DIFFERENCE y: values: " in capsys.readouterr().out
    verify = json.loads(report.read_text())["verify"]
    assert verify["runs"] >= 1 and verify["compared_outputs"] >= 1
    difference = verify["differences"][0]
    assert set(difference) == {"output", "kind", "detail", "sizes", "max_abs"}
    assert difference["output"] == "y" and difference["kind"] == "values"
    assert set(difference["sizes"]) == {"N"} and difference["max_abs"] > 0


def test_a_fusion_undone_by_the_guard_is_a_diagnostic_of_the_report(tmp_path, capsys):
    # On this GPT-2 export the guard undoes onnxscript's MHA steps, which swallow the
    # flattening Reshape after attention (tests/rewrite/test_pipeline.py), and keeps the
    # others.
    src = str(Path(__file__).resolve().parents[1] / "data" / "gpt2_kv_legacy.onnx")
    report = tmp_path / "r.json"
    assert cli.main(["optimize", src, "--fusions", "ort", "--json", str(report)]) == 0
    entry = json.loads(report.read_text())["diagnostics"]["by_op"]["<optimize>"]
    assert entry["severity"] == {"warning": entry["count"]}
    # onnxscript 0.7: 'ort.mha1' and 'ort.mha2'; 0.5 has no step consuming the SDPA
    # there, which is undone as left over ('ort.sdpa')
    assert entry["examples"][0].startswith(("fusions 'ort.mha1", "fusions 'ort.sdpa"))
    assert " undone: " in entry["examples"][0]
    out = capsys.readouterr().out
    assert f"  <optimize>: {entry['count']}" in out and entry["examples"][0] in out
    fired = out.split("rules fired:")[1].splitlines()[0]
    assert "fusion.skip_layer_normalization" in fired and "fusion.mha1" not in fired


def test_optimize_shows_progress_on_big_models_and_times_the_whole_run(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(cli, "BIG_FILE", 0)
    monkeypatch.setattr(cli, "PROGRESS_THRESHOLD", 1)
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    argv = ["optimize", path, "-o", str(out), "--json", str(report), "--verify-runs", "1"]
    assert cli.main([*argv, "--verify"]) == 0
    captured = capsys.readouterr()
    stages = [line.split("...")[0] for line in captured.err.splitlines()]
    assert stages == [
        f"loading {path}",
        "optimizing",
        f"saving {out}",
        "comparing outputs in onnxruntime",
    ]
    # The printed total is the whole command: at least every stage it lists.
    last = captured.out.strip().splitlines()[-1]
    total = float(re.match(r"time: ([\d.]+)s \(", last).group(1))
    listed = dict(re.findall(r"(\w+) ([\d.]+)s", last.split("(", 1)[1]))
    assert set(listed) == {"load", "optimize", "save", "verify", "rest"}, last
    assert total + 0.01 >= sum(float(v) for v in listed.values())
    timings = json.loads(report.read_text())["timings"]
    assert set(timings) >= {"load", "optimize", "save", "verify", "total"}
    assert timings["total"] >= sum(timings[k] for k in ("load", "optimize", "save", "verify"))
    # Small models and --quiet stay silent.
    monkeypatch.setattr(cli, "BIG_FILE", 2**40)
    monkeypatch.setattr(cli, "PROGRESS_THRESHOLD", 10**6)
    assert cli.main(argv[:4]) == 0
    assert capsys.readouterr().err == ""


def _nudging(monkeypatch):
    """The real pass, then ``y = x * 3`` becomes ``y = x * 3.0000002`` (one ulp)."""
    import onnx_symdims.rewrite

    real = onnx_symdims.rewrite.OptimizePass

    class Nudging(real):
        def call(self, model):
            result = super().call(model)
            (c,) = model.graph.initializers.values()
            c.const_value = ir.tensor(np.nextafter(np.float32(3), np.float32(4)).reshape(()))
            return result

    monkeypatch.setattr(onnx_symdims.rewrite, "OptimizePass", Nudging)


def test_optimize_verify_wants_floats_bit_for_bit(tmp_path, monkeypatch, capsys):
    """Without fusions and --inexact-floats optimize changes no float bit; verify says so."""
    _nudging(monkeypatch)
    src = write_text_model(
        tmp_path / "m.onnx",
        "g (float[N, 4] x) => (y) { c = Constant<value = float {3.0}>() \n y = Mul(x, c) }",
    )
    assert cli.main(["optimize", src, "--verify", "--verify-runs", "1"]) == 1
    assert "DIFFERENCE y: values: " in capsys.readouterr().out
    assert (
        cli.main(["optimize", src, "--verify", "--verify-runs", "1", "--inexact-floats"]) == 0
    )


# A weight of 2 x 600 elements built by ConstantOfShape, as the onnx wheel's light CNNs do.
WEIGHT_OF_SHAPE = """
    g (float[N, 600] x) => (float[N, 2] y) <int64[2] ws = {2, 600}> {
        w = ConstantOfShape<value = float[1] {0.5}>(ws)
        y = Gemm<transB = 1>(x, w)
    }
"""


@pytest.mark.parametrize(("limit", "kept"), [(None, True), ("1200", False)])
def test_max_constant_elements_decides_whether_a_big_constant_of_shape_is_written_out(
    tmp_path, limit, kept
):
    src = write_text_model(tmp_path / "m.onnx", WEIGHT_OF_SHAPE)
    out = tmp_path / "o.onnx"
    argv = ["optimize", src, "-o", str(out), "-q"]
    if limit:
        argv += ["--max-constant-elements", limit]
    assert cli.main(argv) == 0
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert ("ConstantOfShape" in ops) == kept


def test_the_by_op_line_always_shows_the_ops_a_fusion_added(tmp_path, capsys):
    # BERT with --fusions ort drops more than 16 op types; the fused ops it adds
    # (com.microsoft::SkipLayerNormalization, ...) were cut from the line.
    src = str(Path(__file__).resolve().parents[1] / "data" / "bert_dynamo.onnx")
    report = tmp_path / "r.json"
    assert cli.main(["optimize", src, "--fusions", "ort", "--json", str(report)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("by op: ")]
    nodes = json.loads(report.read_text())["nodes"]
    grown = {
        op: n - nodes["before_by_op"].get(op, 0)
        for op, n in nodes["after_by_op"].items()
        if n > nodes["before_by_op"].get(op, 0)
    }
    assert any(op.startswith("com.microsoft::") for op in grown)
    for op, n in grown.items():
        assert f"{op} +{n}" in line
    dropped = [
        op for op, n in nodes["before_by_op"].items() if nodes["after_by_op"].get(op, 0) < n
    ]
    assert line.startswith("by op: Add -")
    # Past 16 entries the drops are cut (with their count), never the growths; how many
    # op types the fusions drop depends on the onnxscript version.
    assert ("more)" in line) == (len(dropped) > max(16 - len(grown), 8))


def test_a_fusion_undone_is_printed_once_and_not_under_quiet(tmp_path):
    # The optimizer logs the note and returns it as a diagnostic; unconfigured logging
    # printed it a second time, bare, at the top of the output, and under -q too. Logging
    # is only unconfigured in a process of its own (pytest installs handlers).
    import subprocess
    import sys

    src = str(Path(__file__).resolve().parents[1] / "data" / "gpt2_kv_legacy.onnx")
    argv = [sys.executable, "-m", "onnx_symdims", "optimize", src, "--fusions", "ort"]
    quiet = subprocess.run([*argv, "-q"], capture_output=True, text=True, check=False)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet.stderr
    loud = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert loud.returncode == 0 and loud.stderr == "", loud.stderr
    notes = [ln for ln in loud.stdout.splitlines() if " undone: " in ln]
    assert notes and all(ln.startswith("    fusions '") for ln in notes)  # under <optimize>


# A batch fixed at 1: the shape chain folds, the inputs say so, onnxruntime holds to it.
BATCHED = """
g (float[batch, 4] x) => (float[batch, 4] y) {
    s = Shape(x)
    z = ConstantOfShape(s)
    y = Add(x, z)
}
"""


def test_optimize_fixes_a_symbol_range_of_one_size(tmp_path, capsys):
    import onnxruntime as ort

    src = write_text_model(tmp_path / "m.onnx", BATCHED)
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    argv = [
        "optimize",
        src,
        "-o",
        str(out),
        "--json",
        str(report),
        "--symbol-range",
        "batch=1:1",
    ]
    assert cli.main([*argv, "--verify"]) == 0
    assert "0 differences" in capsys.readouterr().out
    data = json.loads(report.read_text())
    assert data["options"]["symbol_ranges"] == {"batch": [1, 1]}
    assert data["inputs"] == [{"name": "x", "dtype": "FLOAT", "shape": [1, 4]}]
    assert data["nodes"]["after"] < data["nodes"]["before"]
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=r"(?i)dimension|shape"):
        session.run(None, {"x": np.zeros((2, 4), np.float32)})


ANONYMOUS = """
g (float[?, 4] x, float[?, 4] w) => (float[?, 4] y) {
    s = Shape<start = 0, end = 1>(x)
    n = Cast<to = 1>(s)
    a = Mul(x, n)
    y = Add(a, w)
}
"""


def test_optimize_writes_given_input_shapes_and_verifies_with_them(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", ANONYMOUS)
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    argv = ["optimize", src, "-o", str(out), "--json", str(report)]
    argv += ["--input-shape", "x=3,4", "--input-shape", "w=n,?", "--verify"]
    assert cli.main(argv) == 0
    assert "0 differences" in capsys.readouterr().out
    data = json.loads(report.read_text())
    assert data["options"]["input_shapes"] == {"x": [3, 4], "w": ["n", None]}
    assert data["inputs"] == [
        {"name": "x", "dtype": "FLOAT", "shape": [3, 4]},
        {"name": "w", "dtype": "FLOAT", "shape": ["n", 4]},
    ]
    assert "Shape" not in data["nodes"]["after_by_op"]


def test_optimize_input_shape_of_a_declared_name_fixes_it(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", BATCHED)
    report = tmp_path / "r.json"
    argv = ["optimize", src, "--json", str(report), "--input-shape", "x=1,4", "--verify"]
    assert cli.main(argv) == 0
    data = json.loads(report.read_text())
    assert data["options"]["symbol_ranges"] == {"batch": [1, 1]}
    assert data["inputs"] == [{"name": "x", "dtype": "FLOAT", "shape": [1, 4]}]


@pytest.mark.parametrize(
    "extra",
    [
        ["--input-shape", "x=1,5"],  # declared 4
        ["--input-shape", "nope=1,4"],
        ["--input-shape", "x=1"],
        ["--input-shape", "x=1,4", "--symbol-range", "batch=2:"],
        ["--input-shape", "1,4"],
    ],
)
def test_optimize_refuses_an_input_shape_the_model_contradicts(tmp_path, capsys, extra):
    src = write_text_model(tmp_path / "m.onnx", BATCHED)
    out = tmp_path / "o.onnx"
    assert cli.main(["optimize", src, "-o", str(out), *extra]) == 2
    assert_one_line_error(capsys.readouterr().err)
    assert not out.exists()


def test_optimize_warns_of_a_range_no_input_uses(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", BATCHED)
    assert cli.main(["optimize", src, "--symbol-range", "seq=1:", "-q"]) == 0
    assert "warning: --symbol-range seq: no graph input" in capsys.readouterr().err


def test_optimize_refuses_a_malformed_symbol_range(tmp_path, capsys):
    src = write_text_model(tmp_path / "m.onnx", BATCHED)
    assert cli.main(["optimize", src, "--symbol-range", "batch=2:1"]) == 2
    assert_one_line_error(capsys.readouterr().err)


def test_optimize_says_how_much_float_math_on_weights_it_kept(tmp_path, capsys):
    """What onnxslim and onnxsim fold and the exact policy keeps is counted, with the way out."""
    src = write_text_model(
        tmp_path / "m.onnx",
        """g (float[N, 2] x) => (float[N, 2] y) <float[2, 2] w = {1., 2., 3., 4.}> {
            e = Exp(w)
            t = Transpose(e)
            y = MatMul(x, t)
        }""",
    )
    report = tmp_path / "r.json"
    assert cli.main(["optimize", src, "--json", str(report)]) == 0
    assert (
        "kept bit for bit: 2 nodes of float math on weights alone" in capsys.readouterr().out
    )
    assert json.loads(report.read_text())["nodes"]["kept_float_math_on_weights"] == 2
    assert cli.main(["optimize", src, "--json", str(report), "--inexact-floats"]) == 0
    assert "kept bit for bit" not in capsys.readouterr().out
    nodes = json.loads(report.read_text())["nodes"]
    assert (nodes["kept_float_math_on_weights"], nodes["after"]) == (0, 1)
