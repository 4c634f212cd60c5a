"""Running a pass without the cyclic garbage collector."""

from __future__ import annotations

__all__ = ["without_gc"]

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Disables the cyclic collector for the duration, restoring its previous state.

    A pass allocates many small long-lived objects (interned expressions, IR shapes) on
    top of a large model: the collector's full scans would dominate the run time, and
    the passes create no reference cycles worth collecting early.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
