"""``ShapesContext``: everything shape inference knows about one model.

The context owns

* the assumption :class:`~onnx_symdims.expr.Scope` (every symbol is a tensor dim,
  hence ``>= 0``; data-dependent dims get upper bounds),
* deterministic minting of fresh symbols that never collide with a name the model uses,
* the reading of the model's ``dim_param`` text (:meth:`ShapesContext.read_dim_text`:
  text that is not an expression becomes a symbol with a readable name),
* the constraint stores (equalities ``a == b`` and upper bounds ``lhs <= rhs``),
* the side tables: the shape, dtype and "value as shape" (the symbolic elements of a
  small integer tensor, e.g. the output of ``Shape``) of every ``ir.Value``,
* the diagnostics.

Side tables are keyed by ``ir.Value`` (identity hashing); the query methods also accept
a value name. A stored shape is a tuple of dims, each an ``int`` or a non-unknown
``DimExpr`` (an unknown dim is stored as a fresh symbol, never ``None``); a stored shape of
``None`` means "rank unknown".
"""

from __future__ import annotations

__all__ = [
    "ANONYMOUS_DIM_TEXTS",
    "INTEGER_DTYPES",
    "MAX_VALUE_ELEMENTS",
    "MISSING",
    "ShapesContext",
    "constant_tensor",
    "int_elements",
    "is_anonymous_dim_text",
    "is_tool_minted_dim_text",
    "note_untracked_read",
    "read_int64_proto",
    "sanitize_symbol_name",
    "tensor_dims",
    "untracked_reads",
]

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import NoReturn

import onnx_ir as ir

from onnx_symdims import expr
from onnx_symdims.shapes._diagnostics import Diagnostic, Severity, ShapeInferenceError
from onnx_symdims.shapes._facts import FactScope, refine_dim

# The public names are re-exported (hooks import them from here); the private ones are
# for read_declared_shape's inline reads.
from onnx_symdims.shapes._tensors import (
    _PROTO_SLOT,
    _PROTO_TENSOR,
    _UNTRACKED_READS,
    _VALUE_SLOTS,
    CONSTANT_INPUT_KEY,
    INTEGER_DTYPES,
    MAX_VALUE_ELEMENTS,
    constant_tensor,
    int_elements,
    note_untracked_read,
    read_int64_proto,
    tensor_dims,
    untracked_reads,
)

logger = logging.getLogger(__name__)

Dim = expr.Dim
Shape = tuple[Dim, ...]

# Function names of the expression printers/parsers: a symbol must never be spelled
# like one of them, or the written dim_param would re-parse as a call.
_RESERVED_WORDS = frozenset(
    {
        "max", "min", "Max", "Min", "floor", "ceil", "ceiling", "mod", "Mod", "sqrt",
        "broadcast", "abs", "Abs", "FloorDiv", "CeilDiv", "CleanDiv", "CeilToInt",
        "PythonMod", "IntTrueDiv", "ModularIndexing", "Piecewise", "trunc", "TruncToInt",
    }
)  # fmt: skip

_NON_IDENT = re.compile(r"[^A-Za-z0-9_]+")
#: A name the expression grammar reads back as itself (``parse_expr``'s name token).
_READABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_UNDERSCORES = re.compile(r"__+")


#: Marks an absent table entry in :meth:`ShapesContext.facts_of`.
MISSING = object()


class _NoEntries(dict):
    """An empty dict that refuses entries: see :data:`_NO_ENTRIES`.

    A dict (not a ``MappingProxyType``, whose ``get`` calls the mapping's method by
    name): reads are the dict's own C methods, as fast as on the table made later.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a ShapesContext table must be made before its first entry")

    __setitem__ = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]


#: What a table most models never write to holds until its first entry: an empty dict
#: shared by every context (one is made on every call; an empty dict made and freed
#: costs more than storing this). Writing to it raises, so a write that forgets to make
#: the table first fails loudly instead of sharing entries between contexts.
_NO_ENTRIES: dict = _NoEntries()
#: Likewise for the names minted (``new_symbol``) and the open subgraphs.
_NO_NAMES: frozenset[str] = frozenset()
_NO_SUBGRAPHS: tuple[int, ...] = ()


#: ``dim_param`` spellings that tools write for "unknown": they name no dim, so two of
#: them are never the same dim (treating them as one symbol would equate unrelated dims).
ANONYMOUS_DIM_TEXTS = frozenset({"?", "*"})


def is_anonymous_dim_text(text: str) -> bool:
    """True for a ``dim_param`` that only says "unknown" (``?``, ``*``)."""
    return text.strip() in ANONYMOUS_DIM_TEXTS


#: The names tools mint for a size they do not know, on values they annotate: ONNX's
#: ``unk__N`` and onnxruntime's symbolic shape inference's ``{op}{scope}_{node}_o{out}__d
#: {axis}`` (``Flatten_35_o0__d0``, ``Reshape_1_12_o0__d1`` in a subgraph).
_MINTED_BY_TOOLS = re.compile(r"unk__\d+|[A-Za-z][A-Za-z0-9]*(?:_\d+)*_\d+_o\d+__d\d+")


def is_tool_minted_dim_text(text: str) -> bool:
    """True for a name another tool minted for an unknown size (``unk__3``).

    On a value no author declared (not a graph input or output), such a name declares
    nothing: the tool knew no more than that the size is some size.

    Example::

        >>> is_tool_minted_dim_text("Flatten_35_o0__d0"), is_tool_minted_dim_text("unk__7")
        (True, True)
        >>> is_tool_minted_dim_text("seq_len"), is_tool_minted_dim_text("Flatten_o0_d0")
        (False, False)
    """
    return text.startswith("unk__") or _MINTED_BY_TOOLS.fullmatch(text) is not None


def sanitize_symbol_name(hint: str) -> str:
    """Turns ``hint`` into an identifier ``[A-Za-z_][A-Za-z0-9_]*`` (``"d"`` if empty).

    Example::

        >>> sanitize_symbol_name("/model/layers.0/Reshape_3")
        'model_layers_0_Reshape_3'
        >>> sanitize_symbol_name("2d")
        'd2d'
    """
    found = _SANITIZED.get(hint)
    if found is None:
        name = _UNDERSCORES.sub("_", _NON_IDENT.sub("_", hint)).strip("_")
        if not name:
            name = "d"
        elif name[0].isdigit():
            name = "d" + name
        if len(_SANITIZED) > 100_000:
            _SANITIZED.clear()
        found = _SANITIZED[hint] = name
    return found


#: hint -> sanitize_symbol_name(hint): two regular expressions per fresh symbol, for the
#: same hints (value and node names) in every inference of a model.
_SANITIZED: dict[str, str] = {}


#: dim text -> (the text and the symbol names in it, whether it is opaque), see
#: _text_names: a function of the text, shared by every context of the process.
_TEXT_NAMES: dict[str, tuple[frozenset[str], bool]] = {}


def _text_names(text: str) -> tuple[frozenset[str], bool]:
    """The names a model's dim ``text`` reserves, and whether it is opaque.

    The names: the text and the symbols of its parse. Opaque: not anonymous (``?``) and
    read as one symbol whose name the grammar would not read back
    (:meth:`ShapesContext.read_dim_text` gives it a readable name).
    """
    found = _TEXT_NAMES.get(text)
    if found is None:
        parsed = expr.parse_dim(text)
        names = {text}
        opaque = False
        if _is_numeric_name(parsed):
            opaque = True
        elif isinstance(parsed, expr.DimExpr):
            names.update(parsed.symbols())
            opaque = (
                parsed.is_symbol
                and not is_anonymous_dim_text(text)
                and not _READABLE_NAME.fullmatch(parsed.name)  # type: ignore[arg-type]
            )
        if len(_TEXT_NAMES) > 100_000:
            _TEXT_NAMES.clear()
        found = _TEXT_NAMES[text] = (frozenset(names), opaque)
    return found


def _is_numeric_name(parsed: Dim) -> bool:
    """Whether a ``dim_param`` text parsed to a size (``4``, ``0``, `` 4``, ``2*3``).

    ONNX's ``dim_param`` is a name: onnxruntime runs any size for an input declared
    ``'4'``. Such a text is read as an opaque symbol (``d4``, a name that does not read
    back as an int) as any odd text is. A negative one stays a number: producers'
    "unknown" (``-1``), which declares nothing.
    """
    return isinstance(parsed, int) and parsed >= 0


#: A model's dim texts -> (the names they reserve, the opaque ones in byte order), see
#: ShapesContext.reserve_model_texts: a function of the texts, and every run over a model
#: (or over models of one family) has the same texts. One set lookup instead of a loop
#: over them; a model with more texts than _MODEL_TEXTS_MAX_TEXTS is not kept.
_MODEL_TEXTS: dict[frozenset[str], tuple[frozenset[str], tuple[str, ...]]] = {}
_MODEL_TEXTS_MAX = 256
_MODEL_TEXTS_MAX_TEXTS = 10_000


#: dim text -> its dim, for the texts that are not opaque (their dim is their parse,
#: whatever the context: see ShapesContext.read_dim_text).
_PARSED_TEXTS: dict[str, Dim] = {}


#: dim text -> the dim :meth:`ShapesContext.dims_from_ir` reads it as, for the texts that
#: read the same in every context: not empty, not anonymous, not opaque (in
#: _PARSED_TEXTS), and a dim (an int >= 0 or a known expression; ``-1`` is none).
_DECLARED_DIMS: dict[str, Dim] = {}
_SYMBOLIC_DIM = ir.SymbolicDim


def _is_bare_symbol(d: Dim) -> bool:
    return isinstance(d, expr.DimExpr) and d.is_symbol


#: Entries of a scope's memo the context adds (refined shapes, Reshape dims) before it
#: starts over.
_MAX_MEMO_UNDER_FACTS = 50_000


def _memo_under_facts(scope: expr.Scope, key: tuple, result: object) -> None:
    """Keeps ``result``, a pure function of ``key`` and the scope's facts, with the scope.

    The scope's memo moves to another table when a fact is added, and is shared by every
    scope holding the same facts (see ``expr.Scope._use_memos``): the next inference of
    the model finds what this one computed, where a memo of the context would start empty.
    """
    memo = scope._scoped_memo
    if len(memo) >= _MAX_MEMO_UNDER_FACTS:
        memo.clear()
    memo[key] = result


class ShapesContext:
    """Shape facts, constraints, fresh symbols and diagnostics for one model.

    Args:
        scope: Assumptions for the symbols; defaults to a fresh
            ``FactScope(nonnegative=True)`` (every symbol is a tensor dim). A plain
            ``Scope`` still works; facts about expressions (see :meth:`note_nonneg`)
            are then dropped, except ranges of bare symbols.

    Attributes:
        scope: The assumption scope used for proofs (``dmax``/``dmin``, comparisons).
        strict: When True, recording an ``error`` diagnostic raises
            :class:`ShapeInferenceError` (set by the pass's ``strict`` option).
        diagnostics: Diagnostics in the order they were recorded.
    """

    def __init__(self, scope: expr.Scope | None = None) -> None:
        # (FactScope's argument passed by position: a keyword costs ~6 % of this.)
        self.scope = scope if scope is not None else FactScope(True)
        self.strict = False
        #: > 0 while a subgraph (If branch, Loop/Scan body) is inferred. Code there may
        #: not run, so what it proves is not a fact about the model: equalities are not
        #: recorded at that depth.
        self.conditional_depth = 0
        # Ids of the subgraph inferences open (innermost last; enter_subgraph) and, for
        # each symbol minted inside one, the id it was minted in: an upper bound proved
        # there may hold of such a symbol only (see add_less_equal_constraint).
        # (Both made on the first subgraph and the first symbol minted in one.)
        self._subgraphs: list[int] = _NO_SUBGRAPHS  # type: ignore[assignment]
        self._subgraphs_entered = 0
        self._minted_in: dict[str, int] = _NO_ENTRIES
        self.diagnostics: list[Diagnostic] = []
        #: Counts changes other than to shapes, dtypes and values of values: minted
        #: symbols, constraints, diagnostics, non-tensor types, forgotten values. A hook
        #: run during which neither this, the scope's version nor
        #: :func:`untracked_reads` moved depended only on its inputs' facts.
        self.mutations = 0
        #: Counts uses of declared shapes: merges of a declared intermediate shape
        #: (:func:`merge_declared_shape`) whose outcome may differ from the inferred
        #: shape alone (dims downstream, a diagnostic, the int dims written), and declared
        #: shapes read as a value's facts (:meth:`read_declared_shape`). While it does not
        #: move, a walk gave every value the facts it would have had without the
        #: declarations (Loop inference uses this to keep a body inference instead of
        #: repeating it without them).
        self.declarations_used = 0
        # The model's names (reserve_names) and opaque texts' names; the printers'
        # words (_RESERVED_WORDS) are checked apart, not copied into every context.
        # (The tables below set to _NO_ENTRIES or _NO_NAMES are made on their first
        # entry: most models write none of them.)
        self._reserved: set[str] = set()
        self._generated: set[str] = _NO_NAMES  # type: ignore[assignment]
        # Opaque dim text -> its readable symbol (read_dim_text; other texts' dims are
        # the same in every context, kept in _PARSED_TEXTS).
        self._text_dims: dict[str, Dim] = _NO_ENTRIES
        self._opaque: dict[str, str] = _NO_ENTRIES
        #: The model-local functions being inferred, outermost first (a call of one of
        #: them again is a recursion, which ONNX forbids).
        self.active_functions: list[tuple[str, str, str]] = []
        # Declared (anchor) value -> the axes whose dim the engine wrote (note_filled).
        self._filled: dict[ir.Value, frozenset[int]] = _NO_ENTRIES
        self._next_suffix: dict[str, int] = _NO_ENTRIES
        # Constraint stores: key (canonical strings) -> the dims they were built from.
        # Keys are only added (and dropped from the end by roll_back_to): sizes mark
        # how far they had grown.
        self._equalities: dict[tuple[str, str], tuple[Dim, Dim]] = _NO_ENTRIES
        self._upper_bounds: dict[tuple[str, str], tuple[Dim, Dim]] = _NO_ENTRIES
        # Side tables.
        self._shapes: dict[ir.Value, Shape | None] = {}
        self._dtypes: dict[ir.Value, ir.DataType | None] = {}
        self._values: dict[ir.Value, Shape | None] = {}
        self._other_types: dict[ir.Value, ir.TypeProtocol] = _NO_ENTRIES
        # dtype_of's reads from the IR, for values without an inferred dtype.
        self._declared_dtypes: dict[ir.Value, ir.DataType | None] = {}
        self._by_name: dict[str, ir.Value] = _NO_ENTRIES
        #: Graph inputs backed by an initializer that are constants here (old IR, or the
        #: ``constant_initializers`` option): shape and small contents are facts.
        self.constant_inputs: set[ir.Value] = set()

    # ------------------------------------------------------------------------------------
    # Symbols
    # ------------------------------------------------------------------------------------
    def reserve_names(self, names: Iterable[str]) -> None:
        """Marks names as used by the model, so :meth:`new_symbol` never returns them.

        Register every ``dim_param`` text and every symbol name appearing in the model
        before inference starts.
        """
        self._reserved.update(names)

    def reserve_model_texts(self, texts: Iterable[str]) -> None:
        """Reserves a model's ``dim_param`` texts and their symbols, and reads the opaque ones.

        What :meth:`reserve_names` of every text and every symbol in it, then
        :meth:`read_dim_text` of each non-anonymous text in byte order does: the readable
        names of opaque texts (``7/:2`` -> ``d7_2``) then depend only on the model, not on
        the walk. Other texts read the same whenever they are read (their dim is their
        parse), so only the opaque ones are read here; what a text holds is found once
        per process (:func:`_text_names`).
        """
        key = texts if texts.__class__ is frozenset else frozenset(texts)
        found = _MODEL_TEXTS.get(key)
        if found is None:
            names: set[str] = set()
            opaque = []
            for text in key:
                text_names, is_opaque = _text_names(text)
                names.update(text_names)
                if is_opaque:
                    opaque.append(text)
            found = (frozenset(names), tuple(sorted(opaque)))
            if len(key) <= _MODEL_TEXTS_MAX_TEXTS:
                if len(_MODEL_TEXTS) >= _MODEL_TEXTS_MAX:
                    _MODEL_TEXTS.clear()
                _MODEL_TEXTS[key] = found
        names, opaque_texts = found
        self._reserved.update(names)
        for text in opaque_texts:
            self.read_dim_text(text)

    @property
    def generated_symbols(self) -> frozenset[str]:
        """Names of the symbols minted by :meth:`new_symbol` (the engine's own names)."""
        return frozenset(self._generated)

    def is_generated(self, name: str) -> bool:
        """True when ``name`` was minted by this context (not declared by the model)."""
        return name in self._generated

    def new_symbol(self, hint: str = "d") -> expr.DimExpr:
        """Mints a fresh symbol named after ``hint``.

        The name is ``hint`` sanitized to an identifier; when taken (by the model or an
        earlier symbol) a suffix ``_1``, ``_2``, ... is appended. Names depend only on the
        order of calls, so a run is deterministic.
        """
        base = sanitize_symbol_name(hint)
        name = base
        generated = self._generated
        if name in self._reserved or name in generated or name in _RESERVED_WORDS:
            suffix = self._next_suffix.get(base, 1)
            name = f"{base}_{suffix}"
            while name in self._reserved or name in generated:
                suffix += 1
                name = f"{base}_{suffix}"
            if self._next_suffix is _NO_ENTRIES:
                self._next_suffix = {}
            self._next_suffix[base] = suffix + 1
        if generated:
            generated.add(name)
        else:
            self._generated = {name}
        if self._subgraphs:
            if self._minted_in is _NO_ENTRIES:
                self._minted_in = {}
            self._minted_in[name] = self._subgraphs[-1]
        self.mutations += 1
        return expr.sym(name)

    def enter_subgraph(self) -> None:
        """Starts inferring a subgraph (a branch or body whose code may not run)."""
        self.conditional_depth += 1
        self._subgraphs_entered += 1
        if self._subgraphs is _NO_SUBGRAPHS:
            self._subgraphs = []
        self._subgraphs.append(self._subgraphs_entered)

    def exit_subgraph(self) -> None:
        """Ends what :meth:`enter_subgraph` started."""
        self._subgraphs.pop()
        self.conditional_depth -= 1

    def fresh_shape(self, rank: int, hint: str = "d") -> Shape:
        """A shape of ``rank`` fresh symbols named ``{hint}_0``, ``{hint}_1``, ..."""
        return tuple(self.new_symbol(f"{hint}_{i}") for i in range(rank))

    def read_dim_text(self, text: str) -> Dim:
        """The dim a ``dim_param`` text of the model denotes (cached per text).

        Text that is an expression is parsed (``parse_dim``). Text that is not (``7/:2``,
        ``batch size``, ``N %``, a huge int) names one opaque dim, and ``parse_dim``
        makes it a symbol named by the raw text; printed inside a compound dim that
        text would re-parse to something else (``2*7/:2`` reads as 7). Here it becomes
        a symbol with a readable name instead: the text sanitized
        (:func:`sanitize_symbol_name`) and made unique against every reserved name
        (the model's, see :meth:`reserve_names`) and every other opaque text, so equal
        texts still denote one dim and different texts never share one. The model's
        declared dims keep their text; only what the engine writes uses the name.

        The empty text and anonymous texts (``?``) are the caller's business (they name
        no dim); they are read like any other text here.
        """
        # A text that is not opaque reads as its parse in every context: found once per
        # process (a small model's call reads each of its texts once), and not copied
        # into the context. Only opaque texts have a dim of the context's own.
        found = _PARSED_TEXTS.get(text)
        if found is None:
            found = self._text_dims.get(text)
            if found is None:
                found = expr.parse_dim(text)
                if (
                    isinstance(found, expr.DimExpr)
                    and found.is_symbol
                    and not _READABLE_NAME.fullmatch(found.name)  # type: ignore[arg-type]
                ) or _is_numeric_name(found):
                    found = expr.sym(self._opaque_name(text))
                    if self._text_dims is _NO_ENTRIES:
                        self._text_dims = {}
                    self._text_dims[text] = found
                else:
                    if len(_PARSED_TEXTS) > 100_000:
                        _PARSED_TEXTS.clear()
                    _PARSED_TEXTS[text] = found
        return found

    def _opaque_name(self, text: str) -> str:
        base = sanitize_symbol_name(text)
        name = base
        suffix = 1
        while name in self._reserved or name in self._generated or name in _RESERVED_WORDS:
            name = f"{base}_{suffix}"
            suffix += 1
        # Reserved: no fresh symbol and no other opaque text is ever named the same.
        self._reserved.add(name)
        if self._opaque is _NO_ENTRIES:
            self._opaque = {}
        self._opaque[text] = name
        self.mutations += 1
        logger.debug("dim text %r is not an expression: symbol %r", text, name)
        return name

    def note_filled(self, value: ir.Value, axes: Iterable[int]) -> None:
        """Records that the engine wrote the dims at ``axes`` of a declared ``value``.

        E.g. an empty dim of a graph output: the dim is the engine's, not the author's,
        so the anchor-propagation pass rewrites it like any other engine dim.
        """
        axes = frozenset(axes)
        if axes:
            if self._filled is _NO_ENTRIES:
                self._filled = {}
            self._filled[value] = self._filled.get(value, frozenset()) | axes

    def filled_axes(self, value: ir.Value) -> frozenset[int]:
        """The axes of ``value`` whose dims the engine wrote (see :meth:`note_filled`)."""
        return self._filled.get(value, frozenset())

    @property
    def opaque_dim_names(self) -> dict[str, str]:
        """``{text: symbol name}`` for each opaque ``dim_param`` text read so far."""
        return dict(self._opaque)

    def text_symbols(self, text: str) -> frozenset[str]:
        """The symbol names in the dim ``text`` denotes (see :meth:`read_dim_text`)."""
        d = self.read_dim_text(text) if text else 0
        if isinstance(d, expr.DimExpr) and not d.is_unknown:
            return d.symbols()
        return frozenset()

    # ------------------------------------------------------------------------------------
    # Equality constraints
    # ------------------------------------------------------------------------------------
    def _text(self, d: Dim | str) -> tuple[str, Dim | None]:
        if isinstance(d, str):
            if not d:
                return d, None
            parsed = self.read_dim_text(d)
            if isinstance(parsed, int):
                return str(parsed), parsed
            if parsed.is_unknown:
                return d, parsed
            # Keyed by the canonical text, as dims are: "N" and parsed "N" are one key.
            return expr.to_onnx(parsed), parsed
        if isinstance(d, expr.DimExpr) and d.is_unknown:
            return "", None  # an unknown equals nothing, not even itself
        return expr.to_onnx(d), d

    def add_constraint(self, a: Dim | str, b: Dim | str) -> bool:
        """Records ``a == b``; returns whether it was new.

        Nothing is recorded inside a subgraph (:attr:`conditional_depth`). The pair is unordered and stored canonically as (smaller, larger) in byte order
        of the printed forms; ``a == a``, empty operands and unknown dims are dropped.
        """
        if self.conditional_depth:
            return False
        ta, da = self._text(a)
        tb, db = self._text(b)
        if not ta or not tb or ta == tb:
            return False
        # str order is code point order, which equals UTF-8 byte order.
        key, dims = ((ta, tb), (da, db)) if ta < tb else ((tb, ta), (db, da))
        if key in self._equalities:
            return False
        if self._equalities is _NO_ENTRIES:
            self._equalities = {}
        self._equalities[key] = dims  # type: ignore[assignment]
        self.mutations += 1
        return True

    def has_constraint(self, a: Dim | str, b: Dim | str) -> bool:
        """True when ``a == b`` was recorded (symmetric; ``a == a`` is always true)."""
        ta, _ = self._text(a)
        tb, _ = self._text(b)
        if ta == tb:
            return bool(ta)
        return ((ta, tb) if ta < tb else (tb, ta)) in self._equalities

    def constraints(self) -> list[tuple[str, str]]:
        """The recorded equalities as canonical ``(smaller, larger)`` string pairs."""
        return list(self._equalities)

    def constraint_dims(self) -> list[tuple[Dim, Dim]]:
        """The recorded equalities as dims, oriented like :meth:`constraints`."""
        return list(self._equalities.values())

    def constraints_size(self) -> int:
        """Number of recorded equalities."""
        return len(self._equalities)

    def add_symbolic_constraint_with_leaf_derivation(self, a: Dim | str, b: Dim | str) -> bool:
        """Records ``a == b`` and, when implied exactly, the leaf equality ``x == y``.

        ``x == y`` is derived only when ``a - b`` is ``c*x - c*y`` for two bare symbols
        and **no constant**: ``2*dnz == 2*nnz`` gives ``dnz == nnz``, and so does
        ``x + z == y + z``. ``x + 1 == y``, ``2*x == 2*y + 2`` and ``x//2 == y//2`` derive
        nothing (the last because ``x//2 == y//2`` holds for ``x=2, y=3``).

        Returns:
            Whether any new constraint was recorded.
        """
        recorded = self.add_constraint(a, b)
        _, da = self._text(a)
        _, db = self._text(b)
        if da is None or db is None:
            return recorded
        monomials, constant = expr.coefficients(expr.sub(da, db))
        if constant != 0 or len(monomials) != 2:
            return recorded
        (x, cx), (y, cy) = monomials.items()
        if cx == -cy and _is_bare_symbol(x) and _is_bare_symbol(y):
            recorded = self.add_constraint(x, y) or recorded
        return recorded

    # ------------------------------------------------------------------------------------
    # Upper bounds
    # ------------------------------------------------------------------------------------
    def add_less_equal_constraint(self, lhs: Dim | str, rhs: Dim | str) -> bool:
        """Records ``lhs <= rhs`` (ordered); returns whether it was new.

        Self bounds and empty operands are dropped. A bound on a bare symbol is also
        given to the scope, so proofs use it (e.g. ``nnz <= N*M``). Inside a subgraph
        (:attr:`conditional_depth`) only a bound on a symbol minted in that very
        subgraph inference is recorded: the code may not run, and a bound such as an
        STFT's ``frame_length <= signal_length`` in an untaken branch is false outside
        it (a ``Min`` of the two after the ``If`` was written as the frame length). A
        symbol minted there stands for a size of that code only.
        """
        tl, dl = self._text(lhs)
        tr, dr = self._text(rhs)
        if not tl or not tr or tl == tr:
            return False
        if self.conditional_depth and not self._minted_here(dl):
            return False
        key = (tl, tr)
        if key in self._upper_bounds:
            return False
        if self._upper_bounds is _NO_ENTRIES:
            self._upper_bounds = {}
        self._upper_bounds[key] = (dl, dr)  # type: ignore[assignment]
        self.mutations += 1
        if isinstance(dl, expr.DimExpr) and dl.is_symbol and dr is not None:
            self.scope.add_upper_bound(dl.name, dr)  # type: ignore[arg-type]
        return True

    def _minted_here(self, d: Dim | None) -> bool:
        """True when ``d`` is a symbol minted in the innermost open subgraph inference."""
        return (
            isinstance(d, expr.DimExpr)
            and d.is_symbol
            and bool(self._subgraphs)
            and self._minted_in.get(d.name) == self._subgraphs[-1]
        )

    def has_less_equal_constraint(self, lhs: Dim | str, rhs: Dim | str) -> bool:
        """True when exactly ``lhs <= rhs`` was recorded (``a <= a`` is always true)."""
        tl, tr = self._text(lhs)[0], self._text(rhs)[0]
        if tl == tr:
            return bool(tl)
        return (tl, tr) in self._upper_bounds

    def less_equal_constraints(self) -> list[tuple[str, str]]:
        """The recorded upper bounds as ``(lhs, rhs)`` string pairs."""
        return list(self._upper_bounds)

    def less_equal_constraint_dims(self) -> list[tuple[Dim, Dim]]:
        """The recorded upper bounds as ``(lhs, rhs)`` dims."""
        return list(self._upper_bounds.values())

    def less_equal_constraints_size(self) -> int:
        """Number of recorded upper bounds."""
        return len(self._upper_bounds)

    def clear(self) -> None:
        """Empties both constraint stores (bounds already given to the scope stay)."""
        self._equalities = _NO_ENTRIES
        self._upper_bounds = _NO_ENTRIES

    def marks(self) -> tuple[int, int, int]:
        """How far equalities, upper bounds and diagnostics have grown (:meth:`roll_back_to`)."""
        return len(self._equalities), len(self._upper_bounds), len(self.diagnostics)

    def roll_back_to(self, marks: tuple[int, int, int]) -> None:
        """Drops the equalities, upper bounds and diagnostics recorded since :meth:`marks`.

        Keys are only ever added to the constraint stores, so the entries past a mark
        are the last ones (dicts keep insertion order). Bounds already given to the
        scope stay, as with :meth:`clear`.
        """
        equalities, upper_bounds, diagnostics = marks
        del self.diagnostics[diagnostics:]
        # (A store still _NO_ENTRIES is empty: nothing to pop.)
        while len(self._equalities) > equalities:
            self._equalities.popitem()
        while len(self._upper_bounds) > upper_bounds:
            self._upper_bounds.popitem()

    # ------------------------------------------------------------------------------------
    # Facts of successful runs (see onnx_symdims.shapes._facts)
    # ------------------------------------------------------------------------------------
    def _fact_scope(self) -> FactScope | None:
        if self.conditional_depth:
            return None  # code in a subgraph may not run: what it implies is no fact
        scope = self.scope
        return scope if isinstance(scope, FactScope) else None

    def note_nonneg(self, d: Dim) -> bool:
        """Records that ``d >= 0`` holds from here on (e.g. a dim of a tensor that exists).

        Like every ``note_*`` fact: dropped inside a subgraph (:attr:`conditional_depth`)
        and under a plain ``Scope``. Returns whether the fact was new.
        """
        scope = self._fact_scope()
        return scope is not None and scope.assume_nonneg(d)

    def note_nonzero(self, d: Dim) -> bool:
        """Records that ``d != 0`` (a divisor a node divided by, in a run that succeeded)."""
        scope = self._fact_scope()
        return scope is not None and scope.assume_nonzero(d)

    def note_ge(self, d: Dim, k: int) -> bool:
        """Records that ``d >= k`` holds from here on."""
        scope = self._fact_scope()
        return scope is not None and scope.assume_ge(d, k)

    def note_divides(self, divisor: Dim, dividend: Dim) -> bool:
        """Records that ``divisor`` divides ``dividend`` (an exact division that executed)."""
        scope = self._fact_scope()
        return scope is not None and scope.assume_divides(divisor, dividend)

    def known_nonzero(self, d: Dim) -> bool:
        """True when ``d != 0`` is recorded or provable."""
        scope = self.scope
        if isinstance(scope, FactScope):
            return scope.known_nonzero(d)
        if isinstance(d, int):
            return d != 0
        return scope.prove_gt(d, 0) or scope.prove_gt(0, d)

    def known_divides(self, divisor: Dim, dividend: Dim) -> bool:
        """True when ``divisor`` is known to divide ``dividend`` exactly."""
        scope = self.scope
        if isinstance(scope, FactScope):
            return scope.known_divides(divisor, dividend)
        return (
            isinstance(divisor, int)
            and isinstance(dividend, int)
            and (divisor != 0 and dividend % divisor == 0)
        )

    def refine(self, d: Dim) -> Dim:
        """``d`` under the facts known now (:func:`~onnx_symdims.shapes._facts.refine_dim`)."""
        scope = self.scope
        if isinstance(d, int) or not isinstance(scope, FactScope):
            return d
        return refine_dim(d, scope)  # memoized with the scope's facts

    def refine_dims(self, dims: tuple[Dim, ...]) -> tuple[Dim, ...]:
        """:meth:`refine` of each dim; ``dims`` itself (the same object) when none changes.

        Memoized per tuple with the scope's other results (:func:`_memo_under_facts`):
        layers repeat the same shapes, and one lookup replaces a call per dim.
        """
        scope = self.scope
        if not isinstance(scope, FactScope):
            return dims
        key = ("refine_dims", dims)
        found = scope._scoped_memo.get(key)
        if found is None:
            version = scope.version
            found = tuple(refine_dim(d, scope) for d in dims)
            if found == dims:
                found = dims
            if scope.version == version:
                _memo_under_facts(scope, key, found)
        return found

    # ------------------------------------------------------------------------------------
    # Diagnostics
    # ------------------------------------------------------------------------------------
    def add_diagnostic(
        self, node: ir.Node | None, severity: Severity, message: str
    ) -> Diagnostic:
        """Records a diagnostic about ``node`` (``None`` for graph-level findings).

        Raises:
            ShapeInferenceError: ``severity`` is ``"error"`` and :attr:`strict` is set.
        """
        if node is None:
            diagnostic = Diagnostic("", "", "", severity, message)
        else:
            diagnostic = Diagnostic(
                node.name or "", node.op_type, node.domain, severity, message
            )
        self.diagnostics.append(diagnostic)
        self.mutations += 1
        logger.debug("%s", diagnostic)
        if self.strict and severity == "error":
            raise ShapeInferenceError(diagnostic)
        return diagnostic

    def dims_under_facts(
        self, key: tuple, compute: Callable[[], list[Dim | None]]
    ) -> list[Dim | None]:
        """``compute()``: dims that are a pure function of ``key`` and the facts.

        Kept with the scope's facts (:func:`_memo_under_facts`), and reused instead of
        calling ``compute`` while they hold: repeated layers (and the next inference of
        the model) ask the same, e.g. a Reshape's output dims from the same input and
        target dims. Kept only when ``compute`` added no fact (``note_*``) and gave no
        unknown dim, so that reusing it adds nothing that running ``compute`` would
        have; an exception is never kept. Facts are not added inside a subgraph: what is
        computed there is kept apart.
        """
        scope = self.scope
        version = scope.version
        full_key = ("dims_under_facts", key, self.conditional_depth > 0)
        found = scope._scoped_memo.get(full_key)
        if found is not None:
            return list(found)
        dims = compute()
        if scope.version == version and not any(
            isinstance(d, expr.DimExpr) and d.is_unknown for d in dims
        ):
            _memo_under_facts(scope, full_key, tuple(dims))
        return dims

    def shape_under_facts(
        self, key: tuple, compute: Callable[..., Sequence[Dim | None]], *args: object
    ) -> tuple[Dim | None, ...]:
        """:meth:`dims_under_facts` of ``compute(*args)``, as a tuple.

        The same entries, kept the same way (a tuple either way): the caller builds no
        closure, and a hit returns the kept tuple itself rather than a list copy of it
        (:meth:`NodeContext.set_output` would make it a tuple again). A Reshape in every
        layer asks it.
        """
        scope = self.scope
        version = scope.version
        full_key = ("dims_under_facts", key, self.conditional_depth > 0)
        found = scope._scoped_memo.get(full_key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        dims = tuple(compute(*args))
        if scope.version == version and not any(
            isinstance(d, expr.DimExpr) and d.is_unknown for d in dims
        ):
            _memo_under_facts(scope, full_key, dims)
        return dims

    # ------------------------------------------------------------------------------------
    # Side tables
    # ------------------------------------------------------------------------------------
    def _resolve(self, value: ir.Value | str) -> ir.Value | None:
        if isinstance(value, str):
            found = self._by_name.get(value)
            if found is None:
                # Names are indexed lazily: lookups by name are rare (API queries after
                # inference), so the hot path does not pay for them.
                if self._by_name is _NO_ENTRIES:
                    self._by_name = {}
                for table in (self._shapes, self._values, self._dtypes):
                    for known in table:
                        if known.name:
                            self._by_name.setdefault(known.name, known)
                found = self._by_name.get(value)
            return found
        return value

    def has_shape(self, value: ir.Value) -> bool:
        """True when the shape table has an entry (possibly ``None``) for ``value``."""
        return value in self._shapes

    def peek_shape(self, value: ir.Value) -> Shape | None:
        """The stored shape of ``value`` without reading the IR (``None`` if absent)."""
        return self._shapes.get(value)

    def peek_dtype(self, value: ir.Value) -> ir.DataType | None:
        """The inferred dtype of ``value`` without reading the IR (``None`` if absent)."""
        return self._dtypes.get(value)

    def shape_of(self, value: ir.Value | str) -> Shape | None:
        """The shape of ``value`` as dims, or ``None`` when its rank is unknown.

        A value not yet in the table is read once from its constant tensor or declared
        ``ir.Shape`` (empty dims become fresh symbols) and cached.
        """
        shape = self._shapes.get(value, MISSING)  # type: ignore[arg-type]
        if shape is not MISSING:  # the hot path: a value already in the table
            return shape  # type: ignore[return-value]
        if value is None or isinstance(value, str):  # (None: an absent input)
            return self._read_into(self._shapes, value, self.read_declared_shape)
        # _read_into's miss for a value, inline: every initializer is read here once.
        shape = self._shapes[value] = self.read_declared_shape(value)  # type: ignore[index]
        return shape

    def _read_into(
        self,
        table: dict[ir.Value, Shape | None],
        value: ir.Value | str,
        read: Callable[[ir.Value], Shape | None],
    ) -> Shape | None:
        """``table``'s entry for ``value`` (a value or a name).

        An absent entry is read from the IR with ``read`` and cached.
        """
        resolved = self._resolve(value)
        if resolved is None:
            return None
        found = table.get(resolved, MISSING)
        if found is MISSING:
            found = table[resolved] = read(resolved)
        return found  # type: ignore[return-value]

    def read_declared_shape(self, value: ir.Value) -> Shape | None:
        """Converts what ``value`` carries in the IR (constant or declared shape) to dims.

        An initializer that backs a graph input is only a default (it may be fed with
        another shape at run time), so only the declared shape counts there.
        """
        if _VALUE_SLOTS and _PROTO_SLOT:
            # constant_tensor(value), then tensor_dims(tensor) of a TensorProtoTensor,
            # inline: every initializer a hook reads comes here once (two calls fewer).
            _UNTRACKED_READS[0] += 1
            tensor = value._const_value
            if tensor is not None and (
                not value._is_graph_input or value.meta.get(CONSTANT_INPUT_KEY)
            ):
                if tensor.__class__ is _PROTO_TENSOR:
                    return tuple(tensor._proto.dims[:])  # type: ignore[attr-defined]
                return tensor_dims(tensor)
        else:
            tensor = constant_tensor(value)
            if tensor is not None:
                return tensor_dims(tensor)
        shape = value.shape
        if shape is not None:
            self.declarations_used += 1  # a declared shape taken as the value's facts
        return self.dims_from_ir(shape, value.name or "value")

    def dims_from_ir(self, shape: ir.Shape | None, hint: str) -> Shape | None:
        """Converts an ``ir.Shape`` to dims.

        ``dim_param`` text goes through :meth:`read_dim_text` (never fails); an empty or
        anonymous dim becomes a fresh symbol named after ``hint``.
        """
        if shape is None:
            return None
        # The usual declared shape: ints >= 0 and texts read before, whose dims are the
        # same in every context (_DECLARED_DIMS): a lookup per dim, no call. Anything
        # else (an empty or anonymous dim, a text not read yet, an opaque text) reads the
        # whole shape the general way below; nothing was minted or recorded before that.
        known = _DECLARED_DIMS
        dims: list[Dim] = []
        append = dims.append
        for d in shape._dims:  # the slots behind shape.dims and d.value
            cls = d.__class__
            if cls is int:
                if d >= 0:
                    append(d)
                    continue
            elif cls is _SYMBOLIC_DIM:
                found = known.get(d._value)
                if found is not None:
                    append(found)
                    continue
            return self._dims_from_ir(shape, hint)
        return tuple(dims)

    def _dims_from_ir(self, shape: ir.Shape, hint: str) -> Shape:
        """:meth:`dims_from_ir` of a shape it does not read as known."""
        dims: list[Dim] = []
        for i, d in enumerate(shape._dims):
            if isinstance(d, int):
                # Some producers write dim_value -1 for "unknown": not a dim.
                dims.append(d if d >= 0 else self.new_symbol(f"{hint}_d{i}"))
                continue
            text = d._value
            if not text or is_anonymous_dim_text(text):
                dims.append(self.new_symbol(f"{hint}_d{i}"))
                continue
            parsed = self.read_dim_text(text)
            if isinstance(parsed, int) and parsed < 0:
                parsed = self.new_symbol(f"{hint}_d{i}")  # "-1" etc.: not a dim
            elif isinstance(parsed, expr.DimExpr) and parsed.is_unknown:
                parsed = self.new_symbol(f"{hint}_d{i}")
            elif _PARSED_TEXTS.get(text) is parsed:
                # Read as its parse (not opaque): the same dim in every context.
                if len(_DECLARED_DIMS) > 100_000:
                    _DECLARED_DIMS.clear()
                _DECLARED_DIMS[text] = parsed
            dims.append(parsed)
        return tuple(dims)

    def set_shape(self, value: ir.Value, dims: Sequence[Dim] | None) -> None:
        """Stores the shape of ``value`` (``None``: rank unknown).

        Dims must be valid (ints >= 0 or non-unknown ``DimExpr``); :class:`NodeContext`
        validates what hooks produce.
        """
        self._shapes[value] = None if dims is None else tuple(dims)

    def dtype_of(self, value: ir.Value | str) -> ir.DataType | None:
        """The element type inferred or declared for ``value`` (``None`` if unknown).

        Without an inferred dtype, what the IR declares (or the constant's dtype) is
        read once and kept apart (``_declared_dtypes``), as :meth:`shape_of` keeps a
        declared shape: the engine writes a type only where it inferred a dtype, and
        :meth:`forget` drops what was read.
        """
        dtype = self._dtypes.get(value)  # type: ignore[arg-type]
        if dtype is not None:
            return dtype
        dtype = self._declared_dtypes.get(value, MISSING)  # type: ignore[arg-type]
        if dtype is not MISSING:  # graph inputs and initializers: read before
            return dtype  # type: ignore[return-value]
        if value.__class__ is ir.Value:
            # The first read of a value (the usual miss): both tables were just asked
            # for it, so what follows for a name reduces to reading the IR.
            dtype = value.dtype
            if dtype is None and value.const_value is not None:
                dtype = value.const_value.dtype
            self._declared_dtypes[value] = dtype
            return dtype
        resolved = self._resolve(value)
        if resolved is None:
            return None
        dtype = self._dtypes.get(resolved)
        if dtype is None:
            dtype = self._declared_dtypes.get(resolved, MISSING)
            if dtype is MISSING:
                dtype = resolved.dtype
                if dtype is None and resolved.const_value is not None:
                    dtype = resolved.const_value.dtype
                self._declared_dtypes[resolved] = dtype
        return dtype  # type: ignore[return-value]

    def set_dtype(self, value: ir.Value, dtype: ir.DataType | None) -> None:
        """Stores the inferred element type of ``value``."""
        self._dtypes[value] = dtype

    def set_non_tensor_type(self, value: ir.Value, type_: ir.TypeProtocol) -> None:
        """Stores an inferred sequence/optional/map type for ``value``."""
        if self._other_types is _NO_ENTRIES:
            self._other_types = {}
        self._other_types[value] = type_
        self.mutations += 1

    def has_non_tensor_types(self) -> bool:
        """True when some value has an inferred sequence/optional/map type."""
        return bool(self._other_types)

    def non_tensor_type_of(self, value: ir.Value) -> ir.TypeProtocol | None:
        """The inferred sequence/optional/map type of ``value``, if any."""
        return self._other_types.get(value)

    def value_of(self, value: ir.Value | str) -> Shape | None:
        """The symbolic elements of ``value`` (flattened, row-major), or ``None``.

        Known for outputs of shape computations and for small integer constants
        (at most :data:`MAX_VALUE_ELEMENTS` elements; larger tensors are never read).
        Elements may be unknown ``DimExpr`` (partially known values), and may be
        negative: elements are integers, not dims.
        """
        elements = self._values.get(value, MISSING)  # type: ignore[arg-type]
        if elements is not MISSING:  # the hot path: a value already in the table
            return elements  # type: ignore[return-value]
        if value is None or isinstance(value, str):  # (None: an absent input)
            return self._read_into(self._values, value, self._read_constant_elements)
        # _read_into's miss for a value, inline (constants, and outputs nobody gave
        # elements: read once, then in the table).
        elements = self._values[value] = self._read_constant_elements(value)  # type: ignore[index]
        return elements

    def set_value(self, value: ir.Value, elements: Sequence[Dim] | None) -> None:
        """Stores the symbolic elements of ``value`` (``None``: not known)."""
        self._values[value] = None if elements is None else tuple(elements)

    def value_as_shape(self, name: str) -> Shape | None:
        """The symbolic elements of the value called ``name`` (query API)."""
        return self.value_of(name)

    def _read_constant_elements(self, value: ir.Value) -> Shape | None:
        tensor = constant_tensor(value)
        if tensor is None:
            return None
        try:
            return int_elements(tensor)
        except Exception as e:  # any unreadable tensor: its contents are unknown
            # E.g. external data that is missing, outside the model's folder (onnx-ir
            # refuses ``../`` and absolute paths) or at a bad offset: never read, said.
            where = getattr(tensor, "location", None)
            source = f" (external data {where!r})" if where is not None else ""
            self.add_diagnostic(
                None,
                "warning",
                f"constant {value.name!r}{source} cannot be read, its contents are "
                f"unknown: {type(e).__name__}: {e}",
            )
            return None

    def forget(self, value: ir.Value) -> None:
        """Drops everything stored about ``value`` (it will be re-read from the IR)."""
        self._shapes.pop(value, None)
        self._dtypes.pop(value, None)
        self._values.pop(value, None)
        if self._other_types:
            self._other_types.pop(value, None)
        self._declared_dtypes.pop(value, None)
        self.mutations += 1

    def forget_many(self, values: Iterable[ir.Value]) -> None:
        """:meth:`forget` of each of ``values``, moving :attr:`mutations` once (when any).

        The counter is only compared for having moved (see :attr:`mutations`): one move
        for the lot says what one per value said, and the tables are walked by one loop
        (a loop body's every value is forgotten after each probe round).
        """
        shapes, dtypes, elements, declared = (
            self._shapes,
            self._dtypes,
            self._values,
            self._declared_dtypes,
        )
        others = self._other_types or None
        forgot = False
        for value in values:
            shapes.pop(value, None)
            dtypes.pop(value, None)
            elements.pop(value, None)
            declared.pop(value, None)
            if others is not None:
                others.pop(value, None)
            forgot = True
        if forgot:
            self.mutations += 1

    def facts_of(self, value: ir.Value) -> tuple[object, object, object]:
        """The shape, value and dtype entries of ``value`` (:data:`MISSING` when absent)."""
        return (
            self._shapes.get(value, MISSING),
            self._values.get(value, MISSING),
            self._dtypes.get(value, MISSING),
        )

    def restore_facts(self, value: ir.Value, facts: tuple[object, object, object]) -> None:
        """Sets the entries :meth:`facts_of` returned (a :data:`MISSING` one is left alone)."""
        shape, elements, dtype = facts
        if shape is not MISSING:
            self._shapes[value] = shape  # type: ignore[assignment]
        if elements is not MISSING:
            self._values[value] = elements  # type: ignore[assignment]
        if dtype is not MISSING:
            self._dtypes[value] = dtype  # type: ignore[assignment]

    def rewrite_tables(self, rewrite: Callable[[Shape], Shape | None]) -> None:
        """Replaces each stored shape and value-as-shape ``t`` by ``rewrite(t)``.

        ``rewrite`` returns ``None`` to keep ``t`` (used to rename symbols everywhere).
        """
        for table in (self._shapes, self._values):
            for value, dims in table.items():
                if dims is not None:
                    new = rewrite(dims)
                    if new is not None:
                        table[value] = new

    def known_values(self) -> list[ir.Value]:
        """Every value with an entry in the shape table, in insertion order."""
        return list(self._shapes)
