"""Where the first build of a large compiled step goes: the 10-field step of
``benchmarks/compiled_step.py`` (two exchanges of 10 fields, two calls of a 10-field GT4Py
stencil; 128x128x80, halo (3,3,0)) built on one rank into empty caches in a temporary folder.

``--again`` builds it a second time in a new process with GT4Py's translations kept and the
step's record removed: parsing and lowering, then the first run's binary, found by the
lowered step's digest, is loaded (a change to the step itself lowers to another digest and
adds code generation and gcc). ``--profile FILE`` writes a cProfile of the build (which slows Python-heavy
parts, sympy most); ``--phases`` prints the wall-clock seconds of the build's phases instead
(GT4Py's translation, DaCe's parse and simplify, our lowering, code generation, CMake and
the compiler). ``--mpi4py`` runs the build as MPI jobs start their scripts, ``python -m mpi4py``
(``runpy``: Python code that inspects the stack scans every module there). Prints the seconds
of the first call.

The package is imported from where Python finds it: an earlier commit's ``src`` first on
``PYTHONPATH`` builds the same step with that commit's code (the A/B in docs/benchmarks.md).

Run:  python -O benchmarks/first_build.py [--again] [--mpi4py] [--profile FILE | --phases]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(profile: str | None, phases: bool) -> None:
    """In a process whose caches point into the folder of the run: one first call."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import compiled_step as cs
    import numpy as np

    import gt4py_halo as gh

    spent = time_phases() if phases else {}

    d = gh.CartesianDecomposition((128, 128, 80), halo=(3, 3, 0), periodic=True)
    fields = [cs.as_field(np.random.default_rng(n).random(d.allocated_shape)) for n in range(20)]
    (i0, i1), (j0, j1) = [(s.start, s.stop) for s in d.owned[:2]]
    bounds = [cs.i32(b) for b in (i0, i1, j0, j1, d.allocated_shape[2])]
    step = gh.program(cs.make_a10(gh.make_exchange(d, "mpi")))
    profiler = cProfile.Profile()
    start = time.perf_counter()
    if profile:
        profiler.enable()
    step(*fields, *bounds)
    profiler.disable()
    print(f"first call: {time.perf_counter() - start:.1f} s", flush=True)
    for phase, seconds in spent.items():
        print(f"  {phase}: {seconds:.1f} s")
    if profile:
        profiler.dump_stats(profile)


def time_phases() -> dict[str, float]:
    """Wraps the functions a build passes through with wall-clock timers; returns the
    seconds spent in each, filled as the build goes (nested phases count in both)."""
    import dace
    from dace.codegen import codegen, compiler

    from gt4py_halo.compiled import gt4py_translations, program

    spent: dict[str, float] = {}

    def timed(phase: str, owner: object, name: str) -> None:
        wrapped = getattr(owner, name)

        @functools.wraps(wrapped)
        def timer(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return wrapped(*args, **kwargs)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - start

        setattr(owner, name, timer)

    timed("GT4Py translation", gt4py_translations, "_TRANSLATE")
    timed("DaCe parse (with the translation)", program.Program, "_parse")
    timed("DaCe simplify (every call)", dace.SDFG, "simplify")
    timed("exchange lowering", program, "lower_halo_exchanges")
    timed("build digest", program, "build_digest")
    timed("code generation", codegen, "generate_code")
    timed("saving the SDFG", dace.SDFG, "save")
    timed("CMake and the compiler", compiler, "configure_and_compile")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--again", action="store_true")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--phases", action="store_true")
    parser.add_argument("--mpi4py", action="store_true")
    parser.add_argument("--in-folder", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_folder:
        build(args.profile, args.phases)
        return
    folder = tempfile.mkdtemp(prefix="first_build_")
    env = {
        **os.environ,
        "GT4PY_BUILD_CACHE_LIFETIME": "persistent",
        "GT4PY_BUILD_CACHE_DIR": os.path.join(folder, "gt4py"),
        "OMP_NUM_THREADS": "1",
    }
    launcher = ["-m", "mpi4py"] if args.mpi4py else []
    command = [sys.executable, *(["-O"] if not __debug__ else []), *launcher, __file__]
    runs = ["first"] + (["again"] if args.again else [])
    try:
        for n, run in enumerate(runs):
            profile = args.profile if n == len(runs) - 1 else None
            extra = ["--profile", os.path.abspath(profile)] if profile else []
            extra += ["--phases"] if args.phases else []
            print(f"{run}: ", end="", flush=True)
            subprocess.run(
                [*command, "--in-folder", folder, *extra], cwd=folder, env=env, check=True
            )
            steps = Path(folder, "gt4py", ".gt4py_cache", "gt4py_halo_steps")
            shutil.rmtree(steps, ignore_errors=True)  # the next run builds the step again
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
