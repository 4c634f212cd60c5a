"""Structure-preserving renaming of raw expression trees (the seed's ``rename_*`` contract).

A rename replaces the *leaves* of the parse tree and keeps everything else as written:
order, structure, no re-simplification. The only rewrites are the seed dialect's
spelling of calls (``Max(a, b)`` -> ``a^b``, ``Min(a, b)`` -> ``a&b``) and, for the best-
effort variant, the origin's collapse of ``broadcast(x, x)`` to ``x``.

Example::

    >>> from onnx_symdims.expr._parse import parse_tree, unparse
    >>> unparse(rename_tree(parse_tree("a-b"), {"a": parse_tree("b"), "b": parse_tree("a")}))
    'b-a'
"""

from __future__ import annotations

from collections.abc import Mapping

from onnx_symdims.expr._parse import BinOp, Call, Constant, Name, Node, UnaryOp, unparse

__all__ = ["collapse_broadcasts", "rename_tree", "tree_constant"]

_EXTREMA = {"Max": "^", "max": "^", "Min": "&", "min": "&"}


def rename_tree(node: Node, mapping: Mapping[str, Node]) -> Node:
    """Replaces every ``Name`` found in ``mapping`` (simultaneously, never chained).

    ``Max``/``max``/``Min``/``min`` calls with at least one argument become ``^``/``&``
    chains (left-associative, in the written order). Parse trees are at most
    ``MAX_TREE_DEPTH`` deep, so the recursion is bounded.
    """
    if isinstance(node, Name):
        return mapping.get(node.id, node)
    if isinstance(node, Constant):
        return node
    if isinstance(node, BinOp):
        return BinOp(
            node.op, rename_tree(node.left, mapping), rename_tree(node.right, mapping)
        )
    if isinstance(node, UnaryOp):
        return UnaryOp(node.op, rename_tree(node.operand, mapping))
    if isinstance(node, Call):
        args = tuple(rename_tree(a, mapping) for a in node.args)
        op = _EXTREMA.get(node.func)
        if op is not None and args:
            result = args[0]
            for a in args[1:]:
                result = BinOp(op, result, a)
            return result
        return Call(node.func, args)
    raise TypeError(f"Not an expression tree node: {node!r}")


def collapse_broadcasts(node: Node) -> Node:
    """``broadcast(x, x, ...)`` -> ``x`` when every argument prints the same (the origin's rule)."""
    if isinstance(node, BinOp):
        return BinOp(node.op, collapse_broadcasts(node.left), collapse_broadcasts(node.right))
    if isinstance(node, UnaryOp):
        return UnaryOp(node.op, collapse_broadcasts(node.operand))
    if isinstance(node, Call):
        args = tuple(collapse_broadcasts(a) for a in node.args)
        if node.func == "broadcast" and args and len({unparse(a) for a in args}) == 1:
            return args[0]
        return Call(node.func, args)
    return node


def tree_constant(node: Node) -> int | None:
    """The value of a tree that is an integer literal (``3``, ``-3``), else None."""
    if isinstance(node, Constant):
        return node.value
    if isinstance(node, UnaryOp) and isinstance(node.operand, Constant):
        return -node.operand.value if node.op == "-" else node.operand.value
    return None
