"""Dims compiled to Python functions, to evaluate one dim at many points.

:meth:`DimExpr.evaluate` walks the expression per call (a few microseconds for a dim of
nested ``min``/``max``); a search over points (the anchors' separating point, a monotone
symbol's bound) evaluates the same dim hundreds of times. :func:`evaluator` generates one
function per (dim, names): each distinct atom is computed once into a local (hash-consed
atoms repeat), with the same integer semantics as ``evaluate`` (floor ``//`` and ``%``,
an exact division that raises when it does not divide, a broadcast that raises when the
sizes disagree). The functions are kept in a bounded table.

Example::

    >>> from onnx_symdims import expr
    >>> d = expr.parse_dim("min(seq + 3, 8) // 2")
    >>> f = expr.evaluator(d, ("seq",))
    >>> [f(s) for s in (0, 1, 9)]
    [1, 2, 4]
"""

from __future__ import annotations

from collections.abc import Callable

from onnx_symdims.expr._atoms import (
    BCAST,
    EXACT,
    FLOOR,
    MAX,
    MIN,
    MOD,
    SYM,
    Atom,
    ExprError,
    InexactDivisionError,
)
from onnx_symdims.expr._dimexpr import Dim, _evaluate_broadcast

#: Compiled functions kept; the table is emptied when full (every entry is rebuilt the same).
_MAX_COMPILED = 4096
_compiled: dict[tuple[Dim, tuple[str, ...]], Callable[..., int]] = {}


def evaluator(d: Dim, names: tuple[str, ...]) -> Callable[..., int]:
    """A function of the values of ``names`` (positional, in that order) giving ``d``.

    It raises what :meth:`DimExpr.evaluate` raises (``KeyError`` for a symbol not in
    ``names``, ``InexactDivisionError``, ``BroadcastError``, ``ZeroDivisionError``,
    ``ExprError`` for an unknown); where several apply at one point, any one of them.
    """
    key = (d, names)
    found = _compiled.get(key)
    if found is None:
        found = _compile(d, names)
        if len(_compiled) >= _MAX_COMPILED:
            _compiled.clear()
        _compiled[key] = found
    return found


def _exact(num: int, den: int) -> int:
    if den == 0:
        raise ZeroDivisionError("exact division by zero")
    if num % den:
        raise InexactDivisionError(f"{num} /: {den} is not exact")
    return num // den


def _fail(error: Exception) -> int:
    raise error


def _compile(d: Dim, names: tuple[str, ...]) -> Callable[..., int]:
    params = [f"p{i}" for i in range(len(names))]
    if isinstance(d, int):
        return eval(f"lambda {', '.join(params)}: {d}")
    if d.unknown_reason is not None:
        error = ExprError(f"cannot evaluate an unknown ({d.unknown_reason})")
        return lambda *_: _fail(error)
    lines: list[str] = []
    local: dict[Atom, str] = {}
    param = dict(zip(names, params))
    env = {"_exact": _exact, "_bcast": _evaluate_broadcast, "_fail": _fail}

    def dim_code(value: Dim) -> str:
        if isinstance(value, int):
            return f"({value})"
        if value.unknown_reason is not None:
            return atom_failure(
                ExprError(f"cannot evaluate an unknown ({value.unknown_reason})")
            )
        parts = [str(value.const)] if value.const else []
        for mono, coeff in value.terms:
            factors = [atom_code(atom) for atom in mono]
            parts.append("*".join(factors if coeff == 1 else [f"({coeff})", *factors]))
        return "(" + " + ".join(parts or ["0"]) + ")"

    def atom_failure(error: Exception) -> str:
        name = f"_e{len(env)}"
        env[name] = error
        return f"_fail({name})"

    def atom_code(atom: Atom) -> str:
        found = local.get(atom)
        if found is not None:
            return found
        kind = atom.kind
        if kind == SYM:
            if atom.name not in param:
                return atom_failure(KeyError(atom.name))
            return param[atom.name]
        args = [dim_code(arg) for arg in atom.args]
        if kind == FLOOR:
            code = f"{args[0]} // {args[1]}"
        elif kind == MOD:
            code = f"{args[0]} % {args[1]}"
        elif kind == EXACT:
            code = f"_exact({args[0]}, {args[1]})"
        elif kind in (MAX, MIN):
            joined = ", ".join(args) if len(args) > 1 else f"({args[0]},)"
            code = f"{'max' if kind == MAX else 'min'}({joined})"
        elif kind == BCAST:
            code = f"_bcast([{', '.join(args)}])"
        else:
            code = atom_failure(ExprError(f"cannot evaluate unknown function {atom.name!r}"))
        name = local[atom] = f"a{len(local)}"
        lines.append(f"    {name} = {code}")
        return name

    result = dim_code(d)
    source = "\n".join([f"def f({', '.join(params)}):", *lines, f"    return {result}"])
    exec(source, env)
    return env["f"]  # type: ignore[return-value]
