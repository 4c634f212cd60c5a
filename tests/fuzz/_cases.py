"""The fuzz case and its helpers: bindings, feeds, the reference evaluator, simulation.

A :class:`FuzzCase` is what :func:`tests.fuzz.graph_gen.generate` returns and what the
oracle (:mod:`tests.fuzz.oracle`) checks: a model, three bindings of its symbols, the input
data of each, and which bindings are valid per the reference evaluator (:func:`simulate`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import warnings
import zlib
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_loop import Loop as _ReferenceLoop

logger = logging.getLogger(__name__)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
SYMBOLS = ("N", "M", "K")
NUM_BINDINGS = 3
MAX_ELEMENTS = 2048  # per tensor, so onnxruntime runs stay fast
MAX_DATA_DIM = 48  # a size taken from data (ConstantOfShape, Range, Tile, Pad, ...)
SMALL_INT = 1 << 20  # integer operands of arithmetic stay well inside int64

#: onnxruntime kernels that kill the process (instead of failing) on an empty operand:
#: Einsum (SIGFPE, e.g. ``i,li->l`` on ``[0]`` and ``[5, 0]``) and Unique with an
#: ``axis`` (abort, e.g. axis 0 of a ``[3, 0]`` tensor).
CRASHES_ON_EMPTY = ("Einsum", "Unique")


@dataclasses.dataclass
class FuzzCase:
    """A generated model with the bindings and input data it is meant to run on.

    Attributes:
        seed: The seed it was generated from.
        model: The model; graph outputs are declared with an element type only.
        bindings: Per run, the size of every input symbol.
        feeds: Per run, the input arrays (shaped by the binding).
        value_types: Element type of every node output (to expose them to onnxruntime).
        options: Keyword options for ``infer_symbolic_shapes`` (``nonempty_inputs``,
            ``symbol_ranges``): assumptions that only some bindings satisfy.
        declared: Symbols declared on graph outputs (each names one dim, so the
            declaration holds for every run): the anchor pass may rename minted
            symbols to them.
        valid: Per binding, whether the reference evaluator runs every node: the spec
            stand-in. onnxruntime is lenient in places (a ``Concat`` of empty inputs
            whose other dims differ, ``Reshape`` with ``allowzero=1`` and both 0 and
            -1); a run only onnxruntime accepts is not one the engine must describe.
            (The reference evaluator's own departures cost coverage, not soundness.)
        unsafe: Whether running it might crash onnxruntime (see :func:`simulate`).
    """

    seed: int
    model: onnx.ModelProto
    bindings: list[dict[str, int]]
    feeds: list[dict[str, np.ndarray]]
    value_types: dict[str, int]
    options: dict[str, object] = dataclasses.field(default_factory=dict)
    declared: frozenset[str] = frozenset()
    valid: list[bool] = dataclasses.field(default_factory=list)
    unsafe: bool = False

    def applicable(self, b: int) -> bool:
        """Whether binding ``b`` is valid and satisfies the assumptions in ``options``."""
        if self.valid and not self.valid[b]:
            return False
        binding = self.bindings[b]
        used = {
            symbol
            for value in self.model.graph.input
            for k, d in enumerate(value.type.tensor_type.shape.dim)
            for symbol in dim_symbols(d, hidden_symbol(value.name, k))
        }
        if self.options.get("nonempty_inputs") and any(binding[s] < 1 for s in used):
            return False
        ranges = self.options.get("symbol_ranges", {})
        for name, (lower, upper) in ranges.items():  # type: ignore[union-attr]
            size = binding.get(name)
            if size is None:
                continue
            if (lower is not None and size < lower) or (upper is not None and size > upper):
                return False
        return True

    @property
    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))

    def text(self) -> str:
        """The model in the ONNX text syntax."""
        return onnx.printer.to_text(self.model)


ANONYMOUS = "?"  # an input dim that names nothing: each one is its own hidden size
_NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def hidden_symbol(input_name: str, axis: int) -> str:
    """The binding key of an anonymous input dim (not a name the model can use)."""
    return f"?{input_name}[{axis}]"


def dim_size(dim: onnx.TensorShapeProto.Dimension, binding: dict[str, int], key: str) -> int:
    """The size of a declared input dim under ``binding``.

    ``dim_param`` texts are the generator's own (``N``, ``N+1``, ``2*M``, ``N*K``) and
    are evaluated here independently of the engine's parser; an anonymous dim (no
    value, no text, or ``?``) takes ``binding[key]``.
    """
    if dim.HasField("dim_value"):
        return dim.dim_value
    text = dim.dim_param if dim.HasField("dim_param") else ""
    if text in ("", ANONYMOUS):
        return binding[key]
    return int(eval(text, {"__builtins__": {}}, dict(binding)))  # our own texts only


def dim_symbols(dim: onnx.TensorShapeProto.Dimension, key: str) -> set[str]:
    """The binding keys a declared input dim depends on."""
    if dim.HasField("dim_value"):
        return set()
    text = dim.dim_param if dim.HasField("dim_param") else ""
    return {key} if text in ("", ANONYMOUS) else set(_NAMES.findall(text))


def input_shape(value: onnx.ValueInfoProto, binding: dict[str, int]) -> list[int]:
    """The shape of a graph input under ``binding``."""
    dims = value.type.tensor_type.shape.dim
    return [dim_size(d, binding, hidden_symbol(value.name, k)) for k, d in enumerate(dims)]


def make_feed(name: str, shape: Sequence[int]) -> np.ndarray:
    """Deterministic float input data: small integers, a third of them zero.

    Integers keep float arithmetic exact, so data-dependent sizes (``NonZero``,
    ``Compress``) are the same for the reference evaluator and onnxruntime; the zeros
    make those sizes interesting. Only the input's name and shape matter, so a
    reproducer cut from a larger graph is fed the same data.
    """
    seed = zlib.crc32(f"{name}:{tuple(shape)}".encode())
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-2, -1, 0, 0, 1, 2], dtype=np.float32), size=tuple(shape))


class Shape(OpRun):
    """``Shape`` with ``start``/``end`` clamped as the spec says.

    The reference evaluator of onnx 1.23 slices ``shape[0 : rank + end]`` without
    clamping, so ``end=-3`` on a rank-2 tensor gives one dim instead of none.
    """

    op_domain = ""

    def _run(self, data, end=None, start=None):
        rank = data.ndim
        lower = 0 if start is None else start + rank if start < 0 else start
        upper = rank if end is None else end + rank if end < 0 else end
        lower, upper = min(max(lower, 0), rank), min(max(upper, 0), rank)
        return (np.array(data.shape[lower:upper], dtype=np.int64),)


class Loop(_ReferenceLoop):
    """``Loop`` as the spec says where onnx 1.23's reference evaluator departs.

    Its ``Loop`` runs no iteration when the condition input is absent (the trip count
    alone bounds the loop), ``vstack``s the scan outputs (``[2, 3]`` per iteration, twice,
    gives ``[4, 3]``, not ``[2, 2, 3]``) and raises on the scan outputs of zero iterations
    (their per-iteration shape is unknown: ``[0]``, as onnxruntime gives where its own
    inference did not shape the body's output).
    """

    op_domain = ""

    def _run(self, trip, cond, *args, context=None, body=None, attributes=None, bindings=None):
        body = self.body
        names = body.input_names
        inputs = dict.fromkeys(names)
        for name, value in zip(names[2:], args):
            inputs[name] = value
        if context is not None:
            inputs.update(context)
        carried = len(names) - 2
        count = self.K  # scan outputs
        scans: list[list[np.ndarray]] = [[] for _ in range(count)]
        it = 0
        cond = np.array(True) if cond is None else cond
        while bool(cond) and (trip is None or it < int(trip)):
            if names[0]:
                inputs[names[0]] = np.array(it, dtype=np.int64)
            if names[1]:
                inputs[names[1]] = cond
            computed = self._run_body(inputs, attributes=attributes, bindings=bindings)
            outputs = [computed[self.output_index[o]] for o in body.output_names]
            cond = outputs[0]
            for name, value in zip(names[2:], outputs[1 : 1 + carried]):
                inputs[name] = value
            for k in range(count):
                scans[k].append(outputs[1 + carried + k])
            it += 1
        results = [inputs[name] for name in names[2:]]
        graph = next(a.g for a in self.onnx_node.attribute if a.name == "body")
        for k, steps in enumerate(scans):
            if steps:
                results.append(np.stack(steps))
            else:
                elem = graph.output[1 + carried + k].type.tensor_type.elem_type
                results.append(np.zeros((0,), onnx.helper.tensor_dtype_to_np_dtype(elem)))
        return self._check_and_fix_outputs(tuple(results))


#: From this opset on a node's reference evaluator is built from the node alone (which
#: runs each op's latest version whatever ``opsets`` says: fine for 18 to 21, the seeds'
#: graphs stay as they were); below, from a one-node model importing the opset, so that
#: ``Unsqueeze`` at 11 is ``Unsqueeze_11`` (its axes an attribute).
_NODE_ALONE_FROM = 18


def reference(node: onnx.NodeProto, opset: int, spec_loop: bool = True) -> ReferenceEvaluator:
    """The reference evaluator of one node, with the spec fixes above.

    ``spec_loop=False`` keeps the reference evaluator's own ``Loop`` (the generator of
    the seeds below ``WIDE_FROM``, so that they keep naming the same graphs).
    """
    fixes = [Shape, Loop] if spec_loop else [Shape]
    if opset >= _NODE_ALONE_FROM:
        return ReferenceEvaluator(node, opsets={"": opset}, new_ops=fixes)
    names = [*(i for i in node.input if i), *sorted(outer_names(node) - set(node.input))]
    graph = onnx.helper.make_graph(
        [node],
        "one_node",
        [onnx.helper.make_tensor_value_info(n, 0, None) for n in names],
        [onnx.helper.make_tensor_value_info(n, 0, None) for n in node.output if n],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model, new_ops=fixes)


def _crashes_onnxruntime(node: onnx.NodeProto, arrays: Sequence[np.ndarray | None]) -> bool:
    """Whether onnxruntime might kill the process on this node (``None``: input unknown)."""
    if node.op_type in ("Div", "Mod") and len(arrays) == 2:
        divisor = arrays[1]
        if divisor is None:
            return True  # might be an integer 0
        return divisor.dtype.kind in "iu" and bool(np.any(divisor == 0))
    if node.op_type in CRASHES_ON_EMPTY:
        if node.op_type == "Unique" and not any(a.name == "axis" for a in node.attribute):
            return False
        return any(a is None or a.size == 0 for a in arrays)
    return False


@dataclasses.dataclass
class Simulation:
    """The reference evaluator's view of one run of a case.

    Attributes:
        valid: Every node ran: the sizes are valid per the spec (as far as the reference
            evaluator enforces it).
        unsafe: Some node might crash onnxruntime: an integer division by zero, an empty
            operand of a kernel in :data:`CRASHES_ON_EMPTY`, an input the reference
            could not compute (onnxruntime may be more lenient and reach the node), or a
            huge output.
    """

    valid: bool
    unsafe: bool


def outer_names(node: onnx.NodeProto) -> set[str]:
    """Names the subgraphs of ``node`` (``If`` branches, a ``Loop`` body) read from outside."""
    names: set[str] = set()
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
            inner = {v.name for v in graph.input} | {t.name for t in graph.initializer}
            for inner_node in graph.node:
                names |= {i for i in inner_node.input if i and i not in inner}
                names |= outer_names(inner_node) - inner
                inner |= set(inner_node.output)
            names |= {o.name for o in graph.output} - inner
    return names


def simulate(case: FuzzCase, b: int) -> Simulation:
    """Runs every node of ``case`` with the reference evaluator on binding ``b``."""
    constants = {t.name: numpy_helper.to_array(t) for t in case.model.graph.initializer}
    known: dict[str, np.ndarray] = {**constants, **case.feeds[b]}
    valid = True
    for node in case.model.graph.node:
        arrays = [known.get(i) if i else None for i in node.input]
        if _crashes_onnxruntime(node, arrays):
            return Simulation(False, True)
        if any(a is None for i, a in zip(node.input, arrays) if i):
            continue  # downstream of a node the reference rejected
        feed = {i: a for i, a in zip(node.input, arrays) if i}
        feed.update({i: known[i] for i in outer_names(node) if i in known})
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                evaluator = reference(node, case.opset)
                outputs = evaluator.run(None, feed)
        except Exception:
            valid = False
            continue
        for name, array in zip(node.output, outputs):
            if isinstance(array, list):  # a sequence: kept as the list of its tensors
                known[name] = array
                continue
            array = np.asarray(array)
            if array.size > 16 * MAX_ELEMENTS:
                return Simulation(False, True)
            known[name] = array
    return Simulation(valid, False)
