"""The engine's dispatch tables are shared across runs and follow the registry."""

from __future__ import annotations

import onnx_ir as ir
import pytest

import onnx_symdims
from onnx_symdims import ops
from onnx_symdims.ops import _registry

MODEL = """
<ir_version: 8, opset_import: ["" : 18, "test.dispatch" : 1]>
g (float[N, 3] x) => (y) {
    y = test.dispatch.Twice (x)
}
"""


@pytest.fixture
def restored_registry():
    registry = _registry.registry
    registry.registered_ops()  # every family loaded before the snapshot
    since = {key: list(v) for key, v in registry._since.items()}
    hooks = {key: list(v) for key, v in registry._hooks.items()}
    yield
    registry._since.clear()
    registry._since.update(since)
    registry._hooks.clear()
    registry._hooks.update(hooks)
    registry.invalidate()


def _output_shape(model_text: str) -> list[str] | None:
    model = onnx_symdims.infer_symbolic_shapes(ir.from_onnx_text(model_text))
    shape = model.graph.outputs[0].shape
    return None if shape is None else [str(d) for d in shape]


def test_a_hook_registered_after_a_run_is_used_by_the_next(restored_registry):
    assert _output_shape(MODEL) is None  # no hook: the op is unknown to every fallback
    version = ops.registry_version()

    @ops.register("test.dispatch", "Twice")
    def infer_twice(ctx, node):
        (n, c) = ctx.input_shape(0)
        ctx.set_output(0, (n, 2 * c), ctx.input_dtype(0))

    assert ops.registry_version() != version
    assert _output_shape(MODEL) == ["N", "6"]


def test_a_table_edited_directly_is_seen_after_invalidate(restored_registry):
    @ops.register("test.dispatch", "Twice")
    def infer_twice(ctx, node):
        (n, c) = ctx.input_shape(0)
        ctx.set_output(0, (n, 2 * c), ctx.input_dtype(0))

    assert _output_shape(MODEL) == ["N", "6"]
    registry = _registry.registry
    registry._since[("test.dispatch", "Twice")].clear()
    registry._hooks[("test.dispatch", "Twice")].clear()
    registry.invalidate()
    assert _output_shape(MODEL) is None
