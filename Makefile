# Two commands: `make demo` runs the main job, `make test` the whole test suite.
# Both create .venv with Python 3.12 when missing and install the package into it; nothing is
# reinstalled while pyproject.toml is unchanged.

VENV      := .venv
BIN       := $(VENV)/bin
STAMP     := $(VENV)/.installed
# the demo needs no extra but viztracer (make profile): a venv without the test extras gets
# only that; one with them (make test ran) serves the demo as it is
DEMO      := $(if $(wildcard $(STAMP)),$(STAMP),$(VENV)/.installed-demo)
NP        ?= 2
# optional dependencies installed: ghex (the 'ghex' transport, built from source), profile
# (viztracer, for gh.profile), nvcc
# (CUDA 13 compiler wheels, ~350 MB: the tests compile the generated GPU code), nccl
# (NCCL's headers and library, ~300 MB: the tests build the nccl transport's GPU code) and
# icon4py (gt4py_halo.icon4py's needs, and ICON4Py itself: it pins another gt4py, so it goes
# in without its requirements); `make install EXTRAS=test` into a fresh venv leaves them out
EXTRAS    ?= test,ghex,profile,nvcc,nccl,icon4py
ICON4PY   := icon4py-common==0.4.1 icon4py-atmosphere-diffusion==0.4.1
# bundled MPICH on PATH; one OpenMP thread per rank (2 per rank made stencils 200x slower
# on a 2-core machine); gt4py's persistent cache so each program compiles once
RUN_ENV   := PATH="$(CURDIR)/$(BIN):$$PATH" OMP_NUM_THREADS=1 \
             GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR="$(CURDIR)/.cache/gt4py"

.PHONY: demo test install profile bench docs clean

install: $(STAMP)

$(BIN)/python:
	"$$(tools/find-python.sh)" -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# MPICH goes in first: GHEX's source build looks for mpicxx on PATH.
# the package's one compiled module (setup.py) is built by the install: a change to it reinstalls
BUILT_FROM := pyproject.toml setup.py src/gt4py_halo/_native.c

$(STAMP): $(BUILT_FROM) | $(BIN)/python
	$(if $(findstring ghex,$(EXTRAS)),tools/check-system-deps.sh)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pip install -q "mpich>=4.2" "mpi4py>=4.1"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	$(if $(findstring icon4py,$(EXTRAS)),$(BIN)/python -m pip install -q --no-deps $(ICON4PY))
	touch $@

$(VENV)/.installed-demo: $(BUILT_FROM) | $(BIN)/python
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pip install -q "mpich>=4.2" "mpi4py>=4.1"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pip install -q -e ".[profile]"
	touch $@

demo: $(DEMO)
	$(RUN_ENV) mpirun -n $(NP) $(BIN)/python -O -m mpi4py examples/diffusion_2d.py

test: $(STAMP)
	$(RUN_ENV) tools/run-tests.sh

# the demo profiled: profiles/demo/trace.json (vizviewer) and profiles/demo/summary.txt
profile: $(DEMO)
	$(RUN_ENV) GT4PY_HALO_PROFILE=profiles/demo mpirun -n $(NP) $(BIN)/python -O -m mpi4py \
		examples/diffusion_2d.py --rounds 3

# the API reference from the docstrings (the guide: docs/guide.md)
docs: $(STAMP)
	$(RUN_ENV) $(BIN)/python -m pdoc -d restructuredtext -o build/docs gt4py_halo

# every exchange benchmark against its peers (LLNL Comb, Devito, mpi4py, pyghex) and the
# physical limit, into docs/benchmarks.md's summary and docs/benchmarks.png (~15 min here).
# Comb builds from its sources, which nothing here fetches: COMB_SRC=a clone of
# https://github.com/LLNL/Comb with its submodules (git clone --recursive). Devito gets a venv
# of its own (it pins another NumPy).
COMB_SRC  ?=
DEVITO    := .venv-devito
bench: $(STAMP) build/comb/bin/comb build/limits build/liblimits.so $(DEVITO)/.installed
	$(BIN)/python -c "import matplotlib" 2>/dev/null || \
		PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pip install -q -e ".[bench]"
	$(RUN_ENV) $(BIN)/python benchmarks/bench.py --comb build/comb/bin/comb \
		--devito-python $(DEVITO)/bin/python

build/comb/bin/comb: | $(STAMP)
	@test -n "$(COMB_SRC)" || { echo "make bench needs LLNL Comb's sources: \
	make bench COMB_SRC=DIR, DIR a 'git clone --recursive https://github.com/LLNL/Comb.git'" >&2; \
	exit 1; }
	PATH="$(CURDIR)/$(BIN):$$PATH" benchmarks/build-comb.sh "$(COMB_SRC)" build/comb

build/limits: benchmarks/limits.c | $(STAMP)
	mkdir -p build
	$(BIN)/mpicc -O2 -o $@ $<

build/liblimits.so: benchmarks/limits.c | $(STAMP)
	mkdir -p build
	$(BIN)/mpicc -O2 -shared -fPIC -DLIMITS_LIBRARY -o $@ $<

$(DEVITO)/.installed:
	"$$(tools/find-python.sh)" -m venv $(DEVITO)
	$(DEVITO)/bin/python -m pip install -q "mpich>=4.2" "mpi4py>=4.1" devito==4.8.23
	touch $@

clean:
	rm -rf $(VENV) $(DEVITO) .cache build src/*.egg-info
