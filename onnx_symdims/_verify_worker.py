"""onnxruntime sessions in a child process, so that a crash of onnxruntime fails one run.

onnxruntime does not always raise: an integer ``Div`` or ``Mod`` by zero (a shape
computation at size 0, which verification tries on purpose) kills the process with
``SIGFPE``, and some kernels abort. Run in the caller's process, that ends the whole
``--verify`` (or the user's program) without a word. :class:`IsolatedSession` hosts the
session in a child process instead: when the child dies, that run fails with
``onnxruntime crashed (SIGFPE)`` and the next run starts a fresh child.

The child imports onnxruntime with telemetry off and every log quiet, and runs without
graph optimizations (the caller's options are passed as plain values: onnxruntime's
option objects do not pickle).
"""

from __future__ import annotations

__all__ = ["IsolatedSession", "OnnxruntimeCrash"]

import contextlib
import dataclasses
import os
import pickle
import signal
import struct
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: onnxruntime severity 4 = FATAL only.
_QUIET = 4


class OnnxruntimeCrash(RuntimeError):
    """The child running onnxruntime died (a signal such as SIGFPE, or an abort)."""


@dataclasses.dataclass(frozen=True)
class Arg:
    """A session input or output: what callers read of ``get_inputs()``/``get_outputs()``."""

    name: str


def _send(stream, message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream) -> Any:
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def main() -> None:
    """The child: loads the session, then answers runs until its input closes."""
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever else writes to stdout must not corrupt the replies
    model, base_dir = _receive(requests)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort

    ort.set_default_logger_severity(_QUIET)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # Prepacking gives a MatMul/Gemm/Conv whose weight is an initializer another kernel
    # (other rounding) than one computing it: folding a weight's subgraph must not look
    # like a change. (With graph optimizations on, onnxruntime folds the original's
    # constant subgraphs itself and prepacks both.)
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.log_severity_level = _QUIET
    if base_dir:
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", base_dir
        )
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as e:
        _send(replies, ("error", str(e)))
        return
    inputs = [i.name for i in session.get_inputs()]
    _send(replies, ("ok", inputs, [o.name for o in session.get_outputs()]))
    run_options = ort.RunOptions()
    run_options.log_severity_level = _QUIET
    while True:
        try:
            names, feeds = _receive(requests)
        except EOFError:
            return
        try:
            _send(replies, ("ok", session.run(names, feeds, run_options)))
        except Exception as e:  # onnxruntime's Fail / InvalidArgument ...
            _send(replies, ("error", str(e)))


class IsolatedSession:
    """An onnxruntime CPU session living in a child process.

    The child is a fresh interpreter (``python -m onnx_symdims._verify_worker``), not a
    fork: the caller may hold onnxruntime's threads, and its main module is never
    imported again (``multiprocessing``'s spawn would).

    Args:
        model: The serialized model.
        base_dir: Folder of the model's external data, if any.

    Raises:
        ValueError: onnxruntime refuses the model (its message).
        OnnxruntimeCrash: onnxruntime died while loading it.
    """

    def __init__(self, model: bytes, base_dir: str | None = None) -> None:
        self._model = model
        self._base_dir = base_dir
        self._process: subprocess.Popen | None = None
        self._inputs: list[Arg] = []
        self._outputs: list[Arg] = []
        self._start()

    def _start(self) -> None:
        # The child imports this package from where the caller did (a checkout put on
        # sys.path by hand, not only an installed one).
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.environ.get("PYTHONPATH")
        env = dict(
            os.environ,
            ORT_DISABLE_TELEMETRY="1",
            PYTHONPATH=package_root + (os.pathsep + path if path else ""),
        )
        self._process = subprocess.Popen(
            [sys.executable, "-m", "onnx_symdims._verify_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        with contextlib.suppress(OSError):
            _send(self._process.stdin, (self._model, self._base_dir))
        reply = self._reply()
        if reply[0] == "error":
            self.close()
            raise ValueError(reply[1])
        self._inputs = [Arg(n) for n in reply[1]]
        self._outputs = [Arg(n) for n in reply[2]]

    def _reply(self) -> tuple:
        try:
            return _receive(self._process.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            process = self._process
            self.close()
            code = process.returncode
            if code is not None and code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                raise OnnxruntimeCrash(f"onnxruntime crashed ({name})") from None
            raise OnnxruntimeCrash(f"onnxruntime's process ended (exit code {code})") from None

    def get_inputs(self) -> list[Arg]:
        return list(self._inputs)

    def get_outputs(self) -> list[Arg]:
        return list(self._outputs)

    def run(self, output_names: Sequence[str], feeds: Mapping[str, Any]) -> list:
        """The outputs for ``feeds``; a crash raises :class:`OnnxruntimeCrash`.

        Raises:
            RuntimeError: onnxruntime's error for this run.
            OnnxruntimeCrash: onnxruntime died (the next run starts a new process).
        """
        if self._process is None:
            self._start()
        with contextlib.suppress(OSError):  # a dead child: _reply says how
            _send(self._process.stdin, (list(output_names), dict(feeds)))
        reply = self._reply()
        if reply[0] == "error":
            raise RuntimeError(reply[1])
        return reply[1]

    def close(self) -> None:
        """Ends the child process."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            process.stdin.close()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


if __name__ == "__main__":
    main()
