"""Collective tests: every rank of ``mpirun -n N`` runs the same tests in the same order.

A test that fails on one rank must fail on all, with that rank's message, or rank 0 would
report success while another rank's halos were wrong. At each test's teardown (which runs on
every rank, whatever happened before) the ranks exchange their failures; a rank that passed
fails the teardown with the others' reports.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from mpi4py import MPI

COMM = MPI.COMM_WORLD
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "diffusion_2d.py"


@pytest.fixture
def comm() -> MPI.Intracomm:
    return COMM


def load_example(path: Path) -> ModuleType:
    """An example script imported as a module (once per process), to test what it defines."""
    module = sys.modules.get(path.stem)
    if module is None:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look the module up while it executes
        spec.loader.exec_module(module)
    return module


def calls_out_of_step(step, field, neighbour: bool) -> None:
    """Calls ``step(field, trips)``, a loop of ``trips[0]`` exchanges, out of step and back:
    after a first call in step (kept: the others go straight to the binary), rank 0 makes two
    trips in a call and one in the next, the others one and then two. Rank 0 raises
    ``RanksDisagreeError`` after its first call out of step, naming its call and the
    neighbour's next one; ranks that are its neighbours (``neighbour``) after their second.
    Ends with a call in step."""
    import numpy as np

    import gt4py_halo as gh

    trips = np.ones(1, dtype=np.int32)
    step(field, trips)
    first = MPI.COMM_WORLD.rank == 0
    for call, raises in ((2, first), (3, neighbour and not first)):
        trips[0] = (2 if first else 1) if call == 2 else (1 if first else 2)
        if raises:
            with pytest.raises(gh.RanksDisagreeError, match="out of step") as error:
                step(field, trips)
            sent = call + 1 if first else call - 1  # (the call of the sender)
            assert f"sent in its call {sent} of step " in str(error.value)
            assert f"ran in its call {call} of step " in str(error.value)
        else:
            step(field, trips)


def at_most_ranks(n: int, why: str) -> pytest.MarkDecorator:
    """Run on 1 to ``n`` ranks only: what the test checks does not change beyond (``why``),
    and every rank more on the 2 cores here costs make test minutes."""
    return pytest.mark.skipif(COMM.size > n, reason=f"run on 1 to {n} ranks: {why}")


@pytest.fixture(scope="session")
def diffusion() -> ModuleType:
    """The demo's module (GT4Py diffusion stencil), compiled on rank 0 and loaded by all."""
    module = load_example(EXAMPLE)
    module.compile_stencil(COMM)
    return module


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    failures = item.stash.setdefault(_FAILURES, [])
    if report.failed:
        failures.append(f"[{report.when}] {report.longreprtext[-3000:]}")
    if call.when != "teardown":
        return
    everyone = COMM.allgather(failures)
    others = [(rank, f) for rank, f in enumerate(everyone) if f and rank != COMM.rank]
    if others and not failures:
        report.outcome = "failed"
        report.longrepr = "\n".join(
            f"--- failed on rank {rank} of {COMM.size}:\n" + "\n".join(f) for rank, f in others
        )


_FAILURES = pytest.StashKey[list]()
