"""The differential oracle: our inferred dims against onnxruntime, and a reproducer shrinker.

:func:`check_case` infers a :class:`~tests.fuzz.graph_gen.FuzzCase` with
``onnx_symdims.infer_symbolic_shapes`` and runs it with onnxruntime (no graph
optimizations, every node output exposed) once per binding. A binding is skipped when
onnxruntime rejects it, when the spec does (the reference evaluator stands in for it:
onnxruntime is lenient with a ``Concat`` of empty inputs, for one), when it breaks an
assumption given in the case's options (``nonempty_inputs``, ``symbol_ranges``), or
where onnxruntime knowingly departs from the spec the engine follows (``NonZero`` of a
scalar). For every value with an inferred shape (graph inputs included):

* the rank must match;
* an int dim must equal the real size;
* a symbolic dim must evaluate to the real size. Fresh (engine-minted) symbols are bound
  first, from the dims that are one bare fresh symbol, so one symbol must stand for one
  size within a run; a dim that still has an unbound fresh symbol is skipped; one whose
  evaluation raises (an inexact ``/:``, an invalid ``broadcast``) with every symbol bound
  is a finding, since the run succeeded;
* the element type and the known value-as-shape elements must match;
* every recorded equality and upper bound whose symbols are bound must hold.

Error diagnostics on a model that ran are findings too (a crashed hook, a node wrongly
called malformed), and so is an exception out of the pass.

:func:`minimize` shrinks a case to a reproducer of one finding: the backward slice of
the wrong value, then greedy reductions (drop a graph output, bypass a node, drop an
input of a variadic node) and symbolic input dims made concrete, kept while a finding
of the same kind on the same op persists.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper, numpy_helper

import onnx_symdims
from onnx_symdims import expr
from onnx_symdims.ops._registry import lookup
from onnx_symdims.shapes import ShapesContext
from tests.fuzz.graph_gen import (
    FuzzCase,
    dim_size,
    hidden_symbol,
    input_shape,
    make_feed,
    outer_names,
    reference,
    simulate,
)

logger = logging.getLogger(__name__)


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
    departures: list[str] = dataclasses.field(default_factory=list)  # see _departure


def exposed(case: FuzzCase) -> onnx.ModelProto:
    """The case's model with every node output a graph output (element type only)."""
    model = copy.deepcopy(case.model)
    for output in model.graph.output:  # declared symbolic dims are not onnxruntime's business
        output.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    declared = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            # sequences and optionals have no element type here: not exposed (their
            # elements' shapes are checked where an op reads them into a tensor)
            if name and name not in declared and name in case.value_types:
                model.graph.output.append(
                    helper.make_tensor_value_info(name, case.value_types[name], None)
                )
    return model


def _session(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # a folded weight must not switch kernels (see onnx_symdims/_verify_worker.py)
    options.add_session_config_entry("session.disable_prepacking", "1")
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


def _subgraph_dim_names(graph: onnx.GraphProto) -> set[str]:
    """The dim names declared on the values of ``graph``'s subgraphs (``If`` branches,
    ``Loop``/``Scan`` bodies): inference may write them where it knows no more, so they
    are checked as minted symbols are (one size per run)."""
    names: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                for info in [*sub.input, *sub.output, *sub.value_info]:
                    if info.type.HasField("tensor_type"):
                        names.update(
                            d.dim_param for d in info.type.tensor_type.shape.dim if d.dim_param
                        )
                names |= _subgraph_dim_names(sub)
    return names


class _RunChecker:
    """Compares one onnxruntime run with the inferred facts."""

    def __init__(self, case: FuzzCase, model: ir.Model, context: ShapesContext, b: int):
        self.case = case
        self.context = context
        self.b = b
        self.bound: dict[str, int] = dict(case.bindings[b])
        self.findings: list[Finding] = []
        self.values = {v.name: v for node in model.graph for v in node.outputs if v.name}
        self.values.update({v.name: v for v in model.graph.inputs})
        self.producers = {o: n.op_type for n in case.model.graph.node for o in n.output}
        self.producers.update({v.name: "graph input" for v in model.graph.inputs})
        self.subgraph_names = _subgraph_dim_names(case.model.graph)

    def _add(self, kind: str, value: str | None, message: str, op: str | None = None) -> None:
        op_type = op or (self.producers.get(value, "?") if value else "?")
        self.findings.append(Finding(kind, value, op_type, self.b, message))

    def _fresh(self, d: expr.Dim) -> bool:
        return (
            isinstance(d, expr.DimExpr)
            and d.is_symbol
            and d.name not in self.case.bindings[self.b]
        )

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
                if (
                    not self.context.is_generated(d.name)
                    and d.name not in self.case.declared
                    and d.name not in self.subgraph_names
                ):
                    self._add(
                        "dim", name, f"{where}: {d.name} is neither an input symbol nor minted"
                    )
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
                self._add(
                    "dtype", name, f"{name}: inferred {dtype}, onnxruntime {array.dtype}"
                )
            if dims is None:
                continue
            if len(dims) != array.ndim:
                printed = [_printed(d) for d in dims]
                self._add(
                    "rank",
                    name,
                    f"{name}: inferred {printed}, onnxruntime {list(array.shape)}",
                )
                continue
            for axis, (d, size) in enumerate(zip(dims, array.shape)):
                self._check_dim(name, f"{name}[{axis}]", d, size, dims, array.shape)
            self._check_elements(name, array)
        self._check_constraints()
        return self.findings

    def _evaluate(self, d: expr.Dim) -> int | Exception | None:
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
            self._add(
                "element",
                name,
                f"{name}: {len(elements)} known elements, onnxruntime {array.shape}",
            )
            return
        for k, (e, real) in enumerate(zip(elements, flat)):
            if isinstance(e, expr.DimExpr) and e.is_unknown:
                continue
            got = self._evaluate(e)
            if isinstance(got, Exception):
                self._add(
                    "raises",
                    name,
                    f"{name} element {k}: {_printed(e)} raises {type(got).__name__} under "
                    f"{self.bound}; onnxruntime {real}",
                )
            elif got is not None and got != real:
                self._add(
                    "element",
                    name,
                    f"{name} element {k}: inferred {_printed(e)} = {got}, onnxruntime {real} "
                    f"under {self.bound}",
                )

    def _check_constraints(self) -> None:
        for a, b in self.context.constraint_dims():
            x, y = self._evaluate(a), self._evaluate(b)
            if x is not None and y is not None and x != y:
                self._add(
                    "equality",
                    None,
                    f"recorded {_printed(a)} == {_printed(b)}: {x} vs {y} under {self.bound}",
                    op=_ops_of(self, a, b),
                )
        for lhs, rhs in self.context.less_equal_constraint_dims():
            x, y = self._evaluate(lhs), self._evaluate(rhs)
            if x is None or y is None:
                continue
            if isinstance(x, Exception) or isinstance(y, Exception) or x > y:
                self._add(
                    "bound",
                    None,
                    f"recorded {_printed(lhs)} <= {_printed(rhs)}: {x} vs {y} under {self.bound}",
                    op=_ops_of(self, lhs, rhs),
                )


def _ops_of(checker: _RunChecker, *dims: expr.Dim) -> str:
    """The op types that minted the symbols of ``dims`` (minted names start with it)."""
    names = {s for d in dims if isinstance(d, expr.DimExpr) for s in d.symbols()}
    ops = {n.op_type for n in checker.case.model.graph.node}
    found = {name.split("_")[0] for name in names if checker.context.is_generated(name)}
    return "+".join(sorted(found & ops)) or "?"


def _crash_site(error: Exception) -> tuple[str, str]:
    """Where in the engine ``error`` was raised: (outermost module, message with frames)."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if "onnx_symdims" in f.filename and not f.filename.endswith("__init__.py")
    ]
    if not frames:
        return "?", f"{type(error).__name__}: {error}"
    outer, inner = frames[0], frames[-1]
    module = outer.filename.split("onnx_symdims/")[-1]
    sites = f"{module}:{outer.lineno} {outer.name} ... {inner.filename.split('onnx_symdims/')[-1]}:{inner.lineno} {inner.name}"
    return module, f"{type(error).__name__}: {str(error)[:200]} (raised in {sites})"


def check_case_quietly(case: FuzzCase) -> Outcome:
    """:func:`check_case` with warnings and log records below CRITICAL silenced (tests)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.ERROR)
        try:
            return check_case(case)
        finally:
            logging.disable(logging.NOTSET)


def check_case(case: FuzzCase, bindings: Sequence[int] | None = None) -> Outcome:
    """Infers the case and compares with onnxruntime on each binding (all by default)."""
    try:
        model, context = infer(case)
    except Exception as error:  # the pass must never raise on a valid model
        logger.debug("inference raised", exc_info=True)
        where, message = _crash_site(error)
        return Outcome([Finding("crash", None, where, -1, message)])
    try:
        session = _session(exposed(case))
    except Exception as error:
        return Outcome([], rejected=str(error).splitlines()[0][:200])
    names = [o.name for o in session.get_outputs()]
    outcome = Outcome([])
    complained = any(d.severity == "error" for d in context.diagnostics)
    for b in bindings if bindings is not None else range(len(case.bindings)):
        if not case.applicable(b):
            continue
        try:
            actual = dict(zip(names, session.run(names, case.feeds[b])))
        except Exception:  # not valid for these sizes
            continue
        departure = _departure(case, b, dict(zip(names, (a.shape for a in actual.values()))))
        if departure:
            outcome.departures.append(departure)
            continue
        findings = _RunChecker(case, model, context, b).check({**case.feeds[b], **actual})
        rejection = _spec_rejects(case, b, actual) if findings or complained else None
        if rejection:
            outcome.departures.append(f"spec rejects: {rejection}")
            continue
        outcome.runs += 1
        outcome.findings += findings
    if outcome.runs:
        outcome.findings += _diagnostic_findings(case, context)
    return outcome


def _departure(case: FuzzCase, b: int, actual: Mapping[str, tuple[int, ...]]) -> str | None:
    """Why this onnxruntime run cannot judge the engine, or ``None`` when it can.

    * onnxruntime departs from the spec where the engine follows the spec: a
      ``NonZero`` of a scalar is ``[1, nnz]`` in onnxruntime, ``[0, nnz]`` per ONNX.
    * A declared rank (graph output or value_info, taken from the reference evaluator
      when the case was generated) that onnxruntime does not produce: the declaration
      is false for this run, so what the engine derived from it is not a fact here.
    * A ``Loop`` with scan outputs ran no iteration: the spec leaves a scan output's dims
      past the first undefined then (onnx/onnxruntime#1233), and onnxruntime takes them
      from the body output's static type as its load-time inference knows it (other
      dims 0). The engine writes the body output's shape, so an int there is the int
      onnxruntime gives on the model *it writes*, and leaves any other dim to the
      runtime then (``tests/ops/test_control_flow_zero_trips.py``); on the original
      they may be 0.

    Elsewhere onnxruntime is the oracle, also where the reference evaluator differs
    (its ``MaxPool``/``GlobalMaxPool``/``ConvTranspose`` shapes are off in places; the
    engine follows onnxruntime there).
    """
    if ran_no_iteration(case.model.graph, actual):
        return "a Loop with scan outputs ran no iteration"
    ranks = {name: len(shape) for name, shape in actual.items()}
    ranks.update({name: a.ndim for name, a in case.feeds[b].items()})
    ranks.update({t.name: len(t.dims) for t in case.model.graph.initializer})
    for node in case.model.graph.node:
        if node.op_type == "NonZero" and ranks.get(node.input[0]) == 0:
            return "NonZero of a scalar"
    for output in [*case.model.graph.output, *case.model.graph.value_info]:
        if output.type.tensor_type.HasField("shape") and output.name in ranks:
            declared = len(output.type.tensor_type.shape.dim)
            if declared != ranks[output.name]:
                return f"declared rank: {output.name} {declared}, onnxruntime {ranks[output.name]}"
    return None


def ran_no_iteration(graph: onnx.GraphProto, shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """Whether a ``Loop`` of ``graph`` with scan outputs has one of length 0 in ``shapes``."""
    for node in graph.node:
        if node.op_type == "Loop" and node.domain in ("", "ai.onnx"):
            carried = max(len(node.input) - 2, 0)
            for name in node.output[carried:]:
                if name and tuple(shapes.get(name, (1,)))[:1] == (0,):
                    return True
    return False


def _spec_rejects(case: FuzzCase, b: int, actual: Mapping[str, np.ndarray]) -> str | None:
    """The first node that is invalid per the spec on onnxruntime's own values, if any.

    onnxruntime accepts some runs the spec forbids (a ``Concat`` whose empty input has
    other dims that differ; ``Reshape`` with ``allowzero=1`` and both 0 and -1), and the
    generator's validity check can miss them when the reference evaluator computed
    different values upstream (its ``Slice`` mis-clamps some negative steps). Each node
    is run with the reference evaluator on the values onnxruntime computed (a ``Slice``
    whose shape differs there is onnxruntime's departure); only done for runs with
    findings, as it costs as much as the run.
    """
    known: dict[str, np.ndarray] = {
        t.name: numpy_helper.to_array(t) for t in case.model.graph.initializer
    }
    known.update(case.feeds[b])
    known.update(actual)
    for node in case.model.graph.node:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                feed = {i: known[i] for i in node.input if i}
                feed.update({i: known[i] for i in outer_names(node) if i in known})
                outputs = reference(node, case.opset).run(None, feed)
        except Exception as error:
            return f"{node.op_type} {node.name}: {str(error).splitlines()[0][:120]}"
        if node.op_type == "Slice" and node.output[0] in actual:
            # onnxruntime keeps elements of a backward Slice ending at INT64_MAX, empty
            # by the spec: the engine mints a dim there, but a declared int downstream
            # (a branch output declared as the reference evaluator computed it) is the spec's
            spec, ours = np.shape(outputs[0]), actual[node.output[0]].shape
            if spec != ours:
                return f"Slice {node.name}: onnxruntime {list(ours)}, the spec {list(spec)}"
    return None


def _diagnostic_findings(case: FuzzCase, context: ShapesContext) -> list[Finding]:
    """Error diagnostics on a model that ran: a crashed hook, or a node called malformed."""
    outputs = {n.name: n.output[0] for n in case.model.graph.node if n.name and n.output}
    findings = []
    for diagnostic in context.diagnostics:
        if diagnostic.severity != "error":
            continue
        kind = "internal" if "internal error" in diagnostic.message else "spurious-error"
        value = outputs.get(diagnostic.node_name or "")
        findings.append(Finding(kind, value, diagnostic.op_type, -1, str(diagnostic)))
    return findings


# ----------------------------------------------------------------------------- shrinking
def likely_hook(op_type: str, opset: int) -> str:
    """The engine function in charge of ``op_type`` (or the ONNX fallback)."""
    if op_type.endswith(".py"):  # a crash: the module it was raised from
        return f"onnx_symdims/{op_type}"
    hook = lookup("", op_type, opset)
    if hook is None:
        return "ONNX fallback (onnx_symdims/ops/_fallback.py)"
    return f"{hook.__module__}.{hook.__qualname__}"


def rebuild(
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
    produced = {o for n in nodes for o in n.output}
    value_info = [copy.deepcopy(v) for v in graph.value_info if v.name in produced]
    new_graph = helper.make_graph(
        [copy.deepcopy(n) for n in nodes],
        graph.name,
        kept_inputs,
        declared,
        initializer=initializers,
        value_info=value_info,
    )
    model = helper.make_model(new_graph, opset_imports=list(case.model.opset_import))
    model.ir_version = case.model.ir_version
    feeds = [
        {
            value.name: make_feed(value.name, input_shape(value, binding))
            for value in kept_inputs
        }
        for binding in bindings
    ]
    rebuilt = FuzzCase(
        case.seed,
        model,
        bindings,
        feeds,
        dict(case.value_types),
        dict(case.options),
        case.declared,
    )
    simulations = [simulate(rebuilt, b) for b in range(len(bindings))]
    rebuilt.valid = [s.valid for s in simulations]
    rebuilt.unsafe = any(s.unsafe for s in simulations)
    return rebuilt


def backward_slice(
    nodes: Sequence[onnx.NodeProto], targets: Sequence[str]
) -> list[onnx.NodeProto]:
    """The nodes ``targets`` depend on, in their original order."""
    needed = set(targets)
    kept = []
    for node in reversed(nodes):
        if needed & set(node.output):
            kept.append(node)
            needed |= set(node.input)
    return kept[::-1]


def minimize(case: FuzzCase, finding: Finding, budget: int = 250) -> FuzzCase:
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
    else:  # a diagnostic or a crash: keep every binding, one of them runs
        bindings = case.bindings
    current = rebuild(case, nodes, targets, bindings=bindings)
    sliced = rebuild(current, backward_slice(nodes, targets), targets)
    if reproduces(sliced):
        current = sliced
    elif not reproduces(current):
        return current  # not reproducible alone (flaky or context-dependent): keep all
    current = _reduce_greedily(current, reproduces, lambda: checks < budget)
    return _concretize_inputs(current, reproduces, lambda: checks < budget)


_VARIADIC = ("Concat", "Sum", "Max", "Min", "Mean")


def _reductions(case: FuzzCase):
    """Smaller variants of ``case``: (nodes, graph outputs) pairs, most drastic first."""
    nodes = list(case.model.graph.node)
    targets = [o.name for o in case.model.graph.output]
    for k in range(len(targets)) if len(targets) > 1 else ():
        kept = targets[:k] + targets[k + 1 :]
        yield backward_slice(nodes, kept), kept
    for index in range(len(nodes) - 1, -1, -1):
        node = nodes[index]
        if set(node.output) & set(targets):
            continue
        output_type = case.value_types.get(node.output[0])
        same_type = [i for i in node.input if i and _type_of(case, i) == output_type]
        for replacement in same_type[:2]:  # bypass the node
            yield backward_slice(_rewire(nodes, index, replacement), targets), targets
    for index, node in enumerate(nodes):
        if node.op_type in _VARIADIC and len(node.input) > 1:
            for k in range(len(node.input)):
                smaller = copy.deepcopy(node)
                del smaller.input[k]
                yield (
                    backward_slice([*nodes[:index], smaller, *nodes[index + 1 :]], targets),
                    targets,
                )


def _reduce_greedily(
    case: FuzzCase, reproduces: Callable[[FuzzCase], bool], more: Callable[[], bool]
) -> FuzzCase:
    """Takes the first reduction that still reproduces, until none does."""
    changed = True
    while changed and more():
        changed = False
        for nodes, targets in _reductions(case):
            if not more():
                break
            candidate = rebuild(case, nodes, targets)
            if reproduces(candidate):
                case, changed = candidate, True
                break
    return case


def _type_of(case: FuzzCase, name: str) -> int | None:
    return case.value_types.get(name, _input_type(case, name))


def _input_type(case: FuzzCase, name: str) -> int | None:
    for value in case.model.graph.input:
        if value.name == name:
            return value.type.tensor_type.elem_type
    for tensor in case.model.graph.initializer:
        if tensor.name == name:
            return tensor.data_type
    return None


def _rewire(
    nodes: Sequence[onnx.NodeProto], index: int, replacement: str
) -> list[onnx.NodeProto]:
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
    case: FuzzCase, reproduces: Callable[[FuzzCase], bool], more: Callable[[], bool]
) -> FuzzCase:
    """Greedily turns symbolic input dims into their size in the (single) binding."""
    if len(case.bindings) != 1:
        return case
    binding = case.bindings[0]
    targets = [o.name for o in case.model.graph.output]
    for k, value in enumerate(case.model.graph.input):
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") or not more():
                continue
            inputs = [copy.deepcopy(v) for v in case.model.graph.input]
            size = dim_size(dim, binding, hidden_symbol(value.name, axis))
            inputs[k].type.tensor_type.shape.dim[axis].dim_value = size
            candidate = rebuild(case, list(case.model.graph.node), targets, inputs=inputs)
            if reproduces(candidate):
                case = candidate
    return case


def restate(case: FuzzCase, finding: Finding) -> Finding:
    """The finding as it shows on ``case`` (a shrunk one): same op and kind, new message."""
    for candidate in check_case(case).findings:
        if candidate.signature == finding.signature:
            return candidate
    return finding


def report(case: FuzzCase, finding: Finding) -> str:
    """A finding as text: kind, binding, expected vs inferred, hook, ONNX reproducer."""
    index = finding.binding_index
    # the first binding of a shrunk case in which the finding did not show again
    binding = case.bindings[index if 0 <= index < len(case.bindings) else 0]
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


def case_from_text(
    text: str,
    bindings: Sequence[Mapping[str, int]],
    options: Mapping[str, object] | None = None,
) -> FuzzCase:
    """A case from a model in the ONNX text syntax (a reproducer), run on ``bindings``.

    Input data comes from :func:`~tests.fuzz.graph_gen.make_feed`, as in the fuzzer.
    Graph outputs declared with dims are anchors: their dim names are taken as declared.
    """
    model = onnx.parser.parse_model(text)
    typed = onnx.shape_inference.infer_shapes(model)
    value_types = {
        v.name: v.type.tensor_type.elem_type
        for v in [*typed.graph.value_info, *typed.graph.output]
        if v.type.tensor_type.elem_type
    }
    declared = frozenset(
        d.dim_param
        for output in [*model.graph.output, *model.graph.value_info]
        for d in output.type.tensor_type.shape.dim
        if d.HasField("dim_param")
    )
    base = FuzzCase(-1, model, [], [], value_types, dict(options or {}), declared)
    targets = [o.name for o in model.graph.output]
    return rebuild(base, list(model.graph.node), targets, bindings=bindings)
