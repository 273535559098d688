"""GT4Py programs are translated to SDFGs once (``compiled/gt4py_translations.py``): a reused
translation is the SDFG GT4Py makes, from memory and from GT4Py's persistent cache; other
input (other neighbour tables) is translated again; a step calling a program several times
translates it once."""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path
from types import ModuleType

import dace
import numpy as np
import pytest
from gt4py.next import config
from mpi4py import MPI

import gt4py_halo as gh
from gt4py_halo.compiled import gt4py_translations
from gt4py_halo.compiled.gt4py_translations import translated_once
from gt4py_halo.compiled.neighbour_tables import NeighbourTables

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look the module up while it executes
        spec.loader.exec_module(module)
    return module


@pytest.fixture
def translations(monkeypatch, tmp_path) -> list:
    """The programs GT4Py really translated; an empty persistent cache, nothing in memory."""
    monkeypatch.setattr(config, "BUILD_CACHE_LIFETIME", config.BuildCacheLifetime.PERSISTENT)
    monkeypatch.setattr(config, "BUILD_CACHE_DIR", tmp_path)
    monkeypatch.setattr(gt4py_translations, "_translations", {})
    translate, made = gt4py_translations._TRANSLATE, []

    def counted(program, *args, **kwargs):
        made.append(program)
        return translate(program, *args, **kwargs)

    monkeypatch.setattr(gt4py_translations, "_TRANSLATE", counted)
    return made


def gt4py_own(program):
    """GT4Py's translation of ``program`` as ``translated_once`` asks for it: without DaCe's
    line info (which inspects the Python stack at every node, to find GT4Py's own lines)."""
    with dace.config.set_temporary("compiler", "lineinfo", value="none"):
        return gt4py_translations._TRANSLATE(program)


def described(sdfg) -> tuple:
    return sdfg.hash_sdfg(), sdfg.gt4py_program_input_fields, sdfg.gt4py_program_output_fields


def test_a_reused_translation_is_the_one_gt4py_makes(translations, tmp_path):
    """(``gt4py_own``; DaCe's line info setting restored after it.)"""
    program = example("diffusion_2d").diffusion_step
    anew = gt4py_own(program)
    with translated_once():
        first, again = program.__sdfg__(), program.__sdfg__()
        gt4py_translations._translations.clear()  # as in a later process
        from_disk = program.__sdfg__()
    assert len(translations) == 2  # ``anew``, and the first call
    assert described(first) == described(again) == described(from_disk) == described(anew)
    assert len({id(first), id(again), id(from_disk)}) == 3  # DaCe may change what it gets
    assert list((tmp_path / "gt4py_halo_sdfgs").glob("*.pickle"))
    assert type(program).__sdfg__ is not gt4py_translations._sdfg  # GT4Py's own again
    assert dace.Config.get("compiler", "lineinfo") == "inspect"


def test_a_damaged_translation_on_disk_is_made_again(translations, tmp_path):
    """An entry whose SDFG is no JSON (a flipped byte) is translated again and replaced; it
    made every later build fail."""
    program = example("diffusion_2d").energy
    with translated_once():
        program.__sdfg__()
    (entry,) = (tmp_path / "gt4py_halo_sdfgs").glob("*.pickle")
    kept = pickle.loads(entry.read_bytes())
    entry.write_bytes(pickle.dumps(("{" + kept[0], *kept[1:])))
    gt4py_translations._translations.clear()  # as in a later process
    with translated_once():
        again = program.__sdfg__()
    assert len(translations) == 2
    assert described(again) == described(gt4py_own(program))
    assert pickle.loads(entry.read_bytes()) == kept


def test_neighbour_tables_of_other_contents_are_translated_again(translations):
    module = example("unstructured_step")
    meshes = [module.local_mesh(module.NX, module.NY, rank, 2) for rank in (0, 1)]
    same_as_first = meshes[0].offset_provider()  # other arrays, the same contents
    bound = [
        NeighbourTables(tables).bind(module.interpolate_to_edges)
        for tables in (meshes[0].offset_provider(), meshes[1].offset_provider(), same_as_first)
    ]
    with translated_once():
        sdfgs = [program.__sdfg__() for program in bound]
    assert len(translations) == 2
    assert described(sdfgs[2]) == described(sdfgs[0])


def test_a_session_cache_stays_in_memory(translations, monkeypatch, tmp_path):
    monkeypatch.setattr(config, "BUILD_CACHE_LIFETIME", config.BuildCacheLifetime.SESSION)
    program = example("diffusion_2d").energy
    with translated_once():
        program.__sdfg__()
        program.__sdfg__()
    assert len(translations) == 1
    assert not list(tmp_path.rglob("*.pickle"))


def test_a_step_translates_each_program_once(translations):
    diffusion = example("diffusion_2d")
    d = gh.CartesianDecomposition((9, 7), halo=1, periodic=True, comm=MPI.COMM_SELF)
    step = diffusion.compiled_step(gh.make_exchange(d, backend="mpi"), MPI.COMM_SELF)
    fields = [np.zeros(d.allocated_shape) for _ in range(3)]
    step.to_sdfg(*fields, *(np.int32(b) for b in (1, 8, 1, 6)), lowered=False)
    names = sorted(p.definition_stage.definition.__name__ for p in translations)
    assert names == ["diffusion_step", "energy"]
