"""Diagnostics recorded while inferring shapes, and the errors raised in strict mode."""

from __future__ import annotations

__all__ = ["Diagnostic", "NodeInferenceFailure", "Severity", "ShapeInferenceError"]

import dataclasses
import logging
from typing import Literal

logger = logging.getLogger(__name__)

Severity = Literal["error", "warning", "info"]


# The methods ``@dataclasses.dataclass(frozen=True)`` would generate are written out (same
# signature, repr, equality, hash and immutability): generating them costs about 1 ms of
# every process's first call (the cold start). It stays a dataclass for
# ``dataclasses.fields`` and ``dataclasses.replace``.
@dataclasses.dataclass(init=False, repr=False, eq=False)
class Diagnostic:
    """One finding about one node (or about the graph when ``op_type`` is empty).

    Immutable, compared and hashed by value.

    Attributes:
        node_name: Name of the node (may be empty for unnamed nodes).
        op_type: Operator type of the node, or ``""`` for graph-level findings.
        domain: Operator domain (``""`` is ai.onnx).
        severity: ``"error"`` (inference of the node failed or a conflict was found),
            ``"warning"`` (a degraded but sound result, e.g. no hook and no ONNX
            inference) or ``"info"``.
        message: Human readable explanation.
    """

    node_name: str
    op_type: str
    domain: str
    severity: Severity
    message: str

    def __init__(
        self, node_name: str, op_type: str, domain: str, severity: Severity, message: str
    ) -> None:
        init = object.__setattr__
        init(self, "node_name", node_name)
        init(self, "op_type", op_type)
        init(self, "domain", domain)
        init(self, "severity", severity)
        init(self, "message", message)

    def _fields(self) -> tuple[str, str, str, str, str]:
        return (self.node_name, self.op_type, self.domain, self.severity, self.message)

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
            f"{type(self).__qualname__}(node_name={self.node_name!r}, "
            f"op_type={self.op_type!r}, domain={self.domain!r}, "
            f"severity={self.severity!r}, message={self.message!r})"
        )

    def __str__(self) -> str:
        where = f"{self.domain}::{self.op_type}" if self.domain else self.op_type
        if self.node_name:
            where = f"{where} ({self.node_name!r})" if where else repr(self.node_name)
        return f"[{self.severity}] {where or '<graph>'}: {self.message}"


class ShapeInferenceError(RuntimeError):
    """Raised in strict mode when a diagnostic of severity ``error`` is recorded.

    Attributes:
        diagnostic: The diagnostic that triggered the error.
    """

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


class NodeInferenceFailure(Exception):
    """Raised by :meth:`NodeContext.fail` inside an op hook; caught by the driver.

    The driver turns it into an ``error`` diagnostic for the node and gives the
    node's outputs unknown shapes, so a malformed node never crashes the pass.
    """
