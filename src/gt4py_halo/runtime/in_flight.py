"""Runtime exchanges started and not yet finished, held until they are.

A transport writes into an exchange's buffers and fields until the exchange is finished: MPI
completes a receive posted into freed memory as readily as into live memory. So a started
exchange is held here, whatever the user drops (its handle, the exchange object, the
fields), until its wait, with what else it must keep alive until then (``hold``: the arrays
of which it exchanges views that hold no reference to them); exchanges still in flight when the interpreter exits are finished
then, with a warning, before MPI is finalized (``atexit`` runs this module's handler before
mpi4py's, which was registered first).
"""

from __future__ import annotations

import atexit
import warnings

#: Started, not yet waited for (each has a ``wait()`` that finishes it): what each holds
UNFINISHED: dict = {}


def hold(pending: object, objects: tuple) -> None:
    """Keeps ``objects`` alive while ``pending`` is in flight."""
    if pending in UNFINISHED:
        UNFINISHED[pending] = objects


@atexit.register
def _finish_at_exit() -> None:
    unfinished = list(UNFINISHED)
    if unfinished:
        warnings.warn(
            f"{len(unfinished)} halo exchange(s) started and never finished: finished at exit "
            "(call finish() on what ex.start returned)",
            stacklevel=1,
        )
    for pending in unfinished:
        pending.wait()
