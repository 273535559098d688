"""A compiled step is built once: a later run of the same program finds its build and loads
it instead of compiling again, without parsing the step (``compiled/step_cache.py``); a
different step gets a build of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

STEP = textwrap.dedent(
    """
    import os

    import dace
    import numpy as np
    from mpi4py import MPI
    import gt4py_halo as gh
    from gt4py_halo.compiled.program import Program

    if os.environ.get("REFUSE_PARSE"):
        def refuse(*args):
            raise AssertionError("parsed again")

        Program._parse = refuse

    d = gh.CartesianDecomposition((9, 7), halo=HALO, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")

    def double(a):
        a[1:-1, 1:-1] *= 2.0

    @gh.program(comm=MPI.COMM_SELF)
    def step(a):
        ex.exchange(a)
        for i, j in dace.map[1 : a.shape[0] - 1, 1 : a.shape[1] - 1]:
            a[i, j] = a[i, j] * SCALE

    a = np.arange(float(np.prod(d.allocated_shape))).reshape(d.allocated_shape)
    if os.environ.get("SHOW"):
        shown = step.to_sdfg(a)
        nodes = list(shown.all_nodes_recursive())
        tasklets = sorted(n.label for n, _ in nodes if isinstance(n, dace.nodes.Tasklet))
        print(shown.name, len(nodes), tasklets, sorted(step.fusion_report(a).copy_maps.items()))
    step(a)
    print(a.sum())
    """
)


def run_step(workdir, scale: str, halo: int = 1, refuse_parse: bool = False) -> tuple[float, dict]:
    """The step's result, and every library in the working directory with its mtime. The
    step's caches are the working directory's own: GT4Py's (and so the step records) and
    DaCe's build folders. ``refuse_parse``: parsing the step fails."""
    printed, libraries = _run(workdir, scale, halo, refuse_parse, show=False)
    return float(printed.split()[-1]), libraries


def show_step(workdir, scale: str, refuse_parse: bool = False) -> tuple[float, str]:
    """``run_step``'s result, and what the step's ``to_sdfg`` and ``fusion_report`` showed
    before the call (the graph's name, node count and tasklets, the report's copy maps)."""
    printed, _ = _run(workdir, scale, 1, refuse_parse, show=True)
    return float(printed.split()[-1]), printed.splitlines()[0]


def _run(workdir, scale: str, halo: int, refuse_parse: bool, show: bool) -> tuple[str, dict]:
    script = workdir / f"step_{scale}_{halo}.py"  # DaCe parses the step from its source file
    script.write_text(STEP.replace("SCALE", scale).replace("HALO", str(halo)))
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=workdir,
        check=False,
        capture_output=True,
        text=True,
        env=isolated(workdir, REFUSE_PARSE="1" if refuse_parse else "", SHOW="1" if show else ""),
    )
    if done.returncode:
        raise RuntimeError(done.stderr)
    return done.stdout, {p: p.stat().st_mtime_ns for p in workdir.rglob("*.so")}


def isolated(workdir, **more: str) -> dict[str, str]:
    """The environment with GT4Py's persistent cache in ``workdir``."""
    cache = {"GT4PY_BUILD_CACHE_LIFETIME": "persistent", "GT4PY_BUILD_CACHE_DIR": str(workdir)}
    return os.environ | cache | more


def test_a_second_run_loads_the_first_runs_build(tmp_path):
    total, built = run_step(tmp_path, "2.0")
    assert built, "no build in the working directory"
    assert run_step(tmp_path, "2.0") == (total, built), "the same step was built again"
    other, libraries = run_step(tmp_path, "3.0")  # another step: a build of its own
    assert other != total
    assert len(libraries) > len(built)


def test_a_second_run_does_not_parse_the_step(tmp_path):
    """Nor to show it: ``to_sdfg`` and ``fusion_report`` load what the first run showed
    (``step_cache.store_lowered``), the same graph and report."""
    total, first = show_step(tmp_path, "2.0")
    built = run_step(tmp_path, "2.0")[1]
    assert "unpack" in first, first  # the graph's tasklets: the exchange's copies
    assert list(tmp_path.rglob("gt4py_halo_steps/*.json")), "no record of the build"
    assert run_step(tmp_path, "2.0", refuse_parse=True) == (total, built)
    assert show_step(tmp_path, "2.0", refuse_parse=True) == (total, first)
    # what the step's code or its exchanges change is parsed and built anew
    with pytest.raises(RuntimeError, match="parsed again"):
        run_step(tmp_path, "3.0", refuse_parse=True)
    with pytest.raises(RuntimeError, match="parsed again"):
        run_step(tmp_path, "2.0", halo=2, refuse_parse=True)
    assert run_step(tmp_path, "2.0", halo=2)[0] != total


def test_a_shown_step_kept_cut_short_is_lowered_again(tmp_path):
    """A kept lowered step found cut short (a damaged cache folder) is lowered again at the
    next showing, and kept again whole."""
    shown = show_step(tmp_path, "2.0")
    (kept,) = tmp_path.rglob("gt4py_halo_steps/*.lowered.json.gz")
    kept.write_bytes(kept.read_bytes()[:1000])
    with pytest.raises(RuntimeError, match="parsed again"):
        show_step(tmp_path, "2.0", refuse_parse=True)
    assert show_step(tmp_path, "2.0") == shown
    assert show_step(tmp_path, "2.0", refuse_parse=True) == shown  # kept anew


def test_a_library_left_truncated_is_built_again(tmp_path):
    """A build killed while linking (or a full disk) leaves a library that is not whole:
    loading it ended the next run with a bus error, records or not. It is built again."""
    total, built = run_step(tmp_path, "2.0")
    (library,) = (p for p in built if p.name.startswith("libstep_"))
    whole = library.read_bytes()
    for records in (True, False):
        library.write_bytes(whole[:1000])
        if not records:
            for record in tmp_path.rglob("gt4py_halo_steps/*.json"):
                record.unlink()
        assert run_step(tmp_path, "2.0")[0] == total
        assert library.stat().st_size == len(whole)


def test_a_saved_sdfg_left_truncated_is_built_again(tmp_path):
    """A build folder whose saved SDFG (``program.sdfgz``, read to load the build) is cut
    short, empty or gone, its library whole: every later run died reading it (a bare
    ``EOFError``, records or not). The build is made again."""
    total, built = run_step(tmp_path, "2.0")
    (library,) = (p for p in built if p.name.startswith("libstep_"))
    saved = library.parent.parent / "program.sdfgz"
    whole = saved.read_bytes()
    # each damage once, with and without the records of the build (each case builds again)
    for records, left in ((True, 1000), (False, 0), (True, None)):
        if left is None:
            saved.unlink()
        else:
            saved.write_bytes(whole[:left])
        if not records:
            for record in tmp_path.rglob("gt4py_halo_steps/*.json"):
                record.unlink()
        assert run_step(tmp_path, "2.0")[0] == total
        assert len(saved.read_bytes()) > 1000


def test_a_cache_folder_that_cannot_be_written_keeps_nothing(tmp_path):
    """Where the step records and translations cannot be written, the step still builds and
    runs (a warning); nothing is kept."""
    (tmp_path / ".gt4py_cache").mkdir()  # GT4Py's cache folder in GT4PY_BUILD_CACHE_DIR
    for kept in ("gt4py_halo_steps", "gt4py_halo_sdfgs"):
        (tmp_path / ".gt4py_cache" / kept).write_text("a file where the folder would be")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run_step(tmp_path, "2.0")[0] == run_step(elsewhere, "2.0")[0]


def test_two_jobs_started_together_in_one_folder(tmp_path):
    """Both build the same step in the same build folder: the second waits for the first
    (DaCe, reusing what the folder holds, loaded a library half written)."""
    script = tmp_path / "step.py"
    script.write_text(STEP.replace("SCALE", "2.0").replace("HALO", "1"))
    jobs = [
        subprocess.Popen(
            [sys.executable, script.name],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=isolated(tmp_path),
        )
        for _ in range(2)
    ]
    results = [job.communicate() for job in jobs]
    assert all(job.returncode == 0 for job in jobs), [err for _, err in results]
    assert results[0][0] == results[1][0]


def test_a_step_calling_a_python_helper_is_parsed_at_every_run(tmp_path):
    """A helper function has no key (its code is not in the step's): parsed every time."""
    helper = STEP.replace("    ex.exchange(a)\n    for", "    double(a)\n    for")
    assert helper != STEP
    (tmp_path / "helper.py").write_text(helper.replace("SCALE", "2.0").replace("HALO", "1"))
    for refuse in ("", "1"):
        done = subprocess.run(
            [sys.executable, "helper.py"],
            cwd=tmp_path,
            check=False,
            capture_output=True,
            text=True,
            env=isolated(tmp_path, REFUSE_PARSE=refuse),
        )
        assert bool(done.returncode) == bool(refuse), done.stderr
    assert "parsed again" in done.stderr
    assert not list(tmp_path.rglob("gt4py_halo_steps/*.json"))


def test_a_step_parsed_again_lowers_to_the_same_build(monkeypatch):
    """What the process parsed before (other steps, other exchanges) does not show in a
    step's graph: the same step, made again, has the same build name."""
    import numpy as np
    from mpi4py import MPI

    import gt4py_halo as gh
    from gt4py_halo.compiled import step_cache

    # lowered each time, not loaded from what the first showing kept
    monkeypatch.setattr(step_cache, "load_lowered", lambda key: None)

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
        env=isolated(tmp_path),
    )
    first, second = done.stdout.split()
    assert first == second
    assert "already loaded" not in done.stderr, done.stderr
    assert len(list(tmp_path.rglob("libstep_*.so"))) == 1  # built once


def exchange_step():
    """A 9x7 periodic grid on this process, and a step exchanging one field's halo on it."""
    from mpi4py import MPI

    import gt4py_halo as gh

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=MPI.COMM_SELF)
    def step(a):
        ex.exchange(a)

    return d, step


def test_repeated_calls_keep_dace_call_hooks():
    """A call with the last call's arguments skips DaCe's ``fast_call`` Python, but not the
    compiled-SDFG call hooks a user registered (DaCe's instrumentation): every call runs them,
    and the halos are written every time."""
    import dace
    import numpy as np

    d, step = exchange_step()

    a = np.zeros(d.allocated_shape)
    calls = []
    hook = dace.hooks.register_compiled_sdfg_call_hook(before_hook=lambda *_: calls.append(1))
    try:
        for n in range(3):
            a[d.owned] = n + 1
            step(a)
            assert (a == n + 1).all()  # periodic: every halo cell from an owned one
    finally:
        dace.hooks.unregister_compiled_sdfg_call_hook(hook)
    assert len(calls) == 3
    a[d.owned] = 7
    step(a)  # without hooks
    assert (a == 7).all() and len(calls) == 3


@pytest.mark.parametrize("kind", ["numpy", "gt4py"])
def test_a_repeated_call_runs_no_python(kind):
    """A call with a kept call's arguments runs the step from C (``_native.Repeating``): no
    Python function of the package runs between the caller and the step, for the same
    field at each call and for two swapped at each call alike, and the halos are written
    every time; new arguments go through Python again. NumPy arrays and GT4Py's default
    fields (padded)."""
    import os

    import gt4py.next as gtx
    import numpy as np

    import gt4py_halo

    I, J = gtx.Dimension("I"), gtx.Dimension("J")
    d, step = exchange_step()
    package = os.path.dirname(gt4py_halo.__file__)
    ran = []

    def calls(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            ran.append(frame.f_code.co_name)

    def profiled_call(field):
        sys.setprofile(calls)
        try:
            step(field)
        finally:
            sys.setprofile(None)

    def new_field():
        a = np.zeros(d.allocated_shape)
        return a if kind == "numpy" else gtx.as_field([I, J], a)

    def values(field):
        return field if kind == "numpy" else field.ndarray

    a, b, c = new_field(), new_field(), new_field()
    step(a)
    step(b)
    for n, field in enumerate([a, a, b, a, b, b]):
        values(field)[d.owned] = n + 1
        profiled_call(field)
        # periodic: every halo cell from an owned one
        assert ran == [] and (values(field) == n + 1).all()
    values(c)[d.owned] = 9
    profiled_call(c)
    assert "_called" in ran and (values(c) == 9).all()


@pytest.mark.parametrize("kind", ["numpy", "gt4py"])
def test_a_step_keeps_no_argument_alive(kind):
    """A step runs its last call again at once for the same arrays, yet holds them weakly:
    fresh arrays (NumPy, or GT4Py's default fields, padded) at every call are freed as soon
    as the caller drops them, and each call fills its own array's halos, never memory of
    the last call's."""
    import weakref

    import gt4py.next as gtx
    import numpy as np

    I, J = gtx.Dimension("I"), gtx.Dimension("J")

    d, step = exchange_step()

    gone = []
    for n in range(3):
        a = np.zeros(d.allocated_shape)
        if kind == "gt4py":
            a = gtx.as_field([I, J], a)
        for value in (n + 1, n + 10):  # the second call runs the first one again
            array = a if kind == "numpy" else a.ndarray
            array[d.owned] = value
            step(a)
            assert (array == value).all()  # periodic: every halo cell from an owned one
        gone.append(weakref.ref(a))
        del array
        del a
    assert [ref() for ref in gone] == [None, None, None], "a step kept an argument alive"


@pytest.mark.parametrize("kind", ["numpy", "gt4py"])
def test_buffers_taking_turns_between_calls_run_a_kept_call_again(kind):
    """A model swapping two sets of buffers between calls (``u, v = v, u``) or rotating three
    (time levels) runs each call from the arguments kept by an earlier call: no conversion
    after the first of each set, each call filling its own arrays' halos; a fourth set takes
    the slot of the least recently run; the step keeps none of them alive. NumPy arrays and
    GT4Py's default fields."""
    import weakref

    import gt4py.next as gtx
    import numpy as np

    from gt4py_halo.compiled.last_call import SLOTS

    assert SLOTS == 3
    I, J = gtx.Dimension("I"), gtx.Dimension("J")

    d, step = exchange_step()
    converted = []
    call = step._call
    step._call = lambda *args: converted.append(id(args[0][0])) or call(*args)

    arrays = [np.zeros(d.allocated_shape) for _ in range(4)]
    if kind == "gt4py":
        arrays = [gtx.as_field([I, J], a) for a in arrays]
    # swapped, rotated; 3 replaces 0 (run least recently), 0 replaces 1, 2 runs kept,
    # 1 replaces 3
    order = [0, 1, 0, 1, 2, 0, 1, 2, 3, 0, 2, 1]
    for n, k in enumerate(order):
        array = arrays[k] if kind == "numpy" else arrays[k].ndarray
        array[d.owned] = n + 1
        step(arrays[k])
        assert (array == n + 1).all()  # periodic: every halo cell from an owned one
        del array
    assert converted == [id(arrays[k]) for k in (0, 1, 2, 3, 0, 1)]
    gone = [weakref.ref(a) for a in arrays]
    del arrays
    assert [ref() for ref in gone] == [None] * 4, "a step kept an argument alive"


def test_new_arguments_are_converted_as_dace_converts_them():
    """A call with new argument objects is converted for the compiled step without DaCe's
    ``construct_arguments`` (``last_call.Conversion``), to the same C values: pointers to
    NumPy arrays, GT4Py's padded buffers and views, numbers of each type a step takes, the shapes and strides of the arrays and the plan data fixed per build."""
    import ctypes

    import gt4py.next as gtx
    import numpy as np
    from mpi4py import MPI

    import gt4py_halo as gh

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")
    I, J, K = gtx.Dimension("I"), gtx.Dimension("J"), gtx.Dimension("K", gtx.DimensionKind.VERTICAL)

    @gh.program(comm=MPI.COMM_SELF)
    def step(a, b, c, n, x, m, f, on):
        ex.exchange(a, b)
        c[0, 1] = a[1, 1] + b[1, 1, 1] + n + x + m + f
        if on:
            c[1, 0] = 1.0

    def arguments():
        return [
            np.zeros(d.allocated_shape),
            gtx.as_field([I, J, K], np.zeros((*d.allocated_shape, 5))),
            np.zeros((4, 6))[1:, ::2],
            3,
            0.5,
            np.int32(-2),
            np.float32(1.5),
            True,
        ]

    step(*arguments())  # the first call initializes the step (DaCe's conversion)
    values = [getattr(v, "ndarray", v) for v in arguments()]
    conversion, _ = step._build(values)
    ours, ours_init = conversion(values)
    dace_args, _ = conversion.dace_arguments(values)
    assert ours_init == ()
    assert len(ours) == len(dace_args) > len(values)
    for mine, theirs in zip(ours, dace_args):
        assert type(mine) is type(theirs)
        assert mine.value == theirs.value
    assert sum(isinstance(c, ctypes.c_void_p) for c in ours) >= 3
    step(*[gtx.as_field([I, J, K], v) if v.ndim == 3 else v for v in values[:2]], *values[2:])


def test_scalars_of_a_kept_call_are_compared_by_their_bits():
    """A kept call runs again for numbers equal in type and value, but 0.0 and -0.0 are
    equal and not the same value (``1 / x`` tells them apart): a call with the other runs
    with its own, Python's floats and NumPy's alike. A complex number, which DaCe passes to
    the compiled step wrongly, and an array of no dimensions, which it fails on, are
    refused."""
    import numpy as np

    d, _ = exchange_step()
    from mpi4py import MPI

    import gt4py_halo as gh

    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=MPI.COMM_SELF)
    def step(a, c, s):
        ex.exchange(a)
        c[0] = 1.0 / s

    a, c = np.zeros(d.allocated_shape), np.zeros(1)
    for zero in (0.0, np.float64(0.0), np.float32(0.0)):
        for sign in (1, -1, -1, 1):
            step(a, c, sign * zero)
            assert c[0] == sign * np.inf

    for number in (complex(1.0, -0.0), np.complex64(1.0)):
        with pytest.raises(gh.FieldError, match="argument s is a complex number"):
            step(a, c, number)
    # an array of no dimensions: DaCe failed on it (at the parse, or in the C++ compiler
    # after a whole build where it bounds a loop)
    with pytest.raises(gh.FieldError, match=r"argument s is an array of no dimensions"):
        step(a, c, np.array(2.0))


def test_a_field_that_takes_no_weak_reference_is_not_kept():
    """An argument that is neither a number nor weakly referable (a field-like object of the
    user's with an ``ndarray``): a kept call would have to hold it and so keep its array
    alive, and would not see its buffer made read-only. Such calls are never kept: each is
    checked, and the array dies with its holder."""
    import gc
    import weakref

    import numpy as np

    import gt4py_halo as gh

    class Holder:
        __slots__ = ("ndarray",)

        def __init__(self, array):
            self.ndarray = array

    d, step = exchange_step()
    array = np.zeros(d.allocated_shape)
    holder = Holder(array)
    for value in (1.0, 2.0):
        array[d.owned] = value
        step(holder)
        assert (array == value).all()  # periodic: every halo cell from an owned one
    array.setflags(write=False)
    with pytest.raises(gh.FieldError, match="read-only"):
        step(holder)
    alive = weakref.ref(array)
    del holder, array
    gc.collect()
    assert alive() is None, "a step kept an argument alive"


def test_an_argument_reshaped_in_place_is_checked_again():
    """The last call runs again only for the same objects of the same shapes: an array
    reshaped in place since (the same object, the same memory) is checked as a new argument,
    here against the plan, which it no longer fits."""
    import numpy as np

    import gt4py_halo as gh

    d, step = exchange_step()

    a = np.zeros(d.allocated_shape)
    step(a)
    step(a)  # the last call again
    a.shape = a.shape[::-1]
    with pytest.raises(gh.FieldError, match="needs its first 2 axes"):
        step(a)


DTYPED = textwrap.dedent(
    """
    import numpy as np
    from mpi4py import MPI
    import gt4py_halo as gh

    import cfg  # the user's module: cfg.DT is left an attribute, looked up by the parse

    DT = np.DTYPE  # left a name by DaCe's preprocessor: the parse looks it up

    def make(dt):
        @gh.program(comm=MPI.COMM_SELF)
        def step(a):
            ex.exchange(a)
            t = np.zeros((1,), dtype=dt)  # a closure variable, also left a name
            s = np.zeros((1,), dtype=DT)
            r = np.zeros((1,), dtype=cfg.DT)
            t[0] = a[1, 1] / 3.0
            s[0] = a[2, 2] / 3.0
            r[0] = a[3, 3] / 3.0
            a[1, 1] = t[0]
            a[2, 2] = s[0]
            a[3, 3] = r[0]

        return step

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")
    for dt in (np.float32, np.float64):
        a = np.arange(float(np.prod(d.allocated_shape))).reshape(d.allocated_shape) + 0.1
        make(dt)(a)
        print(repr(a[1, 1]), repr(a[2, 2]), repr(a[3, 3]))
    """
)


def test_dtypes_the_step_reads_by_name_key_its_build(tmp_path):
    """A dtype held in a global, a closure variable or a module's attribute is left a name
    (an attribute) by DaCe's preprocessor and looked up by the parse: the step's key holds
    its value, not the name (two steps of one factory for two precisions, and a later run
    with the global or the module's dtype changed, found each other's records and ran the
    other precision's binary)."""

    def run(workdir, global_dtype: str, module_dtype: str) -> list[str]:
        workdir.mkdir(exist_ok=True)
        (workdir / "dtyped.py").write_text(DTYPED.replace("DTYPE", global_dtype))
        (workdir / "cfg.py").write_text(f"import numpy as np\nDT = np.{module_dtype}\n")
        done = subprocess.run(
            [sys.executable, "dtyped.py"],
            cwd=workdir,
            check=False,
            capture_output=True,
            text=True,
            env=isolated(workdir),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first = run(tmp_path / "a", "float32", "float32")
    assert first[0] != first[3], "the closure's dtype: float32 then float64"
    then = run(tmp_path / "a", "float64", "float32")  # the same caches, the global changed
    assert then[1] != first[1] and then[2] == first[2]
    last = run(tmp_path / "a", "float64", "float64")  # the module's dtype changed
    assert last[2] != then[2] and last[1] == then[1]
    assert last == run(tmp_path / "fresh", "float64", "float64")


def test_another_mpi_or_ghex_is_another_build(monkeypatch):
    """The build folder's name and the step records' key hold the libraries a binary links
    (``cache_files.linked_libraries``): a run against another MPI (a module swapped on a
    cluster) or another GHEX builds anew, where the old binary could crash."""
    import dace
    from mpi4py import MPI

    from gt4py_halo.compiled import cache_files, program, step_cache

    assert cache_files.linked_libraries()[0] == MPI.Get_library_version()
    sdfg = dace.SDFG("linked")
    digests, toolchains = set(), set()
    for libraries in (
        ("MPICH 5.0.2", "ghex 0.9.0"),
        ("Open MPI 5", "ghex 0.9.0"),
        ("MPICH 5.0.2", "ghex 1.0"),
    ):
        monkeypatch.setattr(program, "linked_libraries", lambda libraries=libraries: libraries)
        monkeypatch.setattr(step_cache, "linked_libraries", lambda libraries=libraries: libraries)
        digests.add(program.build_digest(sdfg))
        toolchains.add(step_cache._toolchain())
    assert len(digests) == len(toolchains) == 3


def test_a_build_folder_removed_while_the_job_runs_is_named():
    """A later call of new shapes loads the build again (an instance of its own): its folder
    removed since is a ``ProgramError`` saying so (a bare ``FileNotFoundError`` of a file
    never written)."""
    import shutil

    import numpy as np
    from mpi4py import MPI

    import gt4py_halo as gh

    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    ex = gh.make_exchange(d, backend="mpi")

    @gh.program(comm=MPI.COMM_SELF)
    def twice(a):  # (a build of this test's own: its folder is removed)
        ex.exchange(a)
        ex.exchange(a)

    twice(np.zeros((*d.allocated_shape, 3)))
    shutil.rmtree(twice._binaries[twice._built[0]].folder)
    with pytest.raises(gh.ProgramError, match="is gone .* removed while the job ran"):
        twice(np.zeros((*d.allocated_shape, 5)))
