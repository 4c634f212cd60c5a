"""CLI habits (issue 13): flags, argument spellings, the summary and the JSON report."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import _cli_infer, cli
from tests.cli._cli_testing import GOOD, assert_one_line_error, example_path, write_text_model

# A Reshape whose target copies dims with 0: exact only when seq >= 1 (see the pass docs).
RESHAPE = """g (float[batch, seq, 8] x) => (y) <int64[3] t = {0, -1, 4}> {
    y = Reshape(x, t)
}"""


def _json(tmp_path, argv):
    report = tmp_path / "r.json"
    assert cli.main([*argv, "--json", str(report)]) in (0, 1)
    return json.loads(report.read_text())


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"onnx-symdims {onnx_symdims.__version__}"


def test_quiet_prints_nothing_on_success(tmp_path, capsys):
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    assert cli.main(["infer", path, "-q", "-o", str(tmp_path / "o.onnx")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert (tmp_path / "o.onnx").exists()


def test_in_place_rewrites_the_model(tmp_path, capsys):
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    before = ir.load(path)
    assert before.graph.node(1).outputs[0].shape is None
    assert cli.main(["infer", path, "-i"]) == 0
    assert "wrote " + path in capsys.readouterr().out
    after = ir.load(path)
    assert list(after.graph.node(1).outputs[0].shape) == [4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.onnx"]  # no temp left
    with pytest.raises(SystemExit) as stop:
        cli.main(["infer", path, "-i", "-o", str(tmp_path / "x.onnx")])
    assert stop.value.code == 2
    assert_one_line_error(capsys.readouterr().err, "not allowed with argument")
    assert cli.main(["infer", "-i"]) == 2  # never into the bundled example
    assert_one_line_error(capsys.readouterr().err, "needs a MODEL")


def test_symbol_range_makes_dims_exact(tmp_path, capsys):
    path = write_text_model(tmp_path / "r.onnx", RESHAPE)
    plain = _json(tmp_path, ["infer", path])
    ranged = _json(tmp_path, ["infer", path, "--symbol-range", "seq=1:"])
    assert ranged["options"]["symbol_ranges"] == {"seq": [1, None]}
    y_plain = plain["dims"]
    assert y_plain["fresh"] + y_plain["symbolic"] >= 1
    out = tmp_path / "o.onnx"
    assert cli.main(["infer", path, "--symbol-range", "seq=1:", "-o", str(out), "-q"]) == 0
    dims = [d if isinstance(d, int) else d.value for d in ir.load(out).graph.outputs[0].shape]
    assert dims == ["batch", "2*seq", 4]
    assert cli.main(["infer", path, "--symbol-range", "nosuch=1:", "-q"]) == 0
    assert "no declared dim" in capsys.readouterr().err
    for bad in ("seq", "seq=1", "seq=a:b", "seq=5:2", "seq=-1:"):
        assert cli.main(["infer", path, "--symbol-range", bad]) == 2
        assert_one_line_error(capsys.readouterr().err, "--symbol-range")


def test_assume_nonempty_and_value_info_anchors_reach_the_pass(tmp_path, monkeypatch):
    seen = {}
    real = _cli_infer.SymbolicShapeInferencePass

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(_cli_infer, "SymbolicShapeInferencePass", spy)
    path = write_text_model(tmp_path / "r.onnx", RESHAPE)
    assert cli.main(["infer", path, "--assume-nonempty", "--value-info-anchors", "-q"]) == 0
    assert seen["nonempty_inputs"] is True
    assert seen["value_info_anchors"] is True


@pytest.mark.parametrize(
    ("spelling", "runs"),
    [
        (["--verify"], 3),
        (["--verify", "2"], 2),
        (["--verify=4"], 4),
        (["--verify", "--verify-runs", "1"], 1),
    ],
)
def test_verify_count_spellings(spelling, runs, tmp_path):
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    # The model name may come after --verify without being taken for the count.
    report = _json(tmp_path, ["infer", *spelling, path])
    assert report["options"]["verify_runs"] == runs
    assert report["model"]["path"] == path
    assert report["verify"]["runs"] >= runs


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--verify-bind", "total"], "--verify-bind expects NAME=EXPR"),
        (["--verify-bind", "nosuch=batch"], "nosuch is not a symbol"),
        (["--verify-sizes", "batch"], "--verify-sizes expects"),
        (["--verify-sizes", "batch=-1"], "--verify-sizes expects"),
        (["--verify-sizes", "batch=1,sek=2"], "sek is not a symbol"),
    ],
)
def test_bad_verify_values_are_reported_before_anything_is_written(
    argv, needle, tmp_path, capsys
):
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    assert (
        cli.main(["infer", example_path(), "-o", str(out), "--json", str(report), *argv]) == 2
    )
    assert_one_line_error(capsys.readouterr().err, needle)
    assert not out.exists() and not report.exists()


@pytest.mark.parametrize(
    ("text", "canonical"), [("-a", "-a"), ("-a+2*a", "a"), ("-(a-b)", "b-a")]
)
def test_simplify_takes_a_leading_minus(text, canonical, capsys):
    from onnx_symdims import expr

    assert cli.main(["simplify", text]) == 0
    printed = capsys.readouterr().out.strip()
    # The printed spelling is the printer's business; the CLI must print the same dim.
    assert expr.parse_expr(printed) is expr.parse_expr(canonical)


def test_summary_shows_shapes_and_no_empty_or_repeated_blocks(capsys):
    assert cli.main(["infer"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "  input_ids                int64[batch, seq_len]" in lines
    assert any(
        line.startswith("  present.0.key") and "past_seq_len + seq_len" in line
        for line in lines
    )
    assert "nothing written: pass -o OUT.onnx" in out
    for i, line in enumerate(lines):
        if line.endswith(":"):  # no empty heading: a title is followed by its items
            assert lines[i + 1].startswith("  "), line
    assert len(set(lines)) == len(lines)
    assert lines[-1].startswith("time: ")


def test_summary_lists_fresh_symbols_with_origin_and_bound(tmp_path, capsys):
    path = write_text_model(
        tmp_path / "nz.onnx", "g (float[N, M] x) => (y) { y = NonZero(x) }"
    )
    report = _json(tmp_path, ["infer", path])
    (fresh,) = report["fresh_symbols"]
    assert fresh["op"] == "NonZero"
    assert fresh["first_value"] == "y"
    assert fresh["upper_bounds"] == ["M*N"]
    out = capsys.readouterr().out
    assert f"{fresh['name']}: from NonZero (value 'y'); {fresh['name']} <= M*N" in out
    assert "fresh symbols (1), sizes inference could not name from the inputs:" in out
    assert "bounds (" not in out  # the bound is shown once, with its symbol


def test_json_report_schema(tmp_path):
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    out = tmp_path / "o.onnx"
    report = _json(tmp_path, ["infer", path, "-o", str(out), "--verify-runs", "1", "--verify"])
    assert report["schema"] == "onnx-symdims.report/1"
    assert report["tool"] == {"name": "onnx-symdims", "version": onnx_symdims.__version__}
    assert report["command"] == "infer"
    assert report["model"]["nodes"] == 3 and report["model"]["opsets"] == {"": 18}
    assert report["inputs"] == [{"name": "x", "dtype": "FLOAT", "shape": ["batch", "seq", 64]}]
    assert report["outputs"] == [
        {"name": "y", "dtype": "FLOAT", "shape": ["batch", "seq", 4, 16]}
    ]
    assert report["options"]["policy"] == "refine"
    assert report["written"] == {
        "model": str(out),
        "external_data": None,
        "json": str(tmp_path / "r.json"),
    }
    assert set(report["timings"]) >= {"load", "inference", "save", "verify", "total"}
    assert report["timings"]["total"] >= report["timings"]["verify"]
    assert report["diagnostics"] == {"total": 0, "by_severity": {}, "by_op": {}}
    for key in ("constraints", "bounds", "renames", "fresh_symbols"):
        assert isinstance(report[key], list)
    assert report["verify"]["mismatches"] == []


def test_json_constraints_and_renames_are_structured(tmp_path):
    # Concat of two inputs declared [N] + [N] into an output declared [M]: M == 2*N.
    path = write_text_model(
        tmp_path / "c.onnx",
        "g (float[N] a, float[N] b) => (float[M] c) { c = Concat<axis=0>(a, b) }",
    )
    report = _json(tmp_path, ["infer", path])
    assert report["constraints"], report
    assert all(set(c) == {"lhs", "rhs"} for c in report["constraints"])
    assert all(set(r) == {"from", "to"} for r in report["renames"])


def test_big_models_show_progress_on_stderr(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "BIG_FILE", 0)
    monkeypatch.setattr(cli, "PROGRESS_THRESHOLD", 1)
    path = write_text_model(tmp_path / "good.onnx", GOOD)
    out = tmp_path / "o.onnx"
    assert cli.main(["infer", path, "-o", str(out), "--verify-runs", "1", "--verify"]) == 0
    err = capsys.readouterr().err.splitlines()
    stages = [line.split("...")[0] for line in err]
    assert stages == [
        f"loading {path}",
        "inferring shapes",
        f"saving {out}",
        "verifying with onnxruntime",
    ]
    assert all(line.endswith("s") for line in err)
    # Small models stay silent, and --quiet silences progress too.
    monkeypatch.setattr(cli, "BIG_FILE", 2**40)
    monkeypatch.setattr(cli, "PROGRESS_THRESHOLD", 10**6)
    assert cli.main(["infer", path, "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""


def _readme_commands() -> list[str]:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip().startswith("onnx-symdims ")
    ]


@pytest.mark.parametrize("line", _readme_commands())
def test_the_readme_commands_work_as_written(line, tmp_path, monkeypatch, capsys):
    if "--verify" in line:
        pytest.importorskip("onnxruntime")
    monkeypatch.chdir(tmp_path)
    shutil.copy(example_path(), tmp_path / "model.onnx")  # the README's model.onnx
    command, _, comment = line.partition("#")
    try:
        status = cli.main(shlex.split(command)[1:])
    except SystemExit as stop:  # --version exits like --help
        status = stop.code
    assert status == 0
    if comment.strip() and "simplify" in command:
        assert capsys.readouterr().out.strip() == comment.strip()
