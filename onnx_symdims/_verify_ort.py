"""onnxruntime sessions for verification: quiet, without telemetry, one-line errors.

onnxruntime writes telemetry files (``~/.cache/Microsoft/DeveloperTools/.onnxruntime``,
``$TMPDIR/.ses``) unless ``ORT_DISABLE_TELEMETRY`` is set *before it is imported*, and
logs every failed kernel in red on stderr unless both the session and each run ask for
a higher severity. Every session made here does both.
"""

from __future__ import annotations

__all__ = [
    "VerifyError",
    "feeds_for",
    "import_onnxruntime",
    "make_session",
    "run",
    "short_error",
]

import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims._modelio import one_line
from onnx_symdims._verify_worker import IsolatedSession, OnnxruntimeCrash

logger = logging.getLogger(__name__)

#: onnxruntime severity 3 = ERROR is still printed for failed kernels; 4 = FATAL only.
_QUIET = 4


class VerifyError(RuntimeError):
    """onnxruntime cannot run the model at all (e.g. it refuses to create a session)."""


def import_onnxruntime():
    """Imports onnxruntime with telemetry off and its default logger quiet.

    Raises:
        ImportError: onnxruntime is not installed.
    """
    # Only effective before the first import (read once by the native library).
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort

    ort.set_default_logger_severity(_QUIET)
    return ort


def _external_data_dir(model: ir.Model) -> str | None:
    for graph in (model.graph, *model.graph.subgraphs()):
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                return os.path.abspath(tensor.base_dir or ".")
    return None


def make_session(
    model: ir.Model, extra_outputs: Sequence[ir.Value] = (), *, keep_value_info: bool = False
) -> IsolatedSession:
    """An onnxruntime CPU session of ``model`` (not modified), graph optimizations off.

    The session lives in a child process (:class:`~onnx_symdims._verify_worker.
    IsolatedSession`): a run that crashes onnxruntime (``SIGFPE`` on an integer division
    by zero) fails alone.

    Args:
        model: The model.
        extra_outputs: Intermediate values to expose as additional outputs.
        keep_value_info: Keep the model's ``value_info`` (by default it is dropped, so
            onnxruntime neither sees nor trusts inferred shapes).

    Raises:
        ImportError: onnxruntime is not installed.
        VerifyError: onnxruntime refuses the model (one-line message).
    """
    import_onnxruntime()  # ImportError here, in the caller, when it is missing
    proto = ir.serde.serialize_model(model)
    graph = proto.graph
    if not keep_value_info:
        del graph.value_info[:]
    existing = {o.name for o in graph.output}
    for value in extra_outputs:
        if value.name in existing:
            continue
        existing.add(value.name)
        output = graph.output.add()
        output.name = value.name
        output.type.tensor_type.elem_type = int(value.dtype)  # type: ignore[arg-type]
    try:
        return IsolatedSession(proto.SerializeToString(), _external_data_dir(model))
    except (ValueError, OnnxruntimeCrash) as e:  # Fail / InvalidGraph / NotImplemented ...
        raise VerifyError(f"onnxruntime cannot load the model: {one_line(str(e))}") from e


def run(session, output_names: Sequence[str], feeds: Mapping[str, np.ndarray]) -> list:
    """``session.run`` (the session logs nothing: the exception says it all)."""
    return session.run(list(output_names), dict(feeds))


_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_ORT_NODE = re.compile(
    r"Non-zero status code returned while running (\S+) node\. Name:'([^']*)' Status Message: "
)
# A source location, the C++ function and the failed check: "/x/y.h:91 void f(...) c was false. "
_ORT_CHECK = re.compile(r"(?:/\S+|\S+\.(?:h|cc|cpp)):\d+ .*? was false\.\s*")


def short_error(error: BaseException | str) -> str:
    """The error of an onnxruntime call on one line, without its boilerplate.

    ``[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Add
    node. Name:'a' Status Message: /src/element_wise_ops.h:563 void ...() axis == 1 was
    false. Attempting to broadcast an axis by a dimension other than 1. 5 by 13`` becomes
    ``Add node 'a': Attempting to broadcast an axis by a dimension other than 1. 5 by 13``.
    """
    text = one_line(str(error), 10_000)
    text = _ORT_PREFIX.sub("", text)
    text = _ORT_NODE.sub(lambda m: f"{m.group(1)} node '{m.group(2)}': ", text)
    return one_line(_ORT_CHECK.sub("", text), 400)


def _safe_int_high(sizes: Sequence[Sequence[int]]) -> int:
    """Exclusive upper end for random ints: the smallest positive input dim (>= 1)."""
    positive = [s for dims in sizes for s in dims if s > 0]
    return max(1, min(positive, default=1))


#: Most bytes of input arrays one run builds. A fixed dim of 2**40, or 40 dims drawn in
#: 2..8, would otherwise fill memory (standard_normal writes every element) or make numpy
#: raise "array is too big" from inside the verify loop.
MAX_FEED_BYTES = 2**30


def _check_feed_size(shapes: Sequence[tuple[ir.Value, Sequence[int]]]) -> None:
    """Raises ``ValueError`` naming the input when the feeds of a run cannot be built."""
    total = 0
    for value, sizes in shapes:
        if any(s < 0 for s in sizes):
            raise ValueError(f"input {value.name!r} would have the negative shape {sizes}")
        dtype = value.dtype or ir.DataType.FLOAT
        itemsize = 8 if dtype == ir.DataType.STRING else max(1, dtype.itemsize)
        count = 1
        for s in sizes:
            count *= s
        total += int(count * itemsize)
        if total > MAX_FEED_BYTES:
            raise ValueError(
                f"the inputs would take more than {MAX_FEED_BYTES // 2**30} GiB (input "
                f"{value.name!r} has shape {sizes}); verify builds no larger inputs"
            )


def feeds_for(
    graph: ir.Graph,
    input_dims: Sequence[Sequence[expr.Dim | None] | None],
    binding: Mapping[str, int],
    data_rng: np.random.Generator,
    *,
    random_ints: bool = False,
    unknown_size: int = 2,
) -> dict[str, np.ndarray]:
    """Input arrays for one run under ``binding``.

    Floats are standard normal; ``mask``-named and boolean inputs are ones; other
    integers are zeros (always valid ids and indices), or with ``random_ints`` drawn in
    ``0..m-1`` for ``m`` the smallest positive input dim, which keeps indices in range
    in the models we meet while exercising more than zeros. Inputs an initializer backs
    are left to their default.

    Raises:
        ValueError: a size is negative, or the inputs would exceed ``MAX_FEED_BYTES``.
    """
    shapes: list[tuple[ir.Value, list[int]]] = []
    for value, dims in zip(graph.inputs, input_dims):
        if value.name in graph.initializers:
            continue
        sizes = [
            expr.evaluate(d, binding) if d is not None else unknown_size for d in (dims or [])
        ]
        shapes.append((value, sizes))
    _check_feed_size(shapes)
    high = _safe_int_high([s for _, s in shapes])
    feeds: dict[str, Any] = {}
    for value, sizes in shapes:
        dtype = value.dtype or ir.DataType.FLOAT
        np_dtype = dtype.numpy()
        name = (value.name or "").lower()
        if dtype == ir.DataType.BOOL or "mask" in name:
            array = np.ones(sizes, dtype=np_dtype)
        elif dtype.is_floating_point():
            array = data_rng.standard_normal(sizes).astype(np_dtype)
        elif random_ints:
            array = data_rng.integers(0, high, size=sizes).astype(np_dtype)
        else:
            array = np.zeros(sizes, dtype=np_dtype)
        if isinstance(value.type, ir.SequenceType):
            # onnxruntime takes a sequence as a list of arrays; a tensor in its place
            # failed every run ("expected to be of type: 3 but received a tensor").
            feeds[value.name] = [array, array.copy()]
        else:
            feeds[value.name] = array
    return feeds
