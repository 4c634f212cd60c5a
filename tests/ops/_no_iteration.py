"""The form a scan-output dim takes when its loop may run no iteration."""

from __future__ import annotations

from onnx_symdims import expr


def runtime_choice_without_iterations(result, dim, per_iteration, count) -> bool:
    """``dim == d*r + e*(1-r)``, ``r = min(1, count)``, ``e`` a symbol the engine minted.

    ``d`` when an iteration runs, the runtime's choice (``e``) when none does
    (``ops/control_flow._scan_output_shape``).
    """
    known = set()
    for d in (per_iteration, count):
        if isinstance(d, expr.DimExpr):
            known |= d.symbols()
    if not isinstance(dim, expr.DimExpr):
        return False
    fresh = [name for name in dim.symbols() - known if result.context.is_generated(name)]
    if len(fresh) != 1:
        return False
    ran = expr.dmin(count, 1)
    chosen = expr.sym(fresh[0])
    return dim == expr.add(expr.mul(per_iteration, ran), expr.mul(chosen, expr.sub(1, ran)))
