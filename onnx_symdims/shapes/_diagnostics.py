"""Diagnostics recorded while inferring shapes, and the errors raised in strict mode."""

from __future__ import annotations

__all__ = ["Diagnostic", "NodeInferenceFailure", "Severity", "ShapeInferenceError"]

import dataclasses
import logging
from typing import Literal

logger = logging.getLogger(__name__)

Severity = Literal["error", "warning", "info"]


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One finding about one node (or about the graph when ``op_type`` is empty).

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
