"""Running a pass without the cyclic garbage collector."""

from __future__ import annotations

__all__ = ["without_gc"]

import gc


class without_gc:  # noqa: N801  (used like the function it was: ``with without_gc():``)
    """Disables the cyclic collector for the duration, restoring its previous state.

    A pass allocates many small long-lived objects (interned expressions, IR shapes) on
    top of a large model: the collector's full scans would dominate the run time, and
    the passes create no reference cycles worth collecting early.

    A class rather than a ``contextlib.contextmanager``: every inference enters it three
    times (the API and both passes), and a generator-based manager costs several times
    more per use (a visible part of a small model's run).
    """

    __slots__ = ("_enabled",)

    def __enter__(self) -> None:
        self._enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._enabled:
            gc.enable()
