"""Running a pass on deeply nested models without exhausting Python's stack.

Subgraphs (If branches, Loop bodies) and model-local function calls are inferred
recursively: each level costs a few dozen Python frames, so a valid model with a few
hundred levels of nesting would end in ``RecursionError`` under the default limit of
1000. For such models (only), the pass runs in a worker thread with a stack sized for
the nesting and a recursion limit raised for the duration of the run, then restored.
Shallow models run in the calling thread, exactly as before.
"""

from __future__ import annotations

__all__ = ["nesting_bound", "run_deep"]

import logging
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import onnx_ir as ir

logger = logging.getLogger(__name__)

T = TypeVar("T")

_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS

#: Models whose nesting bound is at most this run in the calling thread.
SHALLOW = 24
#: Python frames allowed per level of nesting (measured: ~10 per If, ~14 per call).
_FRAMES_PER_LEVEL = 40
#: Thread stack per level of nesting, and the bounds of the thread's stack size.
_STACK_PER_LEVEL = 256 * 1024
_MIN_STACK, _MAX_STACK = 64 * 1024 * 1024, 1024 * 1024 * 1024
_lock = threading.Lock()  # the recursion limit is process-wide: one deep run at a time


def _graph_depth(graph: ir.Graph | ir.Function) -> int:
    """The deepest nesting of subgraphs in ``graph`` (0: none), computed without recursion."""
    deepest = 0
    stack: list[tuple[ir.Graph | ir.Function, int]] = [(graph, 0)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        for node in current:
            attributes = node.attributes.data
            if not attributes:
                continue
            for attr in attributes.values():
                if attr.type is _GRAPH:
                    stack.append((attr.value, depth + 1))
                elif attr.type is _GRAPHS:
                    stack.extend((sub, depth + 1) for sub in attr.value)
    return deepest


def nesting_bound(model: ir.Model) -> int:
    """An upper bound on the levels of recursion inferring ``model`` takes.

    The main graph's subgraph nesting plus, per model-local function, one call level
    and its own nesting (a chain of calls never goes through one function twice;
    recursive calls are refused when they are met).
    """
    bound = _graph_depth(model.graph)
    for function in model.functions.values():
        bound += 1 + _graph_depth(function)
    return bound


def run_deep(run: Callable[[], T], bound: int) -> T:
    """``run()``, given the stack that ``bound`` levels of nesting need.

    Args:
        run: The work (e.g. a pass's body).
        bound: :func:`nesting_bound` of the model it works on.

    Returns:
        What ``run`` returns; an exception it raises is raised here.
    """
    if bound <= SHALLOW:
        return run()
    frames = bound * _FRAMES_PER_LEVEL + 1000
    stack = min(max(bound * _STACK_PER_LEVEL, _MIN_STACK), _MAX_STACK)
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["value"] = run()
        except BaseException as e:  # handed to the calling thread, raised there
            outcome["error"] = e

    logger.debug(
        "nesting bound %d: running with %d frames, %d-byte stack", bound, frames, stack
    )
    with _lock:
        previous_limit = sys.getrecursionlimit()
        previous_stack = threading.stack_size()
        try:
            try:
                threading.stack_size(stack)
            except (ValueError, RuntimeError):  # a platform without sized stacks
                logger.debug("cannot size a thread stack: running in this thread")
            sys.setrecursionlimit(max(previous_limit, frames))
            worker = threading.Thread(target=work, name="onnx-symdims-deep", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous_stack)
        try:
            worker.join()
        finally:
            sys.setrecursionlimit(previous_limit)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
