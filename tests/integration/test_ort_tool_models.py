"""Models made by onnxruntime's own tools against onnxruntime ground truth: never a wrong dim.

``tests/data/ort_tools/*.onnx`` are quantized (``quantize_dynamic``, ``quantize_static``
QOperator/QDQ, ``MatMulNBitsQuantizer``) and offline-optimized
(``optimized_model_filepath`` at ``ORT_ENABLE_EXTENDED``/``ALL``) variants of the
committed test models, built by ``tools/build_ort_tool_models.py``; their
``*.truth.json`` have the format of ``tests/data/*.truth.json`` and are scored the same
way (:func:`tests.integration.test_real_models._check`).

Run this file as a script to print the dims-correct figure per model.
"""

from __future__ import annotations

import json
import pathlib

import pytest

import onnx_symdims
from tests.integration.test_real_models import _check

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "ort_tools"
MODELS = sorted(p.name[: -len(".truth.json")] for p in DATA.glob("*.truth.json"))

# Measured floor of correct dims (fraction) on every model; raise it as coverage improves.
MIN_CORRECT = 0.99


def score(name: str) -> tuple[int, int, list[str]]:
    """(dims checked, dims correct, wrong descriptions) for model ``name``."""
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    model = onnx_symdims.infer_symbolic_shapes(str(DATA / f"{name}.onnx"))
    return _check(model, truth)


def test_models_are_present():
    assert len(MODELS) >= 10, MODELS


@pytest.mark.parametrize("name", MODELS)
def test_ort_tool_model_has_no_wrong_dim(name):
    checked, correct, wrong = score(name)
    assert not wrong, f"{len(wrong)} wrong dims, e.g. {wrong[:5]}"
    assert correct / checked >= MIN_CORRECT, f"{correct}/{checked} correct"


if __name__ == "__main__":
    total_checked = total_correct = total_wrong = 0
    for model_name in MODELS:
        n, ok, bad = score(model_name)
        total_checked, total_correct, total_wrong = (
            total_checked + n,
            total_correct + ok,
            total_wrong + len(bad),
        )
        print(f"{model_name:32s} {ok:5d}/{n:5d} = {100 * ok / n:6.2f} %  wrong {len(bad)}")
    print(
        f"{'total':32s} {total_correct:5d}/{total_checked:5d} = "
        f"{100 * total_correct / total_checked:6.2f} %  wrong {total_wrong}"
    )
