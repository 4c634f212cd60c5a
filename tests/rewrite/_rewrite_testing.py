"""Helpers for the rewrite tests: text models, one rewrite step, onnxruntime equivalence.

A rewrite is checked the way a user would see it: the model before and after is run in
onnxruntime (graph optimizations off, so onnxruntime's own rewrites hide nothing) on
inputs sized by symbol bindings, and every output must be equal element by element,
floats bit for bit under ``==`` (``-0.0 == 0.0``, the convention the rules document).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import onnxruntime as ort

from onnx_symdims import expr
from onnx_symdims.rewrite import ShapeFacts, analyze, shape_rules
from onnx_symdims.rewrite._rules import ShapeRulesPass

HEADER = '<ir_version: 10, opset_import: ["" : {opset}]>'


def model(body: str, opset: int = 18) -> ir.Model:
    """``body`` is ``g (inputs) => (outputs) <initializers> { nodes }``."""
    return ir.from_onnx_text(HEADER.format(opset=opset) + "\n" + body)


def proto(m: ir.Model) -> onnx.ModelProto:
    """A detached copy of ``m`` (the rewrites work in place)."""
    return ir.serde.serialize_model(m)


def ops(m: ir.Model) -> list[str]:
    """Op types of the main graph, in order, without ``Constant`` and ``Identity``."""
    return [n.op_type for n in m.graph if n.op_type not in ("Constant", "Identity")]


def cleanup(m: ir.Model) -> ir.Model:
    common_passes.RemoveUnusedNodesPass()(m)
    return m


def apply_pass(pass_type, body: str) -> tuple[onnx.ModelProto, ir.Model, object]:
    """``pass_type(analyze(m))`` applied once to the model of ``body``, dead nodes removed.

    Returns the model before (a proto, for :func:`assert_equivalent`), after, and the pass
    (its ``fired`` and ``declined`` counts).
    """
    m = model(body)
    before = proto(m)
    rewrite = pass_type(analyze(m))
    rewrite(m)
    cleanup(m)
    return before, m, rewrite


#: The two ways the rules run: onnxscript's matcher (``shape_rules``, what a user's own
#: pipeline does) and the op-type dispatch of ``ShapeRulesPass`` (what ``optimize`` does).
RULE_DRIVERS = ("onnxscript", "dispatch")


def apply_rules(
    m: ir.Model, facts: ShapeFacts | None = None, driver: str = "onnxscript"
) -> dict[str, object]:
    """Applies the shape rules once with ``driver``; returns the rule objects by name."""
    facts = facts or analyze(m)
    if driver == "onnxscript":
        ruleset = shape_rules(facts)
        ruleset.apply_to_model(m)
        objects = ruleset.rule_objects
    else:
        rules_pass = ShapeRulesPass(facts)
        rules_pass(m)
        objects = rules_pass.rules
    cleanup(m)
    return {r.name: r for r in objects}


# ------------------------------------------------------------------------------------
# onnxruntime
# ------------------------------------------------------------------------------------
def session(m: ir.Model | onnx.ModelProto) -> ort.InferenceSession:
    p = proto(m) if isinstance(m, ir.Model) else m
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # a folded weight must not switch kernels (see onnx_symdims/_verify_worker.py)
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.log_severity_level = 3
    return ort.InferenceSession(
        p.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def run(m: ir.Model | onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    return session(m).run(None, dict(feeds))


def _dims(value: onnx.ValueInfoProto, sizes: Mapping[str, int]) -> list[int]:
    dims = []
    for d in value.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            dims.append(int(expr.evaluate(expr.parse_dim(d.dim_param), dict(sizes))))
    return dims


def feeds_for(
    m: ir.Model | onnx.ModelProto,
    sizes: Mapping[str, int],
    seed: int = 0,
    given: Mapping[str, np.ndarray | Callable[[Mapping[str, int]], np.ndarray]] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs shaped by ``sizes``; ``given`` fixes some (arrays, ``sizes -> array``)."""
    p = proto(m) if isinstance(m, ir.Model) else m
    rng = np.random.default_rng(seed)
    initializers = {i.name for i in p.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for value in p.graph.input:
        if value.name in initializers:
            continue
        if given and value.name in given:
            g = given[value.name]
            feeds[value.name] = g(sizes) if callable(g) else g
            continue
        dims = _dims(value, sizes)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        if dtype == np.bool_:
            feeds[value.name] = rng.random(dims) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, 5, dims).astype(dtype)
        else:
            # Negative zeros on purpose: the documented -0.0 convention is exercised.
            array = rng.standard_normal(dims).astype(dtype)
            array.flat[::7] = -0.0
            feeds[value.name] = array
    return feeds


def assert_same_outputs(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> None:
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} vs {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape} vs {e.shape}"
        # Bit for bit (``-0.0 == 0.0``, NaN where NaN): onnxruntime runs both models
        # without its graph optimizations, and optimize() keeps float outputs exact.
        np.testing.assert_array_equal(a, e, err_msg=f"output {i}")


def assert_equivalent(
    before: onnx.ModelProto,
    after: ir.Model | onnx.ModelProto,
    bindings: Sequence[Mapping[str, int]],
    given: Mapping[str, np.ndarray | Callable[[Mapping[str, int]], np.ndarray]] | None = None,
) -> None:
    """``before`` and ``after`` give equal outputs in onnxruntime under every binding.

    The original must run under each binding (the bindings are valid sizes).
    """
    after_proto = proto(after) if isinstance(after, ir.Model) else after
    sess_before, sess_after = session(before), session(after_proto)
    for k, sizes in enumerate(bindings):
        feeds = feeds_for(before, sizes, seed=k, given=given)
        expected = sess_before.run(None, feeds)
        actual = sess_after.run(None, feeds)
        try:
            assert_same_outputs(actual, expected)
        except AssertionError as e:
            raise AssertionError(f"under {dict(sizes)}: {e}") from e


def constant_array(value: ir.Value) -> np.ndarray | None:
    """The tensor of a constant ``value`` (initializer or ``Constant`` node), or ``None``."""
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is not None and node.op_type == "Constant" and "value" in node.attributes:
        return node.attributes["value"].as_tensor().numpy()
    return None


def reshape_targets(m: ir.Model) -> list[list[int] | None]:
    """The constant targets of the main graph's ``Reshape`` nodes (``None``: computed)."""
    targets = []
    for node in m.graph:
        if node.op_type == "Reshape":
            array = constant_array(node.inputs[1])
            targets.append(None if array is None else array.tolist())
    return targets
