"""Loading and saving models with errors a person can read.

:func:`load_model` and :func:`save_model` wrap ``onnx_ir.load`` / ``onnx_ir.save``. Every
failure is a :class:`ModelLoadError` or :class:`ModelSaveError` whose message is one line
naming the file and the real cause: a missing file, a directory, an empty, text, JSON or
image file, a truncated protobuf, or the innermost reason onnx-ir gives (a duplicate
output name instead of ``SerdeError: Error calling _deserialize_graph with: g``).

:func:`save_model` also keeps external weights loadable: when the output goes to another
directory than the weights, they are written next to the output (onnx-ir would keep the
old relative ``location``, which then points nowhere); weights outside the model's
directory (``../w.bin``, which onnxruntime refuses) are a :class:`ModelSaveError`.
"""

from __future__ import annotations

__all__ = [
    "ModelFileError",
    "ModelLoadError",
    "ModelSaveError",
    "SaveResult",
    "bad_data_name",
    "duplicate_input",
    "load_model",
    "outside_weights",
    "save_model",
    "unreadable_initializer",
    "weights_file",
]

import dataclasses
import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx_ir as ir

logger = logging.getLogger(__name__)

#: Longest cause text kept in a message (onnx-ir causes can embed whole graphs).
_MAX_CAUSE = 400


class ModelFileError(Exception):
    """A model file could not be read or written.

    Attributes:
        path: The file.
        cause: What went wrong, one line.
    """

    def __init__(self, path: str | os.PathLike, cause: str) -> None:
        self.path = os.fspath(path)
        self.cause = cause
        super().__init__(f"{self.path}: {cause}")


class ModelLoadError(ModelFileError, ValueError):
    """The file is not a model onnx-ir can load (missing, empty, not ONNX, invalid)."""


class ModelSaveError(ModelFileError):
    """The model could not be serialized or written."""


def one_line(text: str, limit: int = _MAX_CAUSE) -> str:
    """``text`` with runs of whitespace collapsed, cut to ``limit`` characters."""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def root_cause(error: BaseException) -> str:
    """The innermost cause of ``error`` as ``Type: message`` on one line.

    onnx-ir wraps the reason in ``SerdeError`` layers naming its own functions; the
    innermost exception holds the reason a user can act on.
    """
    seen = {id(error)}
    while (inner := error.__cause__ or error.__context__) is not None and id(
        inner
    ) not in seen:
        seen.add(id(inner))
        error = inner
    message = str(error) or type(error).__name__
    kind = type(error).__name__
    return one_line(message if kind in ("ValueError", "SerdeError") else f"{kind}: {message}")


def _sniff(path: str) -> str | None:
    """What a non-ONNX file looks like, from its first bytes (``None``: no idea)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if head.startswith(b"\x89PNG"):
        return "a PNG image"
    if head[:3] == b"\xff\xd8\xff":
        return "a JPEG image"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "a JSON or text file"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text and all(c.isprintable() or c in "\r\n\t" for c in text):
        return "a text file"
    return None


def _os_cause(error: OSError) -> str:
    if isinstance(error, FileNotFoundError):
        return "no such file"
    if isinstance(error, IsADirectoryError):
        return "is a directory, not a model file"
    if isinstance(error, PermissionError):
        return "permission denied"
    return one_line(error.strerror or str(error))


def load_model(path: str | os.PathLike) -> ir.Model:
    """Loads a model with ``onnx_ir.load`` (external weights stay on disk).

    Raises:
        ModelLoadError: one line naming the file and the cause.
    """
    import onnx_ir as ir

    path = os.fspath(path)
    if os.path.isdir(path):
        raise ModelLoadError(path, "is a directory, not a model file")
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise ModelLoadError(path, _os_cause(e)) from e
    if size == 0:
        raise ModelLoadError(path, "empty file (0 bytes), not an ONNX model")
    try:
        # ``ir.load``'s steps, with the proto kept to see what onnx-ir drops.
        import onnx

        proto = onnx.load(path, load_external_data=False)
        model = ir.serde.deserialize_model(proto)
        ir.external_data.set_base_dir(model.graph, os.path.dirname(path))
    except OSError as e:
        raise ModelLoadError(path, _os_cause(e)) from e
    except Exception as e:  # protobuf DecodeError, onnx-ir SerdeError, ...
        looks = _sniff(path)
        if looks is not None:
            raise ModelLoadError(path, f"not an ONNX model (it looks like {looks})") from e
        if type(e).__name__ == "DecodeError":
            raise ModelLoadError(
                path, "not an ONNX model, or a truncated one (protobuf parse failed)"
            ) from e
        raise ModelLoadError(path, f"invalid model: {root_cause(e)}") from e
    graph = model.graph
    if not model.ir_version and not (len(graph) or graph.inputs or graph.outputs):
        # Many byte strings parse as *some* ModelProto; a model sets ir_version and a graph.
        looks = _sniff(path)
        what = f"it looks like {looks}" if looks else "no ir_version and an empty graph"
        raise ModelLoadError(path, f"not an ONNX model ({what})")
    if not model.ir_version:
        logger.warning("%s: the model does not set ir_version", path)
    _check_dropped(proto, path)
    if (duplicate := duplicate_input(model)) is not None:
        raise ModelLoadError(path, f"invalid model: {duplicate}")
    return model


def _check_dropped(proto, path: str) -> None:
    """Refuses what onnx-ir drops while loading and a written model would miss.

    A sparse initializer vanished: its node read a dangling value, the written model
    was one onnxruntime refuses ("Node input 'S' is not a graph input, initializer, or
    output of a previous node") and the command exited 0. Training info and quantization
    annotations are dropped with a warning: the inference graph is whole without them.
    Only the main graph is looked at: walking every node's attributes for subgraphs cost
    a 100k-node model a large part of its load time.
    """
    graph = proto.graph
    if graph.sparse_initializer:
        sparse = graph.sparse_initializer[0]
        name = sparse.values.name or sparse.indices.name
        raise ModelLoadError(
            path,
            f"sparse initializer {name!r} is not supported (onnx-ir drops sparse "
            "initializers; a written model would miss it): store it as a dense initializer",
        )
    if proto.training_info:
        logger.warning("%s: the model's training_info is dropped (not supported)", path)
    if graph.quantization_annotation:
        logger.warning(
            "%s: the graph's quantization_annotation is dropped (not supported)", path
        )


def duplicate_input(model: ir.Model) -> str | None:
    """A main-graph input name declared twice, as a sentence; ``None`` when all differ.

    onnx-ir loads ``(X, X)`` as two values of one name, and the optimizer's name fixing
    then renamed one to ``X_1`` (a declared input name changed, the nodes reading the
    other); onnxruntime refuses such a model ("Duplicate definition-site"), so it is one
    invalid model error instead. Subgraphs are not walked: that costs a 100k-node model
    about a second, and their inputs are no interface a user feeds.
    """
    seen: set[str | None] = set()
    for value in model.graph.inputs:
        if value.name in seen:
            return f"graph input {value.name!r} is declared twice"
        seen.add(value.name)
    return None


def deserialize_proto(proto) -> ir.Model:
    """``onnx_ir.serde.deserialize_model`` with the real cause in a :class:`ModelLoadError`."""
    import onnx_ir as ir

    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as e:
        raise ModelLoadError("<ModelProto>", f"invalid model: {root_cause(e)}") from e
    _check_dropped(proto, "<ModelProto>")
    if (duplicate := duplicate_input(model)) is not None:
        raise ModelLoadError("<ModelProto>", f"invalid model: {duplicate}")
    return model


@dataclasses.dataclass(frozen=True)
class SaveResult:
    """What :func:`save_model` wrote.

    Attributes:
        path: The model file.
        external_data: The external data file written, or ``None``.
        note: A sentence for the user about the weights, or ``""``.
    """

    path: str
    external_data: str | None = None
    note: str = ""


def _external_tensors(model: ir.Model) -> Iterator[ir.ExternalTensor]:
    import onnx_ir as ir

    for graph in (model.graph, *model.graph.subgraphs()):
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                yield value.const_value


def _data_path(tensor: ir.ExternalTensor) -> str:
    return os.path.realpath(os.path.join(tensor.base_dir or ".", tensor.location))


def bad_data_name(out_dir: str, name: str) -> str | None:
    """Why ``name`` cannot be the external data file of a model in ``out_dir`` (or ``None``).

    It is a file name relative to the model's directory that stays inside it (onnxruntime
    refuses ``../w.bin`` and absolute paths) in a directory that exists. ``.`` or a
    directory left a stray temporary directory of onnx-ir's beside the output and failed
    as "OUT: is a directory"; ``sub/w.data`` without ``sub`` as "OUT: no such file".
    """
    parts = re.split(r"[\\/]", name)
    if os.path.isabs(name) or ".." in parts:
        return (
            f"external data {name!r} must be a plain file name (inside the output's "
            "directory: onnxruntime refuses '../' and absolute paths)"
        )
    target = os.path.join(out_dir, name)
    if not parts[-1] or parts[-1] == "." or os.path.isdir(target):
        return f"external data {name!r} is a directory, not a file name"
    if not os.path.isdir(os.path.dirname(target)):
        return f"external data {name!r}: directory {os.path.dirname(target)} does not exist"
    return None


def outside_weights(model: ir.Model) -> str | None:
    """The first external weight stored outside its model's directory, as a sentence.

    onnxruntime refuses a ``location`` that leaves the model's directory (``../w.bin``:
    "External data path escapes model directory"), and onnx-ir refuses to read it (a
    path traversal guard), so such weights can be neither kept nor copied next to an
    output: saving kept ``../w.bin``, a model onnxruntime would not load.
    """
    return _outside(_external_tensors(model))


def _outside(external: Iterable[ir.ExternalTensor]) -> str | None:
    for tensor in external:
        location = tensor.location
        if os.path.isabs(location) or ".." in re.split(r"[\\/]", location):
            return (
                f"initializer {tensor.name!r} keeps its weights in {location!r}, outside "
                "the model's directory: onnxruntime and onnx-ir refuse such a path (move "
                "the file next to the model and give its plain name as the location)"
            )
    return None


def check_writable(path: str | os.PathLike) -> None:
    """Raises :class:`ModelSaveError` unless ``path`` can be created (checked up front)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ModelSaveError(path, "is a directory")
    if not os.path.isdir(directory):
        raise ModelSaveError(path, f"directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise ModelSaveError(path, f"directory {directory} is not writable")


def _plan_weights(
    external: list[ir.ExternalTensor], path: str, external_data: str | None
) -> tuple[str | None, str]:
    """The data file :func:`save_model` writes (relative to ``path``'s directory) and its note.

    Args:
        external: The model's external tensors.
        path: The output file.
        external_data: The name asked for, if any.
    """
    out_dir = os.path.dirname(os.path.abspath(path))
    note = ""
    if external_data is None and external:
        stays = all(
            _data_path(t) == os.path.realpath(os.path.join(out_dir, t.location))
            for t in external
        )
        if not stays:
            external_data = os.path.basename(path) + ".data"
            note = (
                f"the weights were external: wrote them to {external_data} next to the output"
            )
    if external_data is not None:
        target = os.path.realpath(os.path.join(out_dir, external_data))
        if any(_data_path(t) == target for t in external):
            # Rewriting the file the tensors are read from would corrupt them; the
            # references already point at it.
            note = f"the weights stay in {external_data}"
            external_data = None
        elif not note:
            note = f"wrote the weights to {external_data}"
    return external_data, note


def weights_file(
    model: ir.Model, path: str | os.PathLike, external_data: str | None = None
) -> str | None:
    """The external data file :func:`save_model` would write for ``path``, or ``None``.

    For a check before the work: another output of the run (a JSON report) on this file
    would overwrite the weights just written.
    """
    path = os.fspath(path)
    name, _ = _plan_weights(list(_external_tensors(model)), path, external_data)
    return None if name is None else os.path.join(os.path.dirname(os.path.abspath(path)), name)


def save_model(
    model: ir.Model, path: str | os.PathLike, *, external_data: str | None = None
) -> SaveResult:
    """Saves ``model``, keeping external weights loadable from the new place.

    The model file is written to a temporary name and renamed, so a failed save never
    leaves half a file (and ``-i`` never destroys the original).

    Args:
        model: The model.
        path: The output file.
        external_data: Write every initializer larger than 256 bytes to this file
            (relative to the output's directory). Without it, weights that are external
            stay where they are when the output is in their directory, and are written to
            ``<output name>.data`` next to the output otherwise.

    Raises:
        ModelSaveError: one line naming the file and the cause.
    """
    import onnx_ir as ir

    path = os.fspath(path)
    check_writable(path)
    out_dir = os.path.dirname(os.path.abspath(path))
    if external_data is not None and (bad := bad_data_name(out_dir, external_data)):
        raise ModelSaveError(path, bad)
    external = list(_external_tensors(model))
    if (outside := _outside(external)) is not None:
        raise ModelSaveError(path, outside)
    external_data, note = _plan_weights(external, path, external_data)
    stem, suffix = os.path.splitext(os.path.basename(path))
    tmp = os.path.join(out_dir, f".{stem}.tmp-{os.getpid()}{suffix or '.onnx'}")
    try:
        ir.save(model, tmp, format="protobuf", external_data=external_data)
        if os.path.exists(path):
            # The rename would give the file the umask's mode: ``-i`` on a 0600 model
            # made it world-readable.
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise ModelSaveError(path, _os_cause(e)) from e
    except Exception as e:  # SerdeError: e.g. an attribute of type UNDEFINED
        raise ModelSaveError(path, f"cannot serialize the model: {root_cause(e)}") from e
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    written = os.path.join(out_dir, external_data) if external_data is not None else None
    return SaveResult(path, written, note)


def unreadable_initializer(model: ir.Model) -> str | None:
    """The first initializer whose data cannot be read, as ``'W' (FLOAT[4]): cause``.

    Called after a command or ``optimize`` failed: an initializer whose stored data does not fill its
    declared shape (2 floats for ``[4]``, 7 raw bytes) raises deep inside whatever reads
    it, and that error names neither the model nor the initializer. Reading every weight
    up front would cost a big model its load time, so only a failure pays for the scan.
    """
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is None:
                continue
            try:
                tensor.numpy()
            except Exception as e:  # onnx-ir raises ValueError, numpy anything
                return (
                    f"initializer {value.name!r} ({tensor.dtype.name}{list(tensor.shape)}) "
                    f"cannot be read: {root_cause(e)}"
                )
    return None
