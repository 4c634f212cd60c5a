"""The command line and the onnxruntime verification it offers."""

from __future__ import annotations

import importlib.resources
import json

import onnx_ir as ir
import pytest

from onnx_symdims import cli, expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from onnx_symdims.verify import verify_model
from tests.engine._engine_testing import model

GOOD = """g (float[batch, seq, 64] x) => (float[batch, seq, 4, 16] y) <int64[2] heads = {4, 16}> {
    s = Shape<start=0, end=2>(x)
    t = Concat<axis=0>(s, heads)
    y = Reshape(x, t)
}"""


@pytest.fixture
def good_path(tmp_path):
    path = tmp_path / "good.onnx"
    ir.save(model(GOOD), path)
    return str(path)


def _with_written_shapes(body: str, shapes: dict[str, list]) -> ir.Model:
    m = model(body)
    for node in m.graph:
        for value in node.outputs:
            if value.name in shapes:
                value.shape = ir.Shape(shapes[value.name])
                value.dtype = ir.DataType.FLOAT
    return m


# ----------------------------------------------------------------------------------------
# verify_model
# ----------------------------------------------------------------------------------------
def test_verify_accepts_correct_shapes_and_counts_dims():
    m = _with_written_shapes(
        "g (float[N, 3] x) => (y) { t = Relu(x) \n y = Concat<axis=0>(t, x) }",
        {"t": ["N", 3], "y": ["2*N", 3]},
    )
    report = verify_model(m, runs=3)
    assert report.ok, [str(x) for x in report.mismatches]
    assert report.runs == 3
    assert report.checked_dims == 3 * 4
    assert all(2 <= v <= 8 for b in report.bindings for v in b.values())


@pytest.mark.parametrize(
    ("shapes", "what"),
    [
        ({"t": ["N", 4]}, "t[1]"),  # wrong int
        ({"y": ["N+1", 3]}, "y[0]"),  # wrong expression
        ({"t": ["N"]}, "t"),  # wrong rank
        ({"t": ["k", 3], "y": ["k", 3]}, "y[0]"),  # one fresh symbol, two sizes
    ],
)
def test_verify_reports_every_kind_of_mismatch(shapes, what):
    m = _with_written_shapes(
        "g (float[N, 3] x) => (y) { t = Relu(x) \n y = Concat<axis=0>(t, x) }", shapes
    )
    report = verify_model(m, runs=2)
    assert not report.ok
    assert any(str(x).startswith(what + ":") for x in report.mismatches), [
        str(x) for x in report.mismatches
    ]


def test_verify_binds_fresh_symbols_consistently():
    m = _with_written_shapes(
        "g (float[N, 3] x) => (y) { t = Relu(x) \n y = Concat<axis=0>(t, x) }",
        {"t": ["k", 3], "y": ["2*k", 3]},
    )
    report = verify_model(m, runs=2)
    assert report.ok  # k is bound by t, then 2*k checks out on y


def test_verify_checks_the_tensors_around_a_sequence_with_an_element_shape():
    """A sequence's shape is its elements' one: exposing it as a tensor output made
    onnxruntime refuse the model ("tensor(float) ... expected seq(tensor(float))")."""
    m = model(
        """g (float[N, 3] x) => (y) {
            s = SequenceConstruct(x, x)
            y = ConcatFromSequence<axis=0>(s)
        }"""
    )
    SymbolicShapeInferencePass()(m)
    (sequence,) = (n.outputs[0] for n in m.graph if n.op_type == "SequenceConstruct")
    assert isinstance(sequence.type, ir.SequenceType) and sequence.shape is not None
    report = verify_model(m, runs=2)
    assert report.ok, [str(x) for x in report.mismatches]
    assert report.checked_dims == 2 * 2  # y's two dims; the sequence is not a tensor


# ----------------------------------------------------------------------------------------
# The command line
# ----------------------------------------------------------------------------------------
def test_simplify_prints_the_canonical_form(capsys):
    assert cli.main(["simplify", "(a + b) - a + 2*b"]) == 0
    assert capsys.readouterr().out.strip() == "3*b"
    assert cli.main(["simplify", "a +"]) == 2


def test_infer_writes_model_and_json(good_path, tmp_path, capsys):
    out = tmp_path / "out.onnx"
    report = tmp_path / "report.json"
    assert cli.main(["infer", good_path, "-o", str(out), "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "dims:" in printed
    assert "diagnostics: none" in printed
    summary = json.loads(report.read_text())
    # s: [2], t: [4], y: [batch, seq, 4, 16]
    assert summary["dims"] == {"int": 4, "symbolic": 2, "fresh": 0}
    assert summary["outputs"] == [
        {"name": "y", "dtype": "FLOAT", "shape": ["batch", "seq", 4, 16]}
    ]
    assert summary["values"] == 3
    inferred = ir.load(out)
    assert {v.name for n in inferred.graph for v in n.outputs if v.shape is not None} == {
        "s",
        "t",
        "y",
    }


def test_infer_verify_passes_on_a_correct_model(good_path, capsys):
    assert cli.main(["infer", good_path, "--verify", "2"]) == 0
    assert "0 mismatches" in capsys.readouterr().out


def test_infer_verify_fails_on_a_wrong_declared_shape(tmp_path, capsys):
    m = _with_written_shapes(
        "g (float[N, 3] x) => (y) { t = Relu(x) \n y = Neg(t) }", {"t": ["N", 4]}
    )
    path = tmp_path / "wrong.onnx"
    ir.save(m, path)
    # --policy skip leaves the false declared shape in place, so verify must catch it.
    assert cli.main(["infer", str(path), "--policy", "skip", "--verify"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH t[1]" in out


def test_infer_strict_exits_non_zero(tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    ir.save(model("g (float[3] a, float[4] b) => (c) { c = Add(a, b) }"), path)
    assert cli.main(["infer", str(path)]) == 0  # a diagnostic, not a failure
    assert cli.main(["infer", str(path), "--strict"]) == 1
    assert "cannot broadcast" in capsys.readouterr().err


def test_infer_without_model_runs_the_bundled_example(capsys):
    resource = importlib.resources.files("onnx_symdims") / "data" / cli.EXAMPLE_MODEL
    if not resource.is_file():
        pytest.skip("the bundled example is not built")
    assert cli.main(["infer"]) == 0
    assert "bundled example" in capsys.readouterr().out


KV = """g (float[b, past, 4] k, float[b, seq, 4] n, float[b, total] mask) => (y)
<int64[1] one = {1}> {
    kv = Concat<axis=1>(k, n)
    t = Transpose<perm=[0, 2, 1]>(kv)
    m = Unsqueeze(mask, one)
    y = Add(t, m)
}"""


def test_verify_respects_equalities_between_input_symbols():
    m = model(KV)
    SymbolicShapeInferencePass()(m)
    independent = verify_model(m, runs=1, guess_relations=False)
    assert independent.runs == 0  # total != past + seq: onnxruntime rejects the Add
    total, past, seq = (expr.sym(s) for s in ("total", "past", "seq"))
    related = verify_model(m, runs=2, equalities=[(total, past + seq)])
    assert related.ok
    assert all(b["total"] == b["past"] + b["seq"] for b in related.bindings)
    # Without the equality, the broadcast(past+seq, total) term is the first guess.
    guessed = verify_model(m, runs=2)
    assert guessed.ok
    assert guessed.relations == ["total = past+seq (a broadcast term needs them equal)"]


def test_verify_bind_option(tmp_path, capsys):
    path = tmp_path / "kv.onnx"
    ir.save(model(KV), path)
    # Independent sizes are all rejected; the broadcast(past+seq, total) term suggests
    # total = past+seq, which the retry uses.
    assert cli.main(["infer", str(path), "--verify", "1"]) == 0
    assert "sizes follow total = past+seq" in capsys.readouterr().out
    assert (
        cli.main(["infer", str(path), "--verify", "1", "--verify-bind", "total=past+seq"]) == 0
    )
    assert cli.main(["infer", str(path), "--verify", "--verify-bind", "total"]) == 2


def test_verify_that_checks_nothing_fails_and_says_how_to_relate_inputs(tmp_path, capsys):
    # Only runs when the Add broadcasts: y and z must be equal (or one of them 1)...
    path = tmp_path / "rel.onnx"
    ir.save(model("g (float[y] a, float[z] b) => (c) { c = Add(a, b) }"), path)
    # ... and explicit sizes that cannot run leave nothing checked.
    argv = ["infer", str(path), "--verify-runs", "0", "--verify-sizes", "y=2,z=3"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "no onnxruntime run succeeded" in err
    assert "--verify-bind" in err
    bind = ["--verify-bind", "z=y"]
    assert cli.main(["infer", str(path), "--verify", "1", *bind]) == 0
    assert " 0 mismatches" in capsys.readouterr().out
