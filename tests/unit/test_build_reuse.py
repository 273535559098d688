"""A compiled step is built once: a later run of the same program finds its build and loads
it instead of compiling again; a different step gets a build of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap

STEP = textwrap.dedent(
    """
    import dace
    import numpy as np
    from mpi4py import MPI
    import gt4py_halo as gh

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=MPI.COMM_SELF)
    def step(a):
        ex.exchange(a)
        for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
            a[i, j] = a[i, j] * SCALE

    a = np.arange(float(np.prod(d.allocated_shape))).reshape(d.allocated_shape)
    step(a)
    print(a.sum())
    """
)


def run_step(workdir, scale: str) -> tuple[float, dict]:
    """The step's result, and every library in the working directory with its mtime."""
    script = workdir / f"step_{scale}.py"  # DaCe parses the step from its source file
    script.write_text(STEP.replace("SCALE", scale))
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    libraries = {p: p.stat().st_mtime_ns for p in workdir.rglob("*.so")}
    return float(done.stdout.split()[-1]), libraries


def test_a_second_run_loads_the_first_runs_build(tmp_path):
    total, built = run_step(tmp_path, "2.0")
    assert built, "no build in the working directory"
    assert run_step(tmp_path, "2.0") == (total, built), "the same step was built again"
    other, libraries = run_step(tmp_path, "3.0")  # another step: a build of its own
    assert other != total
    assert len(libraries) > len(built)


def test_a_step_parsed_again_lowers_to_the_same_build():
    """What the process parsed before (other steps, other exchanges) does not show in a
    step's graph: the same step, made again, has the same build name."""
    import numpy as np
    from mpi4py import MPI

    import gt4py_halo as gh

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex, other = (gh.make_exchange(d, backend="mpi") for _ in range(2))
    a, b = np.zeros(d.allocated_shape), np.zeros(d.allocated_shape)

    def made():
        @gh.program(comm=MPI.COMM_SELF)
        def step(a, b):
            ex.exchange(a)
            h = other.start(b)
            ex.exchange(a, b)
            h.finish()

        return step

    def elsewhere():
        @gh.program(comm=MPI.COMM_SELF)
        def another(a):
            other.exchange(a)
            ex.exchange(a)

        return another

    first = made().to_sdfg(a, b)
    elsewhere().to_sdfg(a)
    again = made().to_sdfg(a, b)
    assert first.name == again.name
    assert {"__halo_0_comm", "__halo_1_comm"} <= set(again.arrays)  # ex's, then other's


TWICE = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    import gt4py_halo as gh

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")

    def made():
        @gh.program(comm=MPI.COMM_SELF)
        def step(a):
            ex.exchange(a)

        return step

    for _ in range(2):
        a = np.arange(float(np.prod(d.allocated_shape))).reshape(d.allocated_shape)
        made()(a)
        print(a.sum())
    """
)


def test_a_build_loaded_twice_in_one_process_says_nothing(tmp_path):
    """The same step made twice: its build is loaded twice (DaCe loads the second from a copy
    of the library, so that each keeps its own state) without DaCe's warning about it, even
    where every warning shows (``-W always``)."""
    (tmp_path / "twice.py").write_text(TWICE)
    done = subprocess.run(
        [sys.executable, "-W", "always", "twice.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    first, second = done.stdout.split()
    assert first == second
    assert "already loaded" not in done.stderr, done.stderr
    assert len(list(tmp_path.rglob("libstep_*.so"))) == 1  # built once
