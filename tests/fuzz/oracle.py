"""The differential oracle: our inferred dims against onnxruntime, and a reproducer shrinker.

:func:`check_case` infers a :class:`~tests.fuzz.graph_gen.FuzzCase` with
``onnx_symdims.infer_symbolic_shapes`` and runs it with onnxruntime (no graph
optimizations, every node output exposed) once per binding. A binding that
onnxruntime rejects is skipped (the graph is not valid for those sizes). For every value
with an inferred shape:

* the rank must match;
* an int dim must equal the real size;
* a symbolic dim must evaluate to the real size. Fresh (engine-minted) symbols are bound
  first, from the dims that are one bare fresh symbol, so one symbol must stand for one
  size within a run; a dim that still has an unbound fresh symbol is skipped; one whose
  evaluation raises (an inexact ``/:``, an invalid ``broadcast``) with every symbol bound
  is a finding, since the run succeeded;
* the element type and the known value-as-shape elements must match;
* every recorded equality and upper bound whose symbols are bound must hold.

:func:`minimize` shrinks a case to a reproducer of one finding: the backward slice of
the wrong value, then greedy node bypasses and symbolic input dims made concrete, kept
while the same kind of finding on the same op persists.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

import onnx_symdims
from onnx_symdims import expr
from onnx_symdims.ops._registry import lookup
from onnx_symdims.shapes import ShapesContext
from tests.fuzz.graph_gen import FuzzCase, make_feed, simulate

logger = logging.getLogger(__name__)

#: Finding kinds that mean a wrong fact (as opposed to a lost one or a crash).
WRONG_KINDS = ("rank", "dim", "raises", "fresh", "dtype", "element", "equality", "bound")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One disagreement between the engine and onnxruntime.

    Attributes:
        kind: ``rank``, ``dim``, ``raises`` (a dim that cannot be evaluated on a run
            that succeeded), ``fresh`` (one fresh symbol for two sizes), ``dtype``,
            ``element`` (value as shape), ``equality``/``bound`` (a recorded constraint
            that does not hold), ``crash`` (the pass raised), ``internal`` (a hook
            crashed and the fallback took over), ``spurious-error`` (an error diagnostic
            on a node onnxruntime runs).
        value: The value inferred wrongly (``None`` for constraints and crashes).
        op_type: The op producing ``value`` (or the op named by the diagnostic).
        binding_index: Which binding of the case showed it (-1: not run-specific).
        message: Expected versus inferred.
    """

    kind: str
    value: str | None
    op_type: str
    binding_index: int
    message: str

    @property
    def signature(self) -> tuple[str, str]:
        return (self.op_type, self.kind)


@dataclasses.dataclass
class Outcome:
    """What :func:`check_case` saw."""

    findings: list[Finding]
    runs: int = 0  # bindings onnxruntime ran (and the spec allows)
    rejected: str | None = None  # why onnxruntime refused the whole model


def exposed(case: FuzzCase) -> onnx.ModelProto:
    """The case's model with every node output a graph output (element type only)."""
    model = copy.deepcopy(case.model)
    for output in model.graph.output:  # declared symbolic dims are not onnxruntime's business
        output.type.tensor_type.ClearField("shape")
    declared = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in declared:
                model.graph.output.append(
                    helper.make_tensor_value_info(name, case.value_types[name], None)
                )
    return model


def _session(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def infer(case: FuzzCase) -> tuple[ir.Model, ShapesContext]:
    """Runs both passes on a copy of the case's model."""
    model = ir.serde.deserialize_model(case.model)
    context = ShapesContext()
    onnx_symdims.infer_symbolic_shapes(model, context=context, **case.options)
    return model, context


def _printed(d: expr.Dim) -> str:
    return str(d) if isinstance(d, int) else expr.to_onnx(d)


class _RunChecker:
    """Compares one onnxruntime run with the inferred facts."""

    def __init__(self, case: FuzzCase, model: ir.Model, context: ShapesContext, b: int):
        self.case = case
        self.context = context
        self.b = b
        self.bound: dict[str, int] = dict(case.bindings[b])
        self.findings: list[Finding] = []
        self.values = {v.name: v for node in model.graph for v in node.outputs if v.name}
        self.producers = {o: n.op_type for n in case.model.graph.node for o in n.output}

    def _add(self, kind: str, value: str | None, message: str, op: str | None = None) -> None:
        op_type = op or (self.producers.get(value, "?") if value else "?")
        self.findings.append(Finding(kind, value, op_type, self.b, message))

    def _fresh(self, d: expr.Dim) -> bool:
        return isinstance(d, expr.DimExpr) and d.is_symbol and d.name not in self.case.bindings[self.b]

    def check(self, actual: Mapping[str, np.ndarray]) -> list[Finding]:
        shapes = {
            name: self.context.shape_of(self.values[name])
            for name in actual
            if name in self.values
        }
        first_use: dict[str, str] = {}
        for name, dims in shapes.items():  # pass 1: bind the bare fresh symbols
            if dims is None or len(dims) != actual[name].ndim:
                continue
            for axis, (d, size) in enumerate(zip(dims, actual[name].shape)):
                if not self._fresh(d):
                    continue
                where = f"{name}[{axis}]"
                if not self.context.is_generated(d.name) and d.name not in self.case.declared:
                    self._add("dim", name, f"{where}: {d.name} is neither an input symbol nor minted")
                elif self.bound.setdefault(d.name, size) != size:
                    self._add(
                        "fresh",
                        name,
                        f"{where}: fresh {d.name} is {size} here but "
                        f"{self.bound[d.name]} at {first_use[d.name]}",
                    )
                else:
                    first_use.setdefault(d.name, where)
        for name, dims in shapes.items():  # pass 2: every dim
            array = actual[name]
            dtype = self.context.dtype_of(self.values[name])
            if dtype is not None and dtype.numpy() != array.dtype:
                self._add("dtype", name, f"{name}: inferred {dtype}, onnxruntime {array.dtype}")
            if dims is None:
                continue
            if len(dims) != array.ndim:
                printed = [_printed(d) for d in dims]
                self._add("rank", name, f"{name}: inferred {printed}, onnxruntime {list(array.shape)}")
                continue
            for axis, (d, size) in enumerate(zip(dims, array.shape)):
                self._check_dim(name, f"{name}[{axis}]", d, size, dims, array.shape)
            self._check_elements(name, array)
        self._check_constraints()
        return self.findings

    def _evaluate(self, d: expr.Dim) -> int | None | Exception:
        """The dim's size, ``None`` if a fresh symbol is unbound, or the error raised."""
        if isinstance(d, expr.DimExpr) and not d.symbols() <= self.bound.keys():
            return None
        try:
            return expr.evaluate(d, self.bound)
        except (ArithmeticError, ValueError) as error:
            return error

    def _check_dim(self, name: str, where: str, d: expr.Dim, size: int, dims, shape) -> None:
        got = self._evaluate(d)
        if got is None or got == size:
            return
        printed = [_printed(x) for x in dims]
        if isinstance(got, Exception):
            self._add(
                "raises",
                name,
                f"{where}: {_printed(d)} raises {type(got).__name__} under {self.bound}; "
                f"onnxruntime {list(shape)}, inferred {printed}",
            )
        else:
            self._add(
                "dim",
                name,
                f"{where}: inferred {_printed(d)} = {got}, onnxruntime {size} "
                f"(shape {list(shape)} vs inferred {printed}) under {self.bound}",
            )

    def _check_elements(self, name: str, array: np.ndarray) -> None:
        elements = self.context.value_of(self.values[name])
        if elements is None:
            return
        flat = array.reshape(-1).tolist()
        if len(elements) != len(flat):
            self._add("element", name, f"{name}: {len(elements)} known elements, onnxruntime {array.shape}")
            return
        for k, (e, real) in enumerate(zip(elements, flat)):
            if isinstance(e, expr.DimExpr) and e.is_unknown:
                continue
            got = self._evaluate(e)
            if got is not None and got != real:
                self._add("element", name, f"{name} element {k}: inferred {_printed(e)} = {got}, onnxruntime {real} under {self.bound}")

    def _check_constraints(self) -> None:
        for a, b in self.context.constraint_dims():
            x, y = self._evaluate(a), self._evaluate(b)
            if x is not None and y is not None and x != y:
                self._add("equality", None, f"recorded {_printed(a)} == {_printed(b)}: {x} vs {y} under {self.bound}", op=_ops_of(self, a, b))
        for lhs, rhs in self.context.less_equal_constraint_dims():
            x, y = self._evaluate(lhs), self._evaluate(rhs)
            if x is None or y is None:
                continue
            if isinstance(x, Exception) or isinstance(y, Exception) or x > y:
                self._add("bound", None, f"recorded {_printed(lhs)} <= {_printed(rhs)}: {x} vs {y} under {self.bound}", op=_ops_of(self, lhs, rhs))


def _ops_of(checker: _RunChecker, *dims: expr.Dim) -> str:
    """The op types whose nodes minted the symbols of ``dims`` (a guess from names)."""
    names = {s for d in dims if isinstance(d, expr.DimExpr) for s in d.symbols()}
    ops = {op for n in names for node_name, op in _node_ops(checker.case).items() if n.startswith(node_name + "_")}
    return "+".join(sorted(ops)) or "?"


def _node_ops(case: FuzzCase) -> dict[str, str]:
    return {n.name: n.op_type for n in case.model.graph.node if n.name}


def check_case(case: FuzzCase, bindings: Sequence[int] | None = None) -> Outcome:
    """Infers the case and compares with onnxruntime on each binding (all by default)."""
    try:
        model, context = infer(case)
    except Exception as error:  # the pass must never raise on a valid model
        logger.debug("inference raised", exc_info=True)
        return Outcome([Finding("crash", None, "?", -1, f"{type(error).__name__}: {error}")])
    try:
        session = _session(exposed(case))
    except Exception as error:
        return Outcome([], rejected=str(error).splitlines()[0][:200])
    names = [o.name for o in session.get_outputs()]
    outcome = Outcome([])
    for b in bindings if bindings is not None else range(len(case.bindings)):
        if not case.applicable(b):
            continue
        try:
            actual = dict(zip(names, session.run(names, case.feeds[b])))
        except Exception:  # not valid for these sizes
            continue
        outcome.runs += 1
        outcome.findings += _RunChecker(case, model, context, b).check(actual)
    if outcome.runs:
        outcome.findings += _diagnostic_findings(context)
    return outcome


def _diagnostic_findings(context: ShapesContext) -> list[Finding]:
    findings = []
    for diagnostic in context.diagnostics:
        if diagnostic.severity != "error":
            continue
        kind = "internal" if "internal error" in diagnostic.message else "spurious-error"
        findings.append(Finding(kind, None, diagnostic.op_type, -1, str(diagnostic)))
    return findings


# ----------------------------------------------------------------------------- shrinking
def likely_hook(op_type: str, opset: int) -> str:
    """The engine function in charge of ``op_type`` (or the ONNX fallback)."""
    hook = lookup("", op_type, opset)
    if hook is None:
        return "ONNX fallback (onnx_symdims/ops/_fallback.py)"
    return f"{hook.__module__}.{hook.__qualname__}"


def _rebuild(
    case: FuzzCase,
    nodes: Sequence[onnx.NodeProto],
    outputs: Sequence[str],
    inputs: Sequence[onnx.ValueInfoProto] | None = None,
    bindings: Sequence[Mapping[str, int]] | None = None,
) -> FuzzCase:
    """A case over ``nodes`` (kept in order) with only what they use."""
    graph = case.model.graph
    inputs = list(inputs if inputs is not None else graph.input)
    bindings = [dict(b) for b in (bindings if bindings is not None else case.bindings)]
    used = {i for n in nodes for i in n.input} | set(outputs)
    kept_inputs = [copy.deepcopy(v) for v in inputs if v.name in used]
    initializers = [t for t in graph.initializer if t.name in used]
    original = {o.name: o for o in graph.output}  # keep declared shapes: anchors use them
    declared = [
        copy.deepcopy(original[o])
        if o in original
        else helper.make_tensor_value_info(o, case.value_types[o], None)
        for o in outputs
    ]
    new_graph = helper.make_graph(
        [copy.deepcopy(n) for n in nodes], graph.name, kept_inputs, declared, initializer=initializers
    )
    model = helper.make_model(new_graph, opset_imports=list(case.model.opset_import))
    model.ir_version = case.model.ir_version
    feeds = []
    for binding in bindings:
        feed = {}
        for value in kept_inputs:
            dims = [
                d.dim_value if d.HasField("dim_value") else binding[d.dim_param]
                for d in value.type.tensor_type.shape.dim
            ]
            feed[value.name] = make_feed(value.name, dims)
        feeds.append(feed)
    rebuilt = FuzzCase(
        case.seed, model, bindings, feeds, dict(case.value_types), dict(case.options), case.declared
    )
    simulations = [simulate(rebuilt, b) for b in range(len(bindings))]
    rebuilt.valid = [s.valid for s in simulations]
    rebuilt.unsafe = any(s.unsafe for s in simulations)
    return rebuilt


def backward_slice(nodes: Sequence[onnx.NodeProto], targets: Sequence[str]) -> list[onnx.NodeProto]:
    """The nodes ``targets`` depend on, in their original order."""
    needed = set(targets)
    kept = []
    for node in reversed(nodes):
        if needed & set(node.output):
            kept.append(node)
            needed |= set(node.input)
    return kept[::-1]


def minimize(
    case: FuzzCase, finding: Finding, budget: int = 200
) -> FuzzCase:
    """A small case in which a finding of the same kind on the same op still shows.

    Args:
        case: The case the finding came from.
        finding: The finding; its binding becomes the only one.
        budget: At most this many candidate checks.
    """
    checks = 0

    def reproduces(candidate: FuzzCase) -> bool:
        nonlocal checks
        checks += 1
        if candidate.unsafe:
            return False
        outcome = check_case(candidate)
        return any(f.signature == finding.signature for f in outcome.findings)

    nodes = list(case.model.graph.node)
    targets = [finding.value] if finding.value else [o.name for o in case.model.graph.output]
    if finding.binding_index >= 0:
        bindings = [case.bindings[finding.binding_index]]
    else:  # a diagnostic: keep every binding, one of them runs
        bindings = case.bindings
    current = _rebuild(case, nodes, targets, bindings=bindings)
    sliced = _rebuild(current, backward_slice(nodes, targets), targets)
    if reproduces(sliced):
        current = sliced
    elif not reproduces(current):
        return current  # not reproducible alone (flaky or context-dependent): keep all
    current = _bypass_nodes(current, targets, reproduces, lambda: checks < budget)
    return _concretize_inputs(current, targets, reproduces, lambda: checks < budget)


def _bypass_nodes(
    case: FuzzCase,
    targets: Sequence[str],
    reproduces: Callable[[FuzzCase], bool],
    more: Callable[[], bool],
) -> FuzzCase:
    """Greedily replaces a node's output by one of its inputs of the same type."""
    changed = True
    while changed and more():
        changed = False
        nodes = list(case.model.graph.node)
        for index in range(len(nodes) - 1, -1, -1):
            node = nodes[index]
            if set(node.output) & set(targets) or not more():
                continue
            replacements = [
                i
                for i in node.input
                if i and case.value_types.get(i, _input_type(case, i)) == case.value_types.get(node.output[0])
            ]
            for replacement in replacements[:2]:
                rewired = _rewire(nodes, index, replacement)
                candidate = _rebuild(case, backward_slice(rewired, targets), targets)
                if reproduces(candidate):
                    case, changed = candidate, True
                    break
            if changed:
                break
    return case


def _input_type(case: FuzzCase, name: str) -> int | None:
    for value in case.model.graph.input:
        if value.name == name:
            return value.type.tensor_type.elem_type
    for tensor in case.model.graph.initializer:
        if tensor.name == name:
            return tensor.data_type
    return None


def _rewire(nodes: Sequence[onnx.NodeProto], index: int, replacement: str) -> list[onnx.NodeProto]:
    removed = nodes[index]
    rewired = []
    for k, node in enumerate(nodes):
        if k == index:
            continue
        if set(node.input) & set(removed.output):
            node = copy.deepcopy(node)
            node.input[:] = [replacement if i in removed.output else i for i in node.input]
        rewired.append(node)
    return rewired


def _concretize_inputs(
    case: FuzzCase,
    targets: Sequence[str],
    reproduces: Callable[[FuzzCase], bool],
    more: Callable[[], bool],
) -> FuzzCase:
    """Greedily turns symbolic input dims into their size in the (single) binding."""
    if len(case.bindings) != 1:
        return case
    binding = case.bindings[0]
    for k, value in enumerate(case.model.graph.input):
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_param") or not more():
                continue
            inputs = [copy.deepcopy(v) for v in case.model.graph.input]
            inputs[k].type.tensor_type.shape.dim[axis].dim_value = binding[dim.dim_param]
            candidate = _rebuild(case, list(case.model.graph.node), targets, inputs=inputs)
            if reproduces(candidate):
                case = candidate
    return case


def report(case: FuzzCase, finding: Finding) -> str:
    """A finding as text: kind, binding, expected vs inferred, hook, ONNX reproducer."""
    binding = case.bindings[0] if len(case.bindings) == 1 else case.bindings[max(finding.binding_index, 0)]
    return "\n".join(
        [
            f"[{finding.kind}] op {finding.op_type} (seed {case.seed}, opset {case.opset})",
            f"  likely hook: {likely_hook(finding.op_type.split('+')[0], case.opset)}",
            f"  binding: {binding}",
            f"  {finding.message}",
            "  reproducer:",
            *("    " + line for line in case.text().splitlines()),
        ]
    )
