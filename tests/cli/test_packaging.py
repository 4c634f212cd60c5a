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


def _pyproject_floors() -> dict[str, str]:
    pyproject = (ROOT / "pyproject.toml").read_text()
    floors = {}
    for name, version in re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)"', pyproject):
        floors.setdefault(name.lower(), version)
    return floors


def _pinned_floors() -> dict[str, str]:
    text = (ROOT / ".ci" / "floors.txt").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([0-9][0-9.]*)\s*$", text, re.M)
    return {name.lower(): version for name, version in pins}


def _same_release(declared: str, pinned: str) -> bool:
    # ">=1.23" is honest for a pin "1.23.0": the declared floor is the pinned release.
    a = [int(x) for x in declared.split(".")]
    b = [int(x) for x in pinned.split(".")]
    width = max(len(a), len(b))
    return a + [0] * (width - len(a)) == b + [0] * (width - len(b))


def test_declared_floors_are_the_tested_floors():
    # CI installs .ci/floors.txt and runs the suite: pyproject must declare exactly those.
    declared, pinned = _pyproject_floors(), _pinned_floors()
    assert set(pinned) == {"onnx", "onnx-ir", "onnxscript", "numpy", "onnxruntime"}
    for name, version in pinned.items():
        assert name in declared, f"pyproject declares no floor for {name}"
        assert _same_release(declared[name], version), (name, declared[name], version)


def test_compatibility_page_names_the_tested_floors():
    page = (ROOT / "docs" / "compatibility.md").read_text()
    rows = {
        cells[0].lower(): cells[1]
        for line in page.splitlines()
        if line.startswith("| ") and not line.startswith("| package")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    for name, version in _pinned_floors().items():
        assert rows.get(name, "").startswith(version), (name, rows.get(name), version)


def test_ci_builds_the_wheel_and_runs_the_floors():
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"pip\" wheel .*-w .* \.$", run, re.M), "no `pip wheel .` step"
    assert 'find_spec("onnxruntime") is None' in run  # a plain install has no onnxruntime
    assert "-c .ci/floors.txt" in run
    assert run.count("run_suite ") >= 2  # the README's test command, then the floors
