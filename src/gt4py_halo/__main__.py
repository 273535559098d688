"""``python -m gt4py_halo``: the version, the transports this installation has, the GPU it
sees and the configuration in effect — what to paste into a bug report."""

from __future__ import annotations

import argparse
import platform

from mpi4py import MPI

import gt4py_halo
from gt4py_halo.config import backend_and_source
from gt4py_halo.errors import ConfigError
from gt4py_halo.transports import AUTO_ORDER, TRANSPORTS, installed


def main() -> None:
    argparse.ArgumentParser(prog="python -m gt4py_halo", description=__doc__).parse_args()
    print(f"gt4py_halo {gt4py_halo.__version__} (Python {platform.python_version()})")
    print(f"MPI: {MPI.Get_library_version().splitlines()[0].strip()}")
    for name in TRANSPORTS:
        print(f"transport {name}: {'installed' if installed(name) else 'not installed'}")
    print(f"GPU: {_gpus()}")
    try:
        name, source = backend_and_source()
    except ConfigError as error:
        print(f"configuration: {error}")
        raise SystemExit(1) from None
    if name.lower() == "auto":
        here = next((c for c in AUTO_ORDER if installed(c)), None)
        note = f" (first installed of {', '.join(AUTO_ORDER)}: {here or 'none'} here)"
    elif name.lower() not in TRANSPORTS:
        note = f" (unknown: known are {', '.join(sorted(TRANSPORTS))} and 'auto')"
    elif not installed(name.lower()):
        note = " (not installed here: make_exchange raises)"
    else:
        note = ""
    print(f"backend: {name!r}{note}, from {source}")


def _gpus() -> str:
    try:
        import cupy
    except ImportError:
        return "none (no CuPy: pip install 'gt4py_halo[cuda13]')"
    try:
        return f"CuPy {cupy.__version__}, {cupy.cuda.runtime.getDeviceCount()} device(s)"
    except cupy.cuda.runtime.CUDARuntimeError as error:
        return f"none (CuPy {cupy.__version__}: {error})"


if __name__ == "__main__":
    main()
