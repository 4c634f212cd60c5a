"""The documentation works as written (issue 13, "Docs").

Every code block of ``README.md`` and ``docs/*.md`` fenced as ```` ```python ```` runs here,
each in a fresh namespace, in a temporary working directory holding the bundled example as
``model.onnx`` (the name the docs use). The fence convention, for authors of the docs:

- ```` ```python ````: executed; it must not raise.
- ```` ```python no-run ````: shown as Python, never executed (needs torch, or a fragment
  such as a hook skeleton); say why in the text around it.
- ```` ```python file=NAME.py ````: not executed, written to ``NAME.py`` in the working
  directory of every later block of the same document (so a later block can import it); a
  ``file=test_*.py`` block is also run with pytest and must pass.
- any other language (``bash``, ``text``, none): not executed. The options of every
  ``onnx-symdims`` command line in a ``bash`` block must exist.

Also checked: the ``>>>`` examples of the package's docstrings (doctest), the generated API
reference (``tools/build_api_docs.py``) covers every public name, and no doc imports a
private module or names a repository file that does not exist.
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import importlib.util
import json
import os
import pathlib
import pkgutil
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import onnx_symdims

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MODEL = ROOT / "onnx_symdims" / "data" / "tiny_decoder.onnx"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block of a markdown file."""

    doc: pathlib.Path
    line: int  # 1-based line of the opening fence
    language: str
    flags: tuple[str, ...]
    code: str

    @property
    def file_name(self) -> str | None:
        for flag in self.flags:
            if flag.startswith("file="):
                return flag.removeprefix("file=")
        return None

    @property
    def runs(self) -> bool:
        return self.language == "python" and not self.flags

    def label(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def read_blocks(doc: pathlib.Path) -> list[Block]:
    """The fenced blocks of ``doc``, in order (indented fences in lists included)."""
    blocks: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        words = opening["info"].split()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and not lines[j].strip().strip(fence[0])
        ):
            body.append(lines[j].removeprefix(indent))
            j += 1
        if j == len(lines):
            raise AssertionError(f"{doc.name}:{i + 1}: unclosed code fence")
        language = words[0].lower() if words else ""
        blocks.append(Block(doc, i + 1, language, tuple(words[1:]), "\n".join(body) + "\n"))
        i = j + 1
    return blocks


ALL_BLOCKS = [block for doc in DOCS for block in read_blocks(doc)]
PYTHON_BLOCKS = [b for b in ALL_BLOCKS if b.language == "python"]


def _restorable_registry():
    """A snapshot of the op registry, so a doc that registers a hook leaves no trace."""
    from onnx_symdims.ops import _registry

    registry = _registry.registry
    registry.registered_ops()  # load every family before the snapshot
    since = {key: list(v) for key, v in registry._since.items()}
    hooks = {key: list(v) for key, v in registry._hooks.items()}

    def restore() -> None:
        registry._since.clear()
        registry._since.update(since)
        registry._hooks.clear()
        registry._hooks.update(hooks)
        registry.invalidate()

    return restore


@pytest.fixture
def doc_workdir(tmp_path, monkeypatch):
    """A working directory with ``model.onnx``; the registry and modules restored after."""
    shutil.copy(MODEL, tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = set(sys.modules)
    restore = _restorable_registry()
    yield tmp_path
    restore()
    for name in set(sys.modules) - modules:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        if module_file.startswith(str(tmp_path)):
            del sys.modules[name]  # a doc's own module (my_ops) must not leak


def _write_earlier_files(block: Block, workdir: pathlib.Path) -> None:
    for other in read_blocks(block.doc):
        if other.line >= block.line:
            break
        if other.language == "python" and other.file_name:
            (workdir / other.file_name).write_text(other.code, encoding="utf-8")


def test_the_docs_have_python_blocks_and_all_flags_are_known():
    assert len([b for b in PYTHON_BLOCKS if b.runs]) >= 5
    for block in PYTHON_BLOCKS:
        unknown = [f for f in block.flags if f != "no-run" and not f.startswith("file=")]
        assert not unknown, f"{block.label()}: unknown fence flags {unknown}"


@pytest.mark.parametrize(
    "block", [b for b in PYTHON_BLOCKS if b.runs], ids=lambda b: b.label()
)
def test_python_block_runs_as_written(block: Block, doc_workdir):
    _write_earlier_files(block, doc_workdir)
    code = compile(block.code, f"{block.label()}", "exec")
    namespace = {"__name__": "__doc_block__"}
    exec(code, namespace)  # a fresh namespace per block, as a reader's new script


@pytest.mark.parametrize(
    "block",
    [b for b in PYTHON_BLOCKS if (b.file_name or "").startswith("test_")],
    ids=lambda b: b.label(),
)
def test_python_test_file_block_passes(block: Block, doc_workdir):
    _write_earlier_files(block, doc_workdir)
    (doc_workdir / block.file_name).write_text(block.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", block.file_name],
        cwd=doc_workdir,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(doc_workdir)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_no_run_blocks_still_parse():
    # A block kept out of the run must at least be Python (fragments with ``...`` are).
    for block in PYTHON_BLOCKS:
        if not block.runs:
            compile(block.code, block.label(), "exec")


# --- command lines ---------------------------------------------------------------------


def _subcommand_options() -> dict[str, set[str]]:
    from onnx_symdims.cli import _parser

    parser = _parser()
    (sub,) = (a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    top = {s for a in parser._actions for s in a.option_strings}
    return {
        name: top | {s for a in sp._actions for s in a.option_strings}
        for name, sp in sub.choices.items()
    }


def _command_lines() -> list[tuple[str, list[str]]]:
    """``(block, words after the command)`` of each ``onnx-symdims`` call in a bash block."""
    found = []
    for block in ALL_BLOCKS:
        if block.language not in ("bash", "sh", "shell", "console"):
            continue
        for line in block.code.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip().removeprefix("$ ")
            for part in re.split(r"&&|;|\|", line):
                words = shlex.split(part)
                for k, word in enumerate(words):
                    if os.path.basename(word) == "onnx-symdims":
                        found.append((block.label(), words[k + 1 :]))
                        break
                    if words[k + 1 : k + 3] == ["-m", "onnx_symdims"]:
                        found.append((block.label(), words[k + 3 :]))
                        break
    return found


def test_documented_command_lines_use_real_options():
    options = _subcommand_options()
    lines = _command_lines()
    assert len(lines) >= 3
    for label, words in lines:
        if not words or words[0].startswith("-"):
            continue  # `onnx-symdims --version`, `onnx-symdims` alone
        command, args = words[0], words[1:]
        assert command in options, f"{label}: no command {command!r}"
        for arg in args:
            if arg.startswith("--") or re.fullmatch(r"-[a-zA-Z]", arg):
                name = arg.split("=")[0]
                assert name in options[command], f"{label}: {command} has no {name}"


def test_documented_infer_command_runs(tmp_path):
    # The README's own command line, on the bundled model.
    shutil.copy(MODEL, tmp_path / "model.onnx")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnx_symdims",
            "infer",
            "model.onnx",
            "-o",
            "out.onnx",
            "--json",
            "report.json",
            "--verify",
            "3",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "out.onnx").exists() and (tmp_path / "report.json").exists()


# --- docstring examples ------------------------------------------------------------------


def _package_modules() -> list[str]:
    walked = pkgutil.walk_packages(onnx_symdims.__path__, "onnx_symdims.")
    return sorted(["onnx_symdims", *(info.name for info in walked)])


def _modules_with_examples() -> list[str]:
    with_examples = []
    for name in _package_modules():
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / name.replace(".", "/") / "__init__.py"
        if ">>>" in path.read_text(encoding="utf-8"):
            with_examples.append(name)
    return with_examples


@pytest.mark.parametrize("module_name", _modules_with_examples())
def test_docstring_examples(module_name: str, doc_workdir):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring examples of {module_name} fail"


# --- API reference -----------------------------------------------------------------------

PUBLIC_MODULES = [
    "onnx_symdims",
    "onnx_symdims.expr",
    "onnx_symdims.shapes",
    "onnx_symdims.ops",
    "onnx_symdims.passes",
    "onnx_symdims.rewrite",
    "onnx_symdims.verify",
]


def _load_tool():
    spec = importlib.util.spec_from_file_location(
        "build_api_docs", ROOT / "tools" / "build_api_docs.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_api_reference_covers_every_public_name(tmp_path):
    tool = _load_tool()
    assert tool.MODULES == PUBLIC_MODULES
    assert tool.main(["--out", str(tmp_path)]) == 0
    index = (tmp_path / "index.md").read_text(encoding="utf-8")
    for module_name in PUBLIC_MODULES:
        page = tmp_path / f"{module_name}.md"
        assert f"({page.name})" in index
        text = page.read_text(encoding="utf-8")
        names = importlib.import_module(module_name).__all__
        headings = set(re.findall(r"^### `([^`(]+)", text, re.M))
        missing = sorted(set(names) - headings)
        assert not missing, f"{page.name} lacks {missing}"


def test_api_reference_uses_the_docstrings(tmp_path):
    tool = _load_tool()
    tool.main(["--out", str(tmp_path)])
    text = (tmp_path / "onnx_symdims.expr.md").read_text(encoding="utf-8")
    from onnx_symdims import expr

    first_line = expr.simplify_expression.__doc__.strip().splitlines()[0]
    assert first_line in text


# --- what the docs may cite --------------------------------------------------------------

_PRIVATE_IMPORT = re.compile(
    r"(?:from\s+onnx_symdims(?:\.\w+)*\._\w+\s+import|import\s+onnx_symdims(?:\.\w+)*\._\w+)"
)
_PATH = re.compile(r"`((?:\.\./)?[\w.-]+(?:/[\w.*-]+)+/?)`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_docs_import_no_private_module(doc: pathlib.Path):
    hits = [
        f"{block.label()}: {match.group(0)}"
        for block in read_blocks(doc)
        if block.language == "python"
        for match in _PRIVATE_IMPORT.finditer(block.code)
    ]
    assert not hits


def _cited_paths(doc: pathlib.Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.M | re.S)  # paths in prose only
    return [m.group(1) for m in _PATH.finditer(text)]


def _exists(path: str, doc: pathlib.Path) -> bool:
    if path.startswith("../"):
        return False  # outside the repository: never cite it
    if "*" in path:
        return bool(list(ROOT.glob(path)))
    parts = path.rstrip("/").split("/")
    if re.fullmatch(r"[A-Z]+(\.\w+)?", parts[-1]):  # a placeholder: `tests/data/X.onnx`
        path = "/".join(parts[:-1])
    # A path is relative to the repository root, or to the document (docs/x.md → x.md).
    return (ROOT / path).exists() or (doc.parent / path).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_docs_cite_only_files_the_repository_has(doc: pathlib.Path):
    cited = [p for p in _cited_paths(doc) if _looks_like_a_repo_path(p)]
    missing = [p for p in cited if not _exists(p, doc)]
    assert not missing, f"{doc.name} cites {missing}"


def _looks_like_a_repo_path(path: str) -> bool:
    # `onnx_symdims/rewrite/`, `tests/data/X.onnx`, `docs/api/`; not `1/2`, `a/b` algebra
    # or `--flag=a/b`.
    first = path.removeprefix("../").split("/")[0]
    return first in {
        "onnx_symdims",
        "tests",
        "docs",
        "tools",
        "benchmarks",
        ".ci",
        "shared",
    } or (path.startswith("../"))


_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_relative_links_point_to_files_that_exist(doc: pathlib.Path):
    # `[compatibility.md](compatibility.md)`, `[cli.md](cli.md#errors-and-exit-codes)`.
    text = doc.read_text(encoding="utf-8")
    text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.M | re.S)
    missing = [
        target
        for target in (m.group(1).split("#")[0] for m in _LINK.finditer(text))
        if target and not (doc.parent / target).exists()
    ]
    assert not missing, f"{doc.name} links to {missing}"


def test_readme_starts_with_the_two_quick_start_commands():
    # .ci/run runs these two lines verbatim: they install and test, in this order.
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## Quick start.*?^```[a-z]*\n(.*?)^```", text, re.S | re.M).group(1)
    lines = [ln for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) == 2, lines
    assert '".[verify]"' in lines[0] and "onnx-symdims" in lines[0]
    assert '".[test]"' in lines[1] and "pytest" in lines[1]


def test_measurements_reproduce_from_the_repository_alone(tmp_path, monkeypatch, capsys):
    # Without the dev corpus (shared/, beside the repository) the README's scoring command
    # falls back to the committed models and says so; onnx-symdims has no wrong dim there.
    spec = importlib.util.spec_from_file_location(
        "score_dev_corpus", ROOT / "benchmarks" / "score_dev_corpus.py"
    )
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    monkeypatch.chdir(tmp_path)
    assert score.main(["--corpus", str(tmp_path / "no_corpus")]) == 0
    out, err = capsys.readouterr()
    assert "no dev corpus at" in err and "committed models" in err
    rows = [line for line in out.splitlines() if "% (" in line]
    assert len(rows) >= 20, out
    assert "onnx-symdims total wrong dims: 0" in out
    # The scorer finds wrong dims: a model whose written dims are off by one scores wrong.
    models = score.committed_models()
    model_path, truth_path = models["bert_dynamo"]
    import onnx

    truth = json.loads(pathlib.Path(truth_path).read_text())
    inferred = score.TOOLS["onnx-symdims"](onnx.load(model_path))
    good = score.score_committed(truth, inferred)
    assert good["wrong"] == 0 and good["correct"] > 0
    for info in inferred.graph.value_info:
        for d in info.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                d.dim_value += 1
            elif d.dim_param:
                d.dim_param = f"({d.dim_param})+1"
    bad = score.score_committed(truth, inferred)
    assert bad["wrong"] > 0 and bad["correct"] < good["correct"]
