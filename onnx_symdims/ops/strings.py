"""String ops whose output size depends on the text: ``StringNormalizer``, ``StringSplit``.

``StringNormalizer`` drops stop words (at least one element stays): the count is exact
without stop words or for a known input, else a bounded fresh symbol.

``StringSplit`` gives ``[*X, n]`` substrings (padded with empty strings) and their
counts ``[*X]``; ``n``, the largest count, is computed for a small constant ``X``
wherever onnxruntime and the ONNX reference agree, and is a fresh symbol otherwise:

* an empty string has no substring for onnxruntime but one (``""``) for the
  reference, so it decides nothing (another element does);
* without a delimiter onnxruntime splits at spaces only, the reference at any
  whitespace: text with tabs, newlines or other whitespace (or non-ASCII) is not
  counted.
"""

from __future__ import annotations

__all__: list[str] = []

import logging
import math
from collections.abc import Sequence

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.ops._common import (
    count_symbol,
    string_elements,
)
from onnx_symdims.ops._registry import register
from onnx_symdims.shapes import (
    NodeContext,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]
INT64 = ir.DataType.INT64

#: Locales whose lower case of ASCII text is plain ASCII lower case.
_PLAIN_LOCALES = frozenset({"", "C", "C.UTF-8", "C.utf8", "POSIX"})
#: Characters that are whitespace for Python (the ONNX reference) but no separator for
#: onnxruntime, which splits at ``" "`` only.
_OTHER_WHITESPACE = frozenset(b"\t\n\v\f\r\x1c\x1d\x1e\x1f")


def _split_count(text: bytes, delimiter: bytes, maxsplit: int) -> int | None:
    """The number of substrings of ``text`` (``None``: the runtimes disagree)."""
    if not text:
        return None
    if delimiter:
        return len(text.split(delimiter, maxsplit))
    if not text.isascii() or any(c in _OTHER_WHITESPACE for c in text):
        return None
    return len(text.split(None, maxsplit))


def _max_split_count(ctx: NodeContext, x: tuple[Dim, ...]) -> Dim | None:
    """The largest substring count of a constant input (``None``: unknown)."""
    if all(isinstance(d, int) for d in x) and math.prod(x) == 0:  # type: ignore[arg-type]
        return 0
    elements = string_elements(ctx.input(0))
    if elements is None or not elements:
        return None
    maxsplit = ctx.attr_int("maxsplit", -1)
    if maxsplit < -1:
        return None
    delimiter = (ctx.attr_str("delimiter", "") or "").encode()
    counts = [_split_count(e, delimiter, maxsplit) for e in elements]
    known = [c for c in counts if c is not None]
    undecided = any(c is None and e for c, e in zip(counts, elements))
    if not known or undecided:
        return None  # an empty string counts 0 or 1: only another element decides
    return max(known)


@register("", "StringSplit", since=20)
def infer_string_split(ctx: NodeContext, node: ir.Node) -> None:
    """``Y``: ``[*X, n]`` strings; ``Z``: ``[*X]`` INT64 counts."""
    ctx.require_input(0)
    x = ctx.input_shape(0)
    if x is None:
        ctx.set_output(0, None, ir.DataType.STRING)
        ctx.set_output(1, None, ir.DataType.INT64)
        return
    ctx.set_output(0, (*x, _max_split_count(ctx, x)), ir.DataType.STRING)
    ctx.set_output(1, x, ir.DataType.INT64)


def _stopwords(ctx: NodeContext) -> list[str]:
    """The ``stopwords`` attribute (a list of strings; absent: none)."""
    attr = ctx.node.attributes.get("stopwords")
    if attr is None:
        return []
    if attr.type != ir.AttributeType.STRINGS:
        ctx.fail(f"attribute 'stopwords' must be STRINGS, got {attr.type.name}")
    return list(attr.value)


def _kept_strings(ctx: NodeContext, elements: Sequence[bytes]) -> int | None:
    """How many ``elements`` are no stop word (``None`` when that depends on the locale).

    A case-insensitive match is decided only for ASCII text in a locale without special
    case rules for it (the Turkish dotless i is one).
    """
    stopwords = [w.encode() for w in _stopwords(ctx)]
    if ctx.attr_int("is_case_sensitive", 0):
        stops = set(stopwords)
        return sum(1 for e in elements if e not in stops)
    locale = ctx.attr_str("locale", "en_US.UTF-8") or ""
    if not (locale in _PLAIN_LOCALES or locale.startswith("en_")):
        return None
    if not all(w.isascii() for w in (*elements, *stopwords)):
        return None
    stops = {w.lower() for w in stopwords}
    return sum(1 for e in elements if e.lower() not in stops)


@register("", "StringNormalizer", since=10)
def infer_string_normalizer(ctx: NodeContext, node: ir.Node) -> None:
    """``[C]`` or ``[1, C]`` strings without the stop words (at least one element left).

    onnxruntime rejects ``C == 0`` and returns one empty string when every element is a
    stop word. The count is exact without stop words or for a known input, else a fresh
    symbol ``1 <= count <= C``.
    """
    ctx.require_input(0)
    x = ctx.input_shape(0)
    dtype = ir.DataType.STRING
    if x is None:
        ctx.set_output(0, None, dtype)
        return
    if len(x) not in (1, 2):
        ctx.fail(f"X must be [C] or [1, C], got rank {len(x)}")
    if len(x) == 2 and isinstance(x[0], int) and x[0] != 1:
        ctx.fail(f"X must be [C] or [1, C], got {x[0]} rows")
    c = x[-1]
    if c == 0:
        ctx.fail("X must hold at least one string")
    count: Dim
    if not _stopwords(ctx):
        count = c
    else:
        elements = string_elements(ctx.input(0))
        kept = None if elements is None else _kept_strings(ctx, elements)
        if kept is not None:
            count = max(kept, 1)
        elif c == 1:
            count = 1
        else:
            count = count_symbol(ctx, "count", c)
            ctx.ctx.add_less_equal_constraint(1, count)
    ctx.set_output(0, (count,) if len(x) == 1 else (1, count), dtype)
