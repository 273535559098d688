"""Where the first build of a large compiled step goes: the 10-field step of
``benchmarks/compiled_step.py`` (two exchanges of 10 fields, two calls of a 10-field GT4Py
stencil; 128x128x80, halo (3,3,0)) built on one rank into empty caches in a temporary folder.

``--again`` builds it a second time in a new process with GT4Py's translations kept and the
step's record removed (what a code change in the step itself costs: parse, lowering, code
generation, gcc). ``--profile FILE`` writes a cProfile of the build (which slows Python-heavy
parts, sympy most). Prints the seconds of the first call.

Run:  python -O benchmarks/first_build.py [--again] [--profile FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(profile: str | None) -> None:
    """In a process whose caches point into the folder of the run: one first call."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import compiled_step as cs
    import numpy as np

    import gt4py_halo as gh

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
    if profile:
        profiler.dump_stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--again", action="store_true")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--in-folder", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_folder:
        build(args.profile)
        return
    folder = tempfile.mkdtemp(prefix="first_build_")
    env = {
        **os.environ,
        "GT4PY_BUILD_CACHE_LIFETIME": "persistent",
        "GT4PY_BUILD_CACHE_DIR": os.path.join(folder, "gt4py"),
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, *(["-O"] if not __debug__ else []), __file__]
    runs = ["first"] + (["again"] if args.again else [])
    try:
        for n, run in enumerate(runs):
            profile = args.profile if n == len(runs) - 1 else None
            extra = ["--profile", os.path.abspath(profile)] if profile else []
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
