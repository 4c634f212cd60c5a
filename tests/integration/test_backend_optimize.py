"""``optimize`` on the ONNX backend node tests: every output the same in onnxruntime.

Each case runs before and after ``onnx_symdims.optimize`` on the test's own inputs
(:func:`backend_cases.compare_optimized`): kept as graph inputs (``pure``) and as
initializers (``inject``: most of the model is folded, so the folder's and our value
rules' results meet onnxruntime's kernels); the optimized model must also pass
``onnx.checker`` where the original does. The model tests of the onnx wheel (old
opsets and IR versions) run the same way. The cases are split into shards so that
``pytest -n`` spreads them; ``benchmarks/backend_optimize.py`` runs the same check
with other options and prints each case.
"""

from __future__ import annotations

import functools
import logging

import onnx
import pytest

import onnx_symdims
from tests.integration import backend_cases

SHARDS = 8


@functools.cache
def _cases(mode: str) -> list[backend_cases.Case]:
    return [case for case in backend_cases.cases(mode) if case.runnable]


def _optimize(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx_symdims.optimize(model)


@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("mode", ["pure", "inject"])
def test_optimized_backend_cases_compute_the_same_outputs(mode, shard):
    logging.disable(logging.WARNING)  # the folder's notes on the cases it declines
    try:
        verdicts = {
            case.name: backend_cases.compare_optimized(case, _optimize)
            for case in _cases(mode)[shard::SHARDS]
        }
    finally:
        logging.disable(logging.NOTSET)
    bad = {name: v for name, v in verdicts.items() if v[0] not in ("same", "skip")}
    assert not bad, f"{len(bad)} cases: {sorted(bad.items())[:10]}"
    # the oracle compares something: most cases run in onnxruntime before and after
    same = sum(v[0] == "same" for v in verdicts.values())
    assert same >= 0.8 * len(verdicts), f"only {same} of {len(verdicts)} compared"


def test_optimized_wheel_models_compute_the_same_outputs():
    """The onnx wheel's model tests: old opsets and IR versions (PyTorch 0.3 exports)."""
    logging.disable(logging.WARNING)
    try:
        verdicts = {
            case.name: backend_cases.compare_optimized(case, _optimize)
            for case in backend_cases.model_cases()
        }
    finally:
        logging.disable(logging.NOTSET)
    bad = {name: v for name, v in verdicts.items() if v[0] not in ("same", "skip")}
    assert not bad, f"{len(bad)} cases: {sorted(bad.items())[:10]}"
    assert (
        sum(name.startswith("light/") and v[0] == "same" for name, v in verdicts.items()) >= 9
    )
    assert sum(v[0] == "same" for v in verdicts.values()) >= 100
