"""Random ONNX graphs that compute shapes the way exporters do, valid by construction.

:func:`generate` builds a small graph (5-25 nodes, opset 18-21; 11, 13 or 17 for the seeds of
:data:`OLD_OPSETS_FROM` to :data:`WIDE_TO`) over 1-3 float inputs
whose dims are symbols (``N``, ``M``, ``K``), small ints, now and then an expression
(``N+1``, ``2*M``, ``N*K``) or an anonymous dim, together with three bindings of the
symbols (sizes 0..7, 0 and 1 included regularly) and the input data of each. Some
cases declare graph-output or intermediate (``value_info``) shapes with one fresh name
per dim (true of every run, so the anchor pass may use them), or pass
``nonempty_inputs``/``symbol_ranges``/``value_info_anchors`` to the engine.

Every node is proposed by a *builder* (``Shape → Gather → Concat → Reshape``,
``Slice`` with shape-derived ends, ``TopK`` with a shape-derived ``k``, ``Conv``, …) and
run at once with the ONNX reference evaluator on the three bindings. A builder whose
nodes fail in every still-valid binding is undone; one that fails in some is kept only
now and then (the graph is then valid for the other bindings only, which exercises the
engine on models that are not valid for every size). So the final graph runs, per the
reference evaluator, for at least one binding; onnxruntime is still the oracle and runs
where it rejects a binding are skipped by the checker.

The generator never emits what would crash onnxruntime instead of failing cleanly: an
integer ``Div``/``Mod`` by zero (a SIGFPE), an empty operand of a kernel in
:data:`CRASHES_ON_EMPTY`, or a huge allocation; :func:`simulate` checks the same for
the shrinker's candidates.
"""

from __future__ import annotations

from tests.fuzz._build_computed import ComputedBuilders
from tests.fuzz._build_float import FloatBuilders
from tests.fuzz._build_idioms import IdiomBuilders
from tests.fuzz._build_old import OldOpsetForms, SpecPoolWindows
from tests.fuzz._build_ranges import RangeBuilders
from tests.fuzz._build_shapes import ShapeBuilders
from tests.fuzz._build_wide import WideBuilders
from tests.fuzz._cases import (
    ANONYMOUS,
    CRASHES_ON_EMPTY,
    INT64_MAX,
    INT64_MIN,
    MAX_DATA_DIM,
    MAX_ELEMENTS,
    NUM_BINDINGS,
    SMALL_INT,
    SYMBOLS,
    FuzzCase,
    Shape,
    Simulation,
    dim_size,
    dim_symbols,
    hidden_symbol,
    input_shape,
    make_feed,
    outer_names,
    reference,
    simulate,
)
from tests.fuzz._generator import GeneratorCore

__all__ = [
    "ANONYMOUS",
    "CRASHES_ON_EMPTY",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_DATA_DIM",
    "MAX_ELEMENTS",
    "NUM_BINDINGS",
    "SMALL_INT",
    "SYMBOLS",
    "FuzzCase",
    "Shape",
    "Simulation",
    "dim_size",
    "dim_symbols",
    "generate",
    "hidden_symbol",
    "input_shape",
    "make_feed",
    "outer_names",
    "reference",
    "simulate",
]


class _Generator(GeneratorCore, ShapeBuilders, FloatBuilders, ComputedBuilders, IdiomBuilders):
    """Builds one graph; see the module docstring.

    The order of :attr:`BUILDERS` is part of the generator: with the weights it fixes which
    builder a seed picks, so a seed keeps naming the same graph.
    """

    BUILDERS: dict[str, int] = {
        "b_shape": 10,
        "b_size": 1,
        "b_gather_shape": 8,
        "b_slice": 8,
        "b_concat_ints": 6,
        "b_int_arith": 7,
        "b_range": 3,
        "b_cumsum_int": 1,
        "b_reduce_int": 2,
        "b_equal_where": 2,
        "b_cast_math": 1,
        "b_reshape_ints": 2,
        "b_zero_means_copy": 2,
        "b_reshape": 9,
        "b_constant_of_shape": 3,
        "b_expand": 4,
        "b_tile": 3,
        "b_topk": 2,
        "b_resize": 2,
        "b_pad": 3,
        "b_unary": 1,
        "b_binary": 4,
        "b_where": 2,
        "b_transpose": 3,
        "b_matmul": 4,
        "b_split": 3,
        "b_reduce": 3,
        "b_conv": 2,
        "b_pool": 3,
        "b_nonzero": 2,
        "b_compress": 2,
        "b_cumsum": 1,
        "b_einsum": 2,
        "b_flatten": 1,
        "b_gather": 2,
        "b_concat": 2,
        "b_unsqueeze": 3,
        "b_squeeze": 2,
        "b_mod_int": 2,
        "b_arg": 1,
        "b_onehot": 1,
        "b_unique": 1,
        "b_trilu": 1,
        "b_depth_space": 1,
        "b_gather_elements": 1,
        "b_gather_nd": 1,
        "b_variadic": 1,
        "b_gemm": 1,
        "b_normalize": 1,
        "b_conv_transpose": 2,
        "b_global_pool": 1,
        "b_center_crop_pad": 1,
        "p_pad_to_multiple": 2,
        "p_split_heads": 2,
        "p_position_ids": 2,
        "p_flatten_batch": 2,
        "p_slice_last": 3,
    }


#: Seeds from here also draw the idioms the optimizer's later rules rewrite (earlier
#: seeds keep naming the graphs they always named).
REWRITE_IDIOMS_FROM = 100_000

#: Builders added for seeds from :data:`REWRITE_IDIOMS_FROM`, with their weights.
REWRITE_IDIOMS: dict[str, int] = {
    "p_expand_into_broadcast": 3,
    "p_flat_index_grid": 2,
}


class _RewriteIdiomsGenerator(_Generator):
    BUILDERS = {**_Generator.BUILDERS, **REWRITE_IDIOMS}


#: Seeds from here also draw the masks of :mod:`onnx_symdims.rewrite._uniform`.
MASK_IDIOMS_FROM = 200_000
MASK_IDIOMS: dict[str, int] = {"p_arange_mask": 3}


class _MaskIdiomsGenerator(_Generator):
    BUILDERS = {**_Generator.BUILDERS, **REWRITE_IDIOMS, **MASK_IDIOMS}


#: Builders of the ranges mode (see :class:`_RangesGenerator`), with their weights.
RANGE_IDIOMS: dict[str, int] = {
    "p_static_mask_gather": 3,
    "p_static_flat_gather": 2,
    "p_reshape_ones": 2,
    "p_if_bound": 3,
    "p_loop_bound": 2,
}


class _RangesGenerator(_Generator, RangeBuilders):
    """Graphs for ``optimize(symbol_ranges=...)``: some symbols fixed (often at 1) or ranged.

    The ranges are drawn first (:attr:`symbol_ranges`, also in the case's options) and
    every binding keeps to them, so the graph is built (and valid) for those sizes only,
    as a model exported with a static batch is.
    """

    BUILDERS = {**_Generator.BUILDERS, **REWRITE_IDIOMS, **MASK_IDIOMS, **RANGE_IDIOMS}

    def _draw_bindings(self) -> list[dict[str, int]]:
        bindings = super()._draw_bindings()
        rng = self.rng
        self.symbol_ranges: dict[str, tuple[int | None, int | None]] = {}
        free = rng.random() < 0.25  # none: the subgraph bounds want symbolic sizes
        for symbol in SYMBOLS if not free else ():
            roll = rng.random()
            if roll < 0.45:  # a fixed size: mostly a batch of 1
                size = rng.choice((1, 1, 1, 1, 0, 2))
                self.symbol_ranges[symbol] = (size, size)
            elif roll < 0.7:
                lower = rng.choice((None, 0, 1, 1, 2))
                upper = rng.choice((None, None, 2, 3, 7))
                if lower is not None and upper is not None and upper < lower:
                    upper = lower
                self.symbol_ranges[symbol] = (lower, upper)
        for binding in bindings:
            for symbol, (lower, upper) in self.symbol_ranges.items():
                low, high = lower or 0, 7 if upper is None else upper
                if not low <= binding[symbol] <= high:
                    binding[symbol] = rng.randint(low, high)
        return bindings

    def _options(self) -> dict[str, object]:
        options: dict[str, object] = {"symbol_ranges": dict(self.symbol_ranges)}
        if self.value_info_anchors:
            options["value_info_anchors"] = True
        return options


#: Seeds from here (to :data:`AUDIT_IDIOMS_TO`) also draw integer math onnxruntime does
#: not compute exactly (an int64 ``Pow`` beyond ``2**53``, int32/int8 products that wrap).
#: A window, not a start: the engine's differential test draws seeds up to ``2**31`` and
#: keeps the graphs it always drew (the engine's exact int32 and int64 powers are open).
AUDIT_IDIOMS_FROM = 600_000
AUDIT_IDIOMS_TO = 700_000
AUDIT_IDIOMS: dict[str, int] = {"p_wide_integers": 6}


class _AuditIdiomsGenerator(_Generator):
    BUILDERS = {**_Generator.BUILDERS, **REWRITE_IDIOMS, **MASK_IDIOMS, **AUDIT_IDIOMS}


#: Seeds from here to :data:`WIDE_TO` draw the graphs of :mod:`tests.fuzz._build_wide`
#: (int tables, int64 wrap, Loop/Scan/If with declared body shapes); from
#: :data:`OLD_OPSETS_FROM` on, at opsets 11, 13 and 17 (:mod:`tests.fuzz._build_old`).
WIDE_FROM = 800_000
OLD_OPSETS_FROM = 850_000
WIDE_TO = 900_000
WIDE_IDIOMS: dict[str, int] = {
    "p_torch_pad_table": 3,
    "p_int_table": 4,
    "p_int_wrap": 4,
    "p_loop_carried": 3,
    "p_scan": 2,
    "p_if_ranks": 3,
}
OLD_OPSET_IDIOMS: dict[str, int] = {"b_clip": 2, "b_ceil_pool": 3}


class _WideGenerator(SpecPoolWindows, _Generator, RangeBuilders, WideBuilders):
    BUILDERS = {**_Generator.BUILDERS, **REWRITE_IDIOMS, **MASK_IDIOMS, **WIDE_IDIOMS}


class _OldOpsetGenerator(OldOpsetForms, _WideGenerator):
    BUILDERS = {**_WideGenerator.BUILDERS, **OLD_OPSET_IDIOMS}


class _WideRangesGenerator(SpecPoolWindows, _RangesGenerator, WideBuilders):
    BUILDERS = {**_RangesGenerator.BUILDERS, **WIDE_IDIOMS}


class _OldOpsetRangesGenerator(OldOpsetForms, _WideRangesGenerator):
    BUILDERS = {**_WideRangesGenerator.BUILDERS, **OLD_OPSET_IDIOMS}


#: Seeds from here to :data:`ZERO_TRIPS_TO` draw the wide graphs with more loops, and
#: loops that may run no iteration get scan outputs too (the earlier seeds never drew
#: them: their dims past the first are onnxruntime's choice when no iteration runs).
ZERO_TRIPS_FROM = 900_000
ZERO_TRIPS_TO = 950_000


class _ZeroTripGenerator(_WideGenerator):
    BUILDERS = {**_WideGenerator.BUILDERS, "p_loop_carried": 8, "p_scan": 3}
    ZERO_TRIP_SCANS = True


class _ZeroTripRangesGenerator(_WideRangesGenerator):
    BUILDERS = {**_WideRangesGenerator.BUILDERS, "p_loop_carried": 8, "p_scan": 3}
    ZERO_TRIP_SCANS = True


def generate(seed: int, ranges: bool = False) -> FuzzCase:
    """A random graph with its bindings and input data, determined by ``seed``.

    With ``ranges``, another graph for the seed, drawn by :class:`_RangesGenerator`.
    """
    if ZERO_TRIPS_FROM <= seed < ZERO_TRIPS_TO:
        return (_ZeroTripRangesGenerator if ranges else _ZeroTripGenerator)(seed).generate()
    if WIDE_FROM <= seed < WIDE_TO:
        if ranges:
            old = seed >= OLD_OPSETS_FROM
            return (_OldOpsetRangesGenerator if old else _WideRangesGenerator)(seed).generate()
        old = seed >= OLD_OPSETS_FROM
        return (_OldOpsetGenerator if old else _WideGenerator)(seed).generate()
    if ranges:
        return _RangesGenerator(seed).generate()
    if AUDIT_IDIOMS_FROM <= seed < AUDIT_IDIOMS_TO:
        return _AuditIdiomsGenerator(seed).generate()
    if seed >= MASK_IDIOMS_FROM:
        return _MaskIdiomsGenerator(seed).generate()
    if seed >= REWRITE_IDIOMS_FROM:
        return _RewriteIdiomsGenerator(seed).generate()
    return _Generator(seed).generate()
