"""Packaging (issue 13): one version, license, typing marker, light imports."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import onnx_symdims

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(done.stdout.split())


def test_the_version_is_set_in_one_place():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M)
    assert 'version = { attr = "onnx_symdims.__version__" }' in pyproject
    assert not re.search(r'^version = "', pyproject, re.M)
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", onnx_symdims.__version__)


def test_license_changelog_and_typing_marker_are_shipped():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()
    assert (ROOT / "onnx_symdims" / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def test_verify_extra_brings_onnxruntime():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^verify = \["onnxruntime', pyproject, re.M)
    dependencies = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert "onnxruntime" not in dependencies


def test_package_import_and_cheap_commands_stay_light():
    heavy = {"onnx_ir", "onnx", "numpy", "onnxruntime"}
    assert not heavy & _modules_after("import onnx_symdims")
    assert not heavy & _modules_after(
        "from onnx_symdims import cli\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['simplify', 'a+a'])\n"
        "    with contextlib.suppress(SystemExit):\n"
        "        cli.main(['--help'])"
    )


def test_lazy_names_resolve():
    for name in onnx_symdims.__all__:
        assert getattr(onnx_symdims, name) is not None
    assert set(onnx_symdims.__all__) <= set(dir(onnx_symdims))
