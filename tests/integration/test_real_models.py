"""Real exported models against onnxruntime ground truth: never a wrong dim.

``tests/data/*.onnx`` (built by ``tools/build_models.py``) come with ``*.truth.json``: the
shape of every node output under several bindings of the input symbols, recorded from
onnxruntime runs. Every dim we infer is evaluated under each binding and compared;
fresh symbols must stand for one size per binding. The dev corpus beside the checkout
(``../shared/dev_corpus``) is scored with its own scorer when present.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import expr

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(p.name[: -len(".truth.json")] for p in DATA.glob("*.truth.json"))
BUNDLED = pathlib.Path(onnx_symdims.__file__).parent / "data"
CORPUS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "dev_corpus"

# Measured floors of correct dims (fraction); raise them as coverage improves.
MIN_CORRECT = 0.99


def _model_path(name: str) -> pathlib.Path:
    path = DATA / f"{name}.onnx"
    return path if path.exists() else BUNDLED / f"{name}.onnx"


def _check(model: ir.Model, truth: dict) -> tuple[int, int, list[str]]:
    """Returns (dims checked, dims correct, wrong descriptions)."""
    values = {v.name: v for node in model.graph for v in node.outputs}
    values.update({v.name: v for v in model.graph.inputs})
    checked = correct = 0
    wrong: list[str] = []
    for b, bindings in enumerate(truth["bindings"]):
        fresh: dict[str, int] = {}
        for name, shapes in truth["shapes"].items():
            real = shapes[b]
            value = values.get(name)
            if value is None or value.shape is None:
                checked += len(real)
                continue
            dims = list(value.shape.dims)
            if len(dims) != len(real):
                wrong.append(f"{name}: rank {len(dims)} vs {real}")
                continue
            for axis, (d, size) in enumerate(zip(dims, real)):
                checked += 1
                if isinstance(d, int):
                    ok = d == size
                else:
                    parsed = expr.parse_dim(d.value) if d.value else None
                    if parsed is None:
                        continue
                    try:
                        ok = expr.evaluate(parsed, bindings) == size
                    except KeyError:  # a fresh symbol: one size per binding
                        if not (isinstance(parsed, expr.DimExpr) and parsed.is_symbol):
                            continue  # an expression over fresh symbols: not scored
                        ok = fresh.setdefault(d.value, size) == size
                        if ok:
                            continue  # consistent, but unknown: not counted correct
                if ok:
                    correct += 1
                else:
                    wrong.append(f"{name}[{axis}] = {d} but {size} under {bindings}")
    return checked, correct, wrong


@pytest.mark.parametrize("name", MODELS)
def test_real_model_has_no_wrong_dim(name):
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    model = onnx_symdims.infer_symbolic_shapes(str(_model_path(name)))
    checked, correct, wrong = _check(model, truth)
    assert not wrong, f"{len(wrong)} wrong dims, e.g. {wrong[:5]}"
    assert correct / checked >= MIN_CORRECT, f"{correct}/{checked} correct"


def _dev_corpus_models() -> list[str]:
    if not (CORPUS / "score.py").exists():
        return []
    return sorted(p.parent.name for p in (CORPUS / "models").glob("*/truth.json"))


@pytest.mark.skipif(
    not _dev_corpus_models(), reason="no ../shared/dev_corpus beside the checkout"
)
@pytest.mark.parametrize("name", _dev_corpus_models())
def test_dev_corpus_model_scores_zero_wrong(name, tmp_path):
    spec = importlib.util.spec_from_file_location("dev_corpus_score", CORPUS / "score.py")
    scorer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scorer)
    model_dir = CORPUS / "models" / name
    model = onnx_symdims.infer_symbolic_shapes(str(model_dir / "model.onnx"))
    path = tmp_path / "inferred.onnx"
    ir.save(model, path)
    truth = json.loads((model_dir / "truth.json").read_text())
    summary, per_value = scorer.score(truth, scorer.load_model_no_data(str(path)))
    wrong = [v for v, rec in per_value.items() if rec["status"] == "wrong"]
    assert summary["wrong"] == 0, f"wrong values: {wrong[:10]}"
    assert summary["percent_correct"] >= 80.0, summary
