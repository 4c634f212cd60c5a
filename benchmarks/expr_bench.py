"""Dimension arithmetic typical of shape inference: our string API vs onnx_ir.SymbolicDim.

The same workload runs, in the same process, through

* ``onnx_symdims.expr`` string API (``dim_add``/``dim_mul``/``dim_div``/``dim_exact_div``/
  ``dim_max`` on ``str`` operands, then ``simplify_expression`` of every result: parse + print);
* ``onnx_ir.SymbolicDim`` arithmetic (SymPy-backed): ``+ - * // /``, ``Max`` (no public max),
  then ``SymbolicDim(text)`` re-parsed and printed (``.value``).

One "layer" does what shape inference does for an attention block, a reshape, a conv and a
pool on symbolic dims (10 results). Two scenarios:

* ``model``: 20 layers sharing the dim names (batch, seq, past, ...), like the repeated blocks
  of a real transformer: from layer 2 on, caches hit on both sides;
* ``distinct``: every layer has its own names, so nothing repeats within a pass (worst case
  for every cache).

Caches matter on both sides, so both states are reported:

* ours *cold*: the parse memo and the ``dim_*`` memo (``clear_caches``) are emptied before
  every repetition (the hash-consing tables of ``DimExpr`` are the data structure itself and
  are kept); ours *warm*: the memos are kept across repetitions.
* onnx-ir *cold*: ``sympy.core.cache.clear_cache()`` before every repetition; *warm*: kept.

The headline ratio is the conservative one for us: onnx-ir warm / ours cold, ``model``.

Run: ``python benchmarks/expr_bench.py [--layers 20] [--reps 15]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import onnx_ir as ir
import sympy

from onnx_symdims.expr._seed_api import (
    clear_caches,
    dim_add,
    dim_div,
    dim_exact_div,
    dim_max,
    dim_mul,
    dim_sub,
    simplify_expression,
)


def ours_layer(i: int | str) -> list[object]:
    batch, seq, past = f"batch{i}", f"seq{i}", f"past{i}"
    heads, height, width = f"heads{i}", f"H{i}", f"W{i}"
    total = dim_add(past, seq)  # KV-cache concat
    hidden = dim_mul(heads, 64)
    numel = dim_mul(dim_mul(batch, total), hidden)  # Reshape input numel
    rest = dim_exact_div(numel, dim_mul(batch, heads))  # Reshape -1: exact division
    head_dim = dim_exact_div(rest, total)  # -> 64
    conv_h = dim_add(dim_div(dim_sub(dim_add(height, 2), 3), 2), 1)  # Conv k=3 s=2 p=1
    conv_w = dim_add(dim_div(dim_sub(dim_add(width, 2), 3), 2), 1)
    pool = dim_div(dim_add(seq, 7), 8)  # ceil-mode pooling
    longest = dim_max(conv_h, conv_w)  # If-merge / broadcast bound
    flat = dim_mul(dim_mul(conv_h, conv_w), 16)  # Flatten
    results = [total, hidden, numel, rest, head_dim, conv_h, conv_w, pool, longest, flat]
    # parse + print of every result, as when writing and re-reading dim_params
    return [simplify_expression(r) if isinstance(r, str) else r for r in results]


def _sd(text: str) -> ir.SymbolicDim:
    return ir.SymbolicDim(text)


def _max(a: ir.SymbolicDim, b: ir.SymbolicDim) -> ir.SymbolicDim:
    return ir.SymbolicDim(sympy.Max(a._expr, b._expr))  # no public max


def onnx_ir_layer(i: int | str) -> list[object]:
    batch, seq, past = _sd(f"batch{i}"), _sd(f"seq{i}"), _sd(f"past{i}")
    heads, height, width = _sd(f"heads{i}"), _sd(f"H{i}"), _sd(f"W{i}")
    total = past + seq
    hidden = heads * 64
    numel = batch * total * hidden
    rest = numel / (batch * heads)
    head_dim = rest / total
    conv_h = (height + 2 - 3) // 2 + 1
    conv_w = (width + 2 - 3) // 2 + 1
    pool = (seq + 7) // 8
    longest = _max(conv_h, conv_w)
    flat = conv_h * conv_w * 16
    results = [total, hidden, numel, rest, head_dim, conv_h, conv_w, pool, longest, flat]
    out: list[object] = []
    for r in results:
        if isinstance(r, int):
            out.append(r)
            continue
        reparsed = ir.SymbolicDim(r.value) + 0  # parse the printed text back
        out.append(reparsed.value)
    return out


def _time(workload, layer_ids, reps: int, before: Callable[[], object]) -> float:
    samples = []
    for _ in range(reps):
        before()
        start = time.perf_counter()
        for i in layer_ids:
            workload(i)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _nothing() -> None:
    pass


def _scenario(name: str, layer_ids: list, reps: int) -> float:
    ir_reps = max(3, reps // 3)
    timings = [
        ("onnx_symdims cold", _time(ours_layer, layer_ids, reps, clear_caches)),
        ("onnx_symdims warm", _time(ours_layer, layer_ids, reps, _nothing)),
        (
            "onnx_ir cold",
            _time(onnx_ir_layer, layer_ids, ir_reps, sympy.core.cache.clear_cache),
        ),
        ("onnx_ir warm", _time(onnx_ir_layer, layer_ids, ir_reps, _nothing)),
    ]
    results = len(layer_ids) * 10
    print(f"\nscenario {name!r}: {len(layer_ids)} layers x 10 results, median of reps")
    print(f"{'':22s}{'median [ms]':>12s}{'us/result':>12s}")
    for label, t in timings:
        print(f"{label:22s}{t * 1e3:12.2f}{t * 1e6 / results:12.1f}")
    t = dict(timings)
    headline = t["onnx_ir warm"] / t["onnx_symdims cold"]
    print(f"ratio onnx_ir warm / ours cold: {headline:8.1f}x")
    print(
        f"ratio onnx_ir cold / ours cold: {t['onnx_ir cold'] / t['onnx_symdims cold']:8.1f}x"
    )
    print(
        f"ratio onnx_ir warm / ours warm: {t['onnx_ir warm'] / t['onnx_symdims warm']:8.1f}x"
    )
    return headline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()

    print("one layer, ours:   ", ours_layer(0))
    print("one layer, onnx-ir:", onnx_ir_layer(0))
    headline = _scenario("model", [""] * args.layers, args.reps)
    _scenario("distinct", list(range(args.layers)), args.reps)
    print(f"\nheadline (model, onnx_ir warm / ours cold): {headline:.1f}x")


if __name__ == "__main__":
    main()
