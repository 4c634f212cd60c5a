"""Every rule name ``optimize`` prints under ``rules fired:`` is in docs/optimize.md's table."""

from __future__ import annotations

import re
from pathlib import Path

import onnx_ir as ir
import pytest

from onnx_symdims.rewrite import OptimizePass
from tests.cli._cli_testing import example_path

ROOT = Path(__file__).resolve().parents[2]


def _documented_rules() -> set[str]:
    text = (ROOT / "docs" / "optimize.md").read_text(encoding="utf-8")
    section = text.split("## 2. The rules", 1)[1].split("## 3.", 1)[0]
    names: set[str] = set()
    for row in re.findall(r"^\| (.+?) \|", section, re.M):
        names |= set(re.findall(r"`([A-Za-z_.]+)`", row))
    return names


@pytest.mark.parametrize(
    "model",
    [example_path(), str(ROOT / "tests" / "data" / "bert_dynamo.onnx")],
    ids=lambda p: Path(p).stem,
)
def test_every_fired_rule_is_in_the_rules_table(model):
    documented = _documented_rules()
    assert {
        "SlicesToSplit",
        "MaterializeReshapeTarget",
        "ProvenValues.rebuild_chain",
    } <= documented
    fired = OptimizePass()(ir.load(model)).fired
    assert fired
    undocumented = [
        name
        for name in fired
        if name not in documented
        and name.split(".")[0].removesuffix("Commuted") not in documented
    ]
    assert not undocumented, f"docs/optimize.md's table lacks {undocumented}"
