"""The op-hook registry: ``(domain, op_type, since_version) -> hook``.

A hook infers one node's outputs::

    from onnx_symdims.ops._registry import register
    from onnx_symdims.shapes import NodeContext

    @register("", "Reshape", since=14)
    def infer_reshape(ctx: NodeContext, node: ir.Node) -> None: ...

For a model importing opset ``v`` of a domain, the hook with the largest ``since <= v``
is used; the choice is resolved once per ``(domain, op_type, opset)`` and cached. The
domain ``""`` and ``"ai.onnx"`` are the same. Family modules (``onnx_symdims/ops/*.py``
without a leading underscore) are imported on first lookup, so a new family registers
itself just by existing; a lookup imports only the families that ``_family_index.py``
names for its op (``tools/gen_family_index.py`` writes it; unknown ops load them all).
"""

from __future__ import annotations

__all__ = [
    "Hook",
    "RegisteredOp",
    "Registry",
    "lookup",
    "register",
    "registered_ops",
    "registry",
]

import bisect
import dataclasses
import importlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx_ir as ir

    from onnx_symdims.shapes import NodeContext

logger = logging.getLogger(__name__)

#: ``def hook(ctx: NodeContext, node: ir.Node) -> None``
Hook = Callable[["NodeContext", "ir.Node"], None]


def normalize_domain(domain: str) -> str:
    """``"ai.onnx"`` is the default domain ``""``; other domains are kept."""
    return "" if domain == "ai.onnx" else domain


# The methods ``@dataclasses.dataclass(frozen=True)`` would generate are written out (same
# signature, repr, equality, hash and immutability): generating them costs every
# process's first call (the cold start). It stays a dataclass (``dataclasses.fields``).
@dataclasses.dataclass(init=False, repr=False, eq=False)
class RegisteredOp:
    """One registered hook: the op and the first opset version it handles.

    Immutable, compared and hashed by value.
    """

    domain: str
    op_type: str
    since: int
    hook: Hook

    def __init__(self, domain: str, op_type: str, since: int, hook: Hook) -> None:
        init = object.__setattr__
        init(self, "domain", domain)
        init(self, "op_type", op_type)
        init(self, "since", since)
        init(self, "hook", hook)

    def _fields(self) -> tuple[str, str, int, Hook]:
        return (self.domain, self.op_type, self.since, self.hook)

    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"{type(self).__qualname__}(domain={self.domain!r}, op_type={self.op_type!r}, "
            f"since={self.since!r}, hook={self.hook!r})"
        )


class Registry:
    """Hooks per ``(domain, op_type)``, sorted by ``since`` version."""

    def __init__(self, package: str | None = None) -> None:
        self._package = package
        self._loaded = package is None
        #: ``(module, error)`` for family modules that failed to import.
        self.load_errors: list[tuple[str, str]] = []
        self._since: dict[tuple[str, str], list[int]] = {}
        self._hooks: dict[tuple[str, str], list[Hook]] = {}
        self._cache: dict[tuple[str, str, int | None], Hook | None] = {}
        self._imported: set[str] = set()  # families imported one by one (by the index)
        #: Incremented by every registration: what a lookup answered before may change.
        self.version = 0

    def register(
        self, domain: str, op_type: str | Iterable[str], *, since: int = 1
    ) -> Callable[[Hook], Hook]:
        """Decorator registering a hook for ``op_type`` (or several) from opset ``since``.

        Raises:
            ValueError: the same ``(domain, op_type, since)`` is registered twice.
        """
        op_types = (op_type,) if isinstance(op_type, str) else tuple(op_type)
        domain = normalize_domain(domain)

        def decorator(hook: Hook) -> Hook:
            # Families register first, so that a user's duplicate fails here, loudly,
            # instead of later breaking a family's import. A family registering while it
            # is imported does not load the others: one of them may import from this
            # half-initialized module (they all load on the first lookup).
            if self._package is None or not hook.__module__.startswith(f"{self._package}."):
                self._ensure_loaded()
            for op in op_types:
                key = (domain, op)
                versions = self._since.setdefault(key, [])
                hooks = self._hooks.setdefault(key, [])
                if since in versions:
                    raise ValueError(
                        f"{domain or 'ai.onnx'}::{op} since {since} registered twice"
                    )
                index = bisect.bisect(versions, since)
                versions.insert(index, since)
                hooks.insert(index, hook)
            self.invalidate()
            return hook

        return decorator

    def invalidate(self) -> None:
        """Forgets every lookup answered so far, here and in the callers that cache them.

        :meth:`register` calls it; so must code that edits the tables directly (tests
        that take a hook out for a while).
        """
        self._cache.clear()
        self.version += 1

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        # Imported here: the family index spares most processes this walk (cold start).
        import pkgutil

        package = importlib.import_module(self._package)  # type: ignore[arg-type]
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = f"{self._package}.{info.name}"
            if module in self._imported:
                continue  # imported (or failed, and recorded) by _load_families_of
            self._imported.add(module)
            try:
                importlib.import_module(module)
            except Exception as e:  # one broken family must not disable the others
                logger.exception("cannot import op family %s", module)
                self.load_errors.append((module, repr(e)))

    def _load_families_of(self, op_key: tuple[str, str]) -> None:
        """Imports the families that register ``op_key`` (all of them when not indexed).

        The index (``_family_index.py``, generated, checked by a test) keeps the first call
        in a fresh process from importing every family; an op it does not name, such as
        one only a user registers, loads them all as before.
        """
        from onnx_symdims.ops._family_index import FAMILIES

        modules = FAMILIES.get(op_key)
        if modules is None:
            self._ensure_loaded()
            return
        for name in modules:
            module = f"{self._package}.{name}"
            if module in self._imported:
                continue
            self._imported.add(module)
            try:
                importlib.import_module(module)
            except Exception as e:  # one broken family must not disable the others
                logger.exception("cannot import op family %s", module)
                self.load_errors.append((module, repr(e)))

    def lookup(self, domain: str, op_type: str, opset: int | None) -> Hook | None:
        """The hook for ``op_type`` at ``opset`` (``None``: latest), or ``None``."""
        key = (domain, op_type, opset)
        try:
            return self._cache[key]
        except KeyError:
            pass
        op_key = (normalize_domain(domain), op_type)
        if not self._loaded:
            self._load_families_of(op_key)
        versions = self._since.get(op_key)
        hook = None
        if versions:
            index = len(versions) if opset is None else bisect.bisect(versions, opset)
            if index > 0:
                hook = self._hooks[op_key][index - 1]
        self._cache[key] = hook
        return hook

    def registered_ops(self) -> list[RegisteredOp]:
        """Every registration, sorted by domain, op type and version."""
        self._ensure_loaded()
        return [
            RegisteredOp(domain, op, since, hook)
            for (domain, op), versions in sorted(self._since.items())
            for since, hook in zip(versions, self._hooks[(domain, op)])
        ]


registry = Registry("onnx_symdims.ops")
register = registry.register
lookup = registry.lookup
registered_ops = registry.registered_ops


def registry_version() -> int:
    """A number that changes whenever a hook is registered (callers caching lookups)."""
    return registry.version
