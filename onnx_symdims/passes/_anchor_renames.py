"""Turning recorded equalities into a rename map (no IR here, only dims).

Given the equalities ``a == b`` recorded during inference, :func:`plan_renames` closes
them into equivalence classes (union-find, any chain length), picks one canonical target
per class and maps the members that may be renamed to it.

Who may be renamed (a *key*):

* an expression containing a *renamable* symbol — one the engine minted
  (``ShapesContext.generated_symbols``), never a name the model declares, however
  generated it looks (``_d0``, ``s0``, ``NonZero_nz_nnz`` declared by a user stay);
* a compound expression made only of declared symbols (``past_seq+seq``), but only
  when its target is a bare symbol declared on a graph **input** (``total_seq``):
  the input symbol is the authoritative dim. With an output-only label as target the
  computed expression is kept. A bare declared symbol is never a key.

The target of a class, in this order of preference:

1. the byte-order smallest bare *preferred* symbol — declared on the main graph (a name
   declared only in a loop body annotation means nothing outside it) — not starting
   with the ban prefix (``DYN``: torch.export's automatic names; they are filtered,
   they do not veto);
2. an int;
3. the shortest compound expression of preferred symbols (e.g. ``N+1`` declared on an
   output against an inferred ``nnz``), none of them banned.

A target never contains a renamable symbol, so renaming terminates and never produces a
key again. Classes with two different ints are contradictions (the anchors disagree)
and are not used. So are output-only labels that name two sizes which differ
(:func:`ambiguous_labels`): ``a: [B, K]`` and ``b: [B, K]`` with ``a`` of ``L`` and ``b``
of ``2*L`` elements (TorchScript reuses its own dim names across outputs this way).

Solving: a class that equates ``g + r`` (``g`` renamable, appearing once with coefficient
±1 outside any function term, ``r`` free of renamable symbols) with a target ``t`` also
gives the exact equality ``g == t - r`` (or ``r - t``), which joins ``g``'s class.
This is plain algebra — ``x + 1 == y`` gives ``x == y - 1``, never ``x == y``; nothing
is solved through ``//``, ``%``, ``max``, ``broadcast`` or a coefficient other than ±1.

Renaming an expression may reveal new equal pairs (``h == 2*g`` with ``g -> N`` makes
``h == 2*N``), so the planning repeats, adding each member's rewritten form to its class,
until the map is stable.
"""

from __future__ import annotations

__all__ = ["RenamePlan", "ambiguous_labels", "degenerate_classes", "plan_renames"]

import collections
import dataclasses
import logging
from collections.abc import Callable, Iterable

from onnx_symdims import expr

logger = logging.getLogger(__name__)

Dim = expr.Dim

_MAX_ROUNDS = 8


class RenamePlan:
    """The outcome of :func:`plan_renames`.

    Immutable, compared by value. Written out rather than as a frozen dataclass:
    generating one costs about 1 ms of the first run in a process (the cold start).

    Attributes:
        mapping: Key -> target, in a deterministic order; apply with
            :func:`onnx_symdims.expr.replace_subexpressions`.
        implied: Classes containing two or more declared names or ints (e.g.
            ``(M, N)``: the anchors imply the author's ``N == M``). Never renamed.
        contradictions: Classes containing two different ints; not used for renaming.
    """

    __slots__ = ("contradictions", "implied", "mapping")

    mapping: dict[expr.DimExpr, Dim]
    implied: tuple[tuple[Dim, ...], ...]
    contradictions: tuple[tuple[Dim, ...], ...]

    def __init__(
        self,
        mapping: dict[expr.DimExpr, Dim],
        implied: tuple[tuple[Dim, ...], ...],
        contradictions: tuple[tuple[Dim, ...], ...],
    ) -> None:
        object.__setattr__(self, "mapping", mapping)
        object.__setattr__(self, "implied", implied)
        object.__setattr__(self, "contradictions", contradictions)

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.mapping, self.implied, self.contradictions) == (
            other.mapping,  # type: ignore[attr-defined]
            other.implied,  # type: ignore[attr-defined]
            other.contradictions,  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]  # the mapping is a dict

    def __reduce__(self) -> tuple:  # copy and pickle (slots with a frozen __setattr__)
        return (RenamePlan, (self.mapping, self.implied, self.contradictions))

    def __repr__(self) -> str:
        return (
            f"RenamePlan(mapping={self.mapping!r}, implied={self.implied!r}, "
            f"contradictions={self.contradictions!r})"
        )

    def text_mapping(self) -> dict[str, str]:
        """The mapping as printed ``{key: target}`` (``to_onnx`` text)."""
        return {expr.to_onnx(k): _text(v) for k, v in self.mapping.items()}


def _text(d: Dim) -> str:
    return str(d) if isinstance(d, int) else expr.to_onnx(d)


def _order(d: Dim) -> tuple[int, str]:
    return (0, f"{d:020d}") if isinstance(d, int) else (1, expr.to_onnx(d))


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Dim, Dim] = {}

    def find(self, x: Dim) -> Dim:
        parent = self.parent
        parent.setdefault(x, x)
        root = x
        while parent[root] != root:
            root = parent[root]
        while x != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: Dim, b: Dim) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def classes(self) -> list[list[Dim]]:
        groups: dict[Dim, list[Dim]] = {}
        for x in self.parent:
            groups.setdefault(self.find(x), []).append(x)
        result = [sorted(members, key=_order) for members in groups.values()]
        result.sort(key=lambda members: _order(members[0]))
        return result


class _Planner:
    def __init__(
        self,
        renamable: frozenset[str],
        input_symbols: frozenset[str],
        preferred: frozenset[str] | None,
        ban_prefix: str | None,
    ) -> None:
        self.renamable = renamable
        self.input_symbols = input_symbols
        self.preferred = preferred
        self.ban_prefix = ban_prefix or None

    def _eligible(self, name: str) -> bool:
        """May ``name`` appear in a target? Declared, preferred and not banned."""
        if name in self.renamable:
            return False
        if self.preferred is not None and name not in self.preferred:
            return False
        return self.ban_prefix is None or not name.startswith(self.ban_prefix)

    def _is_declared(self, d: Dim) -> bool:
        return isinstance(d, int) or not (d.symbols() & self.renamable)

    def target(self, members: list[Dim]) -> Dim | None:
        names = [
            m
            for m in members
            if isinstance(m, expr.DimExpr) and m.is_symbol and self._eligible(m.name)  # type: ignore[arg-type]
        ]
        if names:
            return min(names, key=lambda m: m.name)  # str order == UTF-8 byte order
        ints = [m for m in members if isinstance(m, int)]
        if ints:
            return ints[0]
        compounds = [m for m in members if all(self._eligible(s) for s in m.symbols())]
        if compounds:
            return min(compounds, key=lambda m: (len(_text(m)), _text(m)))
        return None

    def is_key(self, member: Dim, target: Dim) -> bool:
        if isinstance(member, int) or member is target:
            return False
        if member.symbols() & self.renamable:
            return True
        return (
            not member.is_symbol
            and isinstance(target, expr.DimExpr)
            and target.is_symbol
            and target.name in self.input_symbols
        )

    def solve(self, member: Dim, target: Dim) -> tuple[expr.DimExpr, Dim] | None:
        """``(g, solution)`` when ``member == target`` determines a renamable ``g``."""
        if isinstance(member, int) or member.is_symbol:
            return None
        monomials, constant = expr.coefficients(member)
        found: tuple[expr.DimExpr, int] | None = None
        rest: Dim = constant
        for monomial, coeff in monomials.items():
            if monomial.is_symbol and monomial.name in self.renamable and coeff in (1, -1):
                if found is not None:
                    return None  # two candidates: not determined
                found = (monomial, coeff)
            else:
                rest = expr.add(rest, expr.mul(coeff, monomial))
        if found is None or not self._is_declared(rest):
            return None
        g, coeff = found
        if isinstance(rest, expr.DimExpr) and g.name in rest.symbols():
            return None  # g also occurs inside a function term: not solved for g
        solution = expr.sub(target, rest) if coeff == 1 else expr.sub(rest, target)
        if isinstance(solution, expr.DimExpr) and solution.is_unknown:
            return None
        return g, solution

    def round(
        self, classes: list[list[Dim]]
    ) -> tuple[dict[expr.DimExpr, Dim], list[tuple[Dim, Dim]], list, list]:
        mapping: dict[expr.DimExpr, Dim] = {}
        solved: list[tuple[Dim, Dim]] = []
        implied: list[tuple[Dim, ...]] = []
        contradictions: list[tuple[Dim, ...]] = []
        for members in classes:
            names_and_ints = [
                m
                for m in members
                if isinstance(m, int) or (m.is_symbol and m.name not in self.renamable)
            ]
            if len(names_and_ints) >= 2:
                implied.append(tuple(names_and_ints))
            if len({m for m in members if isinstance(m, int)}) > 1:
                contradictions.append(tuple(members))
                continue
            target = self.target(members)
            if target is None:
                continue
            for member in members:
                if self.is_key(member, target):
                    mapping[member] = target  # type: ignore[index]
                    pair = self.solve(member, target)
                    if pair is not None:
                        solved.append(pair)
        return mapping, solved, implied, contradictions


def _joins_nothing(classes: _UnionFind, edges: list[tuple[Dim, Dim]]) -> bool:
    """True when every edge links two members of one class (the classes stay as they are)."""
    parent = classes.parent
    find = classes.find
    return all(a in parent and b in parent and find(a) == find(b) for a, b in edges)


def _valid(d: Dim) -> bool:
    return isinstance(d, int) or not d.is_unknown


def plan_renames(
    equalities: Iterable[tuple[Dim, Dim]],
    *,
    renamable: Iterable[str],
    input_symbols: Iterable[str] = (),
    preferred: Iterable[str] | None = None,
    ban_prefix: str | None = "DYN",
) -> RenamePlan:
    """Closes ``equalities`` and maps renamable members of each class to its target.

    Args:
        equalities: Pairs known equal (e.g. ``ShapesContext.constraint_dims()``).
        renamable: Names of the symbols the engine minted (may be renamed).
        input_symbols: Symbols declared on the main graph's inputs.
        preferred: Names a target may use (declared on the main graph); ``None``:
            every name that is not renamable. A name declared only inside a subgraph
            (a loop body annotation) means nothing outside it: never a target.
        ban_prefix: Names starting with it are never targets (``None``: no ban).

    Returns:
        The plan (see :class:`RenamePlan` and the module docstring).
    """
    key = (
        tuple(equalities),
        frozenset(renamable),
        frozenset(input_symbols),
        None if preferred is None else frozenset(preferred),
        ban_prefix,
    )
    plan = _remembered(_PLANS, key, _plan)
    # The mapping is a dict: each caller gets its own.
    return RenamePlan(dict(plan.mapping), plan.implied, plan.contradictions)


#: Plans of recent runs by :func:`plan_renames`'s arguments (dims are interned, so equal
#: arguments are the same dims): a model inferred again plans with one lookup.
_PLANS: dict[tuple, RenamePlan] = {}
#: Entries each memo of this module keeps.
_MAX_MEMO = 64


def _remembered(memo: dict, key: tuple, compute: Callable):
    """``compute(*key)``, kept in ``memo`` (at most :data:`_MAX_MEMO`, the oldest dropped)."""
    found = memo.get(key)
    if found is None:
        found = compute(*key)
        if len(memo) >= _MAX_MEMO:
            memo.pop(next(iter(memo), None), None)  # the oldest
        memo[key] = found
    return found


def _plan(
    equalities: tuple[tuple[Dim, Dim], ...],
    renamable: frozenset[str],
    input_symbols: frozenset[str],
    preferred: frozenset[str] | None,
    ban_prefix: str | None,
) -> RenamePlan:
    """:func:`plan_renames` (arguments as its memo key)."""
    planner = _Planner(renamable, input_symbols, preferred, ban_prefix)
    edges: list[tuple[Dim, Dim]] = [(a, b) for a, b in equalities if _valid(a) and _valid(b)]
    known_edges = set(edges)
    mapping: dict[expr.DimExpr, Dim] = {}
    implied: list = []
    contradictions: list = []
    for _ in range(_MAX_ROUNDS):
        uf = _UnionFind()
        for a, b in edges:
            uf.union(a, b)
        classes = uf.classes()
        new_mapping, solved, implied, contradictions = planner.round(classes)
        new_edges = list(solved)
        replacer = expr.SubexpressionReplacer(new_mapping)  # one for every member
        for members in classes:
            for member in members:
                rewritten = replacer.replace(member)
                if _valid(rewritten) and _order(rewritten) != _order(member):
                    new_edges.append((member, rewritten))
        new_edges = [e for e in new_edges if e not in known_edges]
        if _joins_nothing(uf, new_edges):
            # Edges within the classes give the same classes, hence the same round
            # again: this mapping is the stable one (no round to confirm it).
            mapping = new_mapping
            break
        mapping = new_mapping
        known_edges.update(new_edges)
        edges.extend(new_edges)
    else:
        logger.debug("rename planning stopped after %d rounds", _MAX_ROUNDS)
    return RenamePlan(mapping, tuple(implied), tuple(contradictions))


def ambiguous_labels(
    equalities: Iterable[tuple[Dim, Dim]],
    *,
    renamable: Iterable[str],
    input_symbols: Iterable[str],
    unverified: Iterable[str] = (),
) -> dict[str, tuple[Dim, ...]]:
    """Output-only names that the anchors equate to sizes which differ.

    A *label* is a bare declared name no graph input declares (``K`` of ``y: [B, K]``,
    ``TopKtopk_values_dim_1`` of a TorchScript export): it names sizes, it constrains no
    input. Every declared output dim records ``label == inferred``; when one label (or a
    group of labels declared equal) is recorded equal to sizes of two classes that hold
    ints or expressions of declared names (``L`` and ``2*L``), the author claims a size
    equality the inputs alone do not give, and the label is not used: a run with
    ``L >= 1`` makes the two outputs differ, whatever the label says. Sizes equal without
    the labels (``total_seq_len`` an input, ``past_seq_len+seq_len`` on an output) are one
    class and stay an implied equality.

    A size only the engine names (a data-dependent count, an opaque float size: a symbol
    of ``renamable``) and a size inference could not compute at all (a label of
    ``unverified``: declared where the inferred rank or dim is unknown) prove nothing
    against a declared size and nothing for it: a label naming one of them and a
    computed size claims an equality nothing checks, and is not used either; so does a
    label naming two of them (one name on two ``NonZero`` counts).
    ``unverified`` is read only when some label has a partner (it may be a generator).

    Returns:
        ``{label: the differing sizes}`` for every label of an ambiguous group.
    """
    renamable = frozenset(renamable)
    inputs = frozenset(input_symbols)

    def is_label(d: Dim) -> bool:
        return (
            isinstance(d, expr.DimExpr)
            and d.is_symbol
            and d.name not in renamable
            and d.name not in inputs
        )

    sizes = _UnionFind()  # the classes the equalities give without the labels
    labels = _UnionFind()  # labels declared equal to each other
    partners: dict[Dim, list[Dim]] = collections.defaultdict(list)
    for a, b in equalities:
        if not (_valid(a) and _valid(b)):
            continue
        label_a, label_b = is_label(a), is_label(b)
        if label_a and label_b:
            labels.union(a, b)
        elif label_a:
            partners[a].append(b)
        elif label_b:
            partners[b].append(a)
        else:
            sizes.union(a, b)
    if not partners:
        return {}
    unverified = frozenset(unverified)  # read only now: it may be a generator
    for found in partners.values():
        for partner in found:
            sizes.find(partner)  # a size only a label names is a class of its own
    valued: dict[Dim, Dim] = {}  # class root -> its first int or expression of declared names
    for members in sizes.classes():
        for m in members:
            if isinstance(m, int) or not (m.symbols() & renamable):
                valued[sizes.find(m)] = m
                break
    named: dict[Dim, dict[Dim, Dim]] = collections.defaultdict(dict)  # group -> valued roots
    minted: dict[Dim, dict[Dim, Dim]] = collections.defaultdict(dict)  # group -> other roots
    for label, found in partners.items():
        group = labels.find(label)
        for partner in found:
            root = sizes.find(partner)
            if root in valued:
                named[group].setdefault(root, valued[root])
            else:
                minted[group].setdefault(root, partner)
    result: dict[str, tuple[Dim, ...]] = {}
    for members in labels.classes():  # every label found above is in one
        group = labels.find(members[0])
        differing = named.get(group, {})
        counts = minted.get(group, {})
        unchecked = counts or any(m.name in unverified for m in members)  # type: ignore[union-attr]
        # TorchScript's ``Uniqueout4_dim_0`` on a unique count and on the batch; one
        # label on two counts (two NonZero outputs declared ``[1, k]``): nothing says
        # they are equal, and onnxruntime gives 3 and 4.
        two_counts = sum(1 for c in counts.values() if c.is_symbol) >= 2  # type: ignore[union-attr]
        if len(differing) >= 2 or (differing and unchecked) or two_counts:
            sizes_named = [*differing.values(), *counts.values()]
            for label in members:
                result[label.name] = tuple(sorted(sizes_named, key=_order))  # type: ignore[union-attr]
    return result


def _forces_a_size_to_zero(a: Dim, b: Dim) -> bool:
    """True when ``a == b`` (linear in sizes, all ``>= 0``) holds only with a size 0, or never.

    ``L == 2*L`` (``L = 0``), ``seq == past+seq`` (``past = 0``), ``3 == 2*L + 5``: every
    term of ``a - b`` has one sign, so each must vanish. ``total == past+seq`` has terms of
    both signs and is a relation between sizes, not a degenerate one.
    """
    diff = expr.sub(a, b)
    if isinstance(diff, int):
        return diff != 0
    if diff.is_unknown:
        return False
    monomials, constant = expr.coefficients(diff)
    if not monomials or not all(m.is_symbol for m in monomials):
        return False
    signs = {c > 0 for c in monomials.values()}
    if len(signs) != 1:
        return False
    return constant == 0 or (constant > 0) in signs


def degenerate_classes(
    equalities: Iterable[tuple[Dim, Dim]], *, renamable: Iterable[str]
) -> list[frozenset[Dim]]:
    """Classes whose declared members are equal only where a size is 0 (or never).

    An output declared with an input's size name where it has another size (``b: [B, L]``
    of ``Concat(x, x)``, ``2*L`` elements; a cache output declared ``seq_len`` where it
    holds ``past_seq_len+seq_len``) claims ``L == 2*L``: false in every run with ``L >=
    1``, which onnxruntime makes (it does not check declared output shapes). Such a class
    is not used for renaming, and the declared dims in it are the false ones.
    """
    key = (tuple(equalities), frozenset(renamable))
    return list(_remembered(_DEGENERATE, key, _degenerate_classes))


#: :func:`degenerate_classes` of recent runs by its arguments (as :data:`_PLANS`).
_DEGENERATE: dict[tuple, tuple[frozenset[Dim], ...]] = {}


def _degenerate_classes(
    equalities: tuple[tuple[Dim, Dim], ...], renamable: frozenset[str]
) -> tuple[frozenset[Dim], ...]:
    classes = _UnionFind()
    for a, b in equalities:
        if _valid(a) and _valid(b):
            classes.union(a, b)
    found: list[frozenset[Dim]] = []
    for members in classes.classes():
        valued = [m for m in members if isinstance(m, int) or not (m.symbols() & renamable)]
        if any(
            _forces_a_size_to_zero(a, b)
            for i, a in enumerate(valued)
            for b in valued[i + 1 :]
            if not (isinstance(a, int) and isinstance(b, int))  # the planner's contradiction
        ):
            found.append(frozenset(members))
    return tuple(found)
