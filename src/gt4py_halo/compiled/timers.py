"""Timers in a compiled step, for profiles (``gt4py_halo.profiling``).

A step lowered while a profile is on reads ``CLOCK_MONOTONIC`` before and after each of its
exchange tasklets and each state of its own graph that does work (the stencils, fused with
the exchanges' pack and unpack maps where the lowering could), appending the readings to a
buffer in the step's library; the profile drains it when it ends (``drain``): no Python runs
per event. An exchange tasklet's phase comes from its label: ``<uid>_post`` / ``<uid>_wait``
(the arena and gather lowerings), ``<uid>_ghex_start`` / ``_finish`` / ``_exchange`` (GHEX,
whose blocking node packs, posts, waits and unpacks in one call: ``exchange``; shm alike). A state is
timed by a state before it and one after it, each a tasklet reading the clock: the state's
event holds the exchange events of the tasklets it runs. These readings are the host's: on a
GPU, when the work was launched. There the same two tasklets also record a CUDA event each on
the program's stream (the default one: ``program.codegen_config``), in order with the state's
kernels and without any wait; when the profile ends, the step's library waits for an event
recorded then and places every recorded pair on the host clock by its elapsed time to that
one (category ``device``).

A step lowered with profiling off has none of this code; the timers change its graph, so the
two builds have different digests and folders.
"""

from __future__ import annotations

import ctypes
from typing import Any

import dace
import numpy as np
from dace import dtypes
from dace.properties import CodeBlock

from gt4py_halo.compiled.graph import add_cpp_tasklet

#: Phase of an exchange tasklet, by the end of its label.
PHASE_OF_LABEL = {
    "_ghex_start": "post",
    "_ghex_finish": "wait",
    "_ghex_exchange": "exchange",
    "_shm_start": "post",
    "_shm_finish": "wait",
    "_shm_exchange": "exchange",
    "_post": "post",
    "_wait": "wait",
}
_COUNT, _DRAIN = "__gt4py_halo_timed_count", "__gt4py_halo_timed_events"
_HOST_CODE = """
#include <time.h>
#include <algorithm>
#include <vector>
namespace gt4py_halo_timers {
// per event: the timer's index, its begin and end, in microseconds of CLOCK_MONOTONIC
static std::vector<double> events;
inline double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
inline void record(int timer, double begin) {
    double end = now();
    events.insert(events.end(), {double(timer), begin, end});
}
// the beginnings of the states being timed, by timer
static std::vector<double> began;
inline void begin(int timer) {
    if (began.size() <= std::size_t(timer)) began.resize(timer + 1);
    began[timer] = now();
}
}  // namespace gt4py_halo_timers
"""
# CUDA events around a state's kernels; a device span is stored as timer -1 - its timer
_DEVICE_CODE = """
#include <cuda_runtime.h>
namespace gt4py_halo_timers {
struct device_span {
    int         timer;
    cudaEvent_t begin, end;
};
static std::vector<device_span> device_spans;
static std::vector<cudaEvent_t> spare;
inline cudaEvent_t recorded() {
    cudaEvent_t e;
    if (spare.empty()) {
        cudaEventCreate(&e);
    } else {
        e = spare.back();
        spare.pop_back();
    }
    cudaEventRecord(e, nullptr);  // the program's stream
    return e;
}
inline void device_begin(int timer) { device_spans.push_back({timer, recorded(), nullptr}); }
inline void device_end(int timer) {
    for (auto s = device_spans.rbegin(); s != device_spans.rend(); ++s)
        if (s->timer == timer && s->end == nullptr) {
            s->end = recorded();
            return;
        }
}
// when the profile ends, not in the step: the one wait, for an event recorded now
inline void flush_device() {
    if (device_spans.empty()) return;
    cudaEvent_t mark = recorded();
    cudaEventSynchronize(mark);
    double at = now();
    for (auto& s : device_spans) {
        float to_begin = 0, to_end = 0;
        if (s.end != nullptr && cudaEventElapsedTime(&to_begin, s.begin, mark) == cudaSuccess &&
            cudaEventElapsedTime(&to_end, s.end, mark) == cudaSuccess)
            events.insert(
                events.end(), {double(-1 - s.timer), at - 1e3 * to_begin, at - 1e3 * to_end});
        spare.push_back(s.begin);
        if (s.end != nullptr) spare.push_back(s.end);
    }
    device_spans.clear();
    spare.push_back(mark);
}
}  // namespace gt4py_halo_timers
"""
_NO_DEVICE_CODE = """
namespace gt4py_halo_timers {
inline void flush_device() {}
}  // namespace gt4py_halo_timers
"""
_EXPORTED_CODE = f"""
extern "C" DACE_EXPORTED long {_COUNT}() {{
    gt4py_halo_timers::flush_device();
    return long(gt4py_halo_timers::events.size() / 3);
}}
extern "C" DACE_EXPORTED long {_DRAIN}(double* out, long capacity) {{
    auto& events = gt4py_halo_timers::events;
    long n = std::min<long>(capacity, long(events.size() / 3));
    std::copy(events.begin(), events.begin() + 3 * n, out);
    events.erase(events.begin(), events.begin() + 3 * n);
    return n;
}}
"""


def add_timers(sdfg: dace.SDFG, gpu: bool) -> list[tuple[str, str, str]]:
    """Time every exchange tasklet of ``sdfg`` and every state of its own that does work
    (``gpu``: also on the device); returns what each timer times: (category, event name,
    what), in timer order."""
    timers: list[tuple[str, str, str]] = []
    for node, _ in sdfg.all_nodes_recursive():
        if not isinstance(node, dace.nodes.Tasklet) or node.language != dtypes.Language.CPP:
            continue
        suffix = next((s for s in PHASE_OF_LABEL if node.label.endswith(s)), None)
        if suffix is None:
            continue
        node.code = CodeBlock(
            "{ const double gt4py_halo_begin = gt4py_halo_timers::now();\n"
            f"{node.code.as_string}\n"
            f"gt4py_halo_timers::record({len(timers)}, gt4py_halo_begin); }}",
            dtypes.Language.CPP,
        )
        timers.append(("exchange", PHASE_OF_LABEL[suffix], node.label.removesuffix(suffix)))
    working = [
        state
        for state in sdfg.all_states()
        if state.sdfg is sdfg
        and any(isinstance(n, (dace.nodes.EntryNode, dace.nodes.NestedSDFG)) for n in state.nodes())
    ]
    for state in working:
        timer = len(timers)
        graph = state.parent_graph
        first = graph.start_block is state
        before = graph.add_state_before(state, is_start_block=first)
        begin = f"gt4py_halo_timers::begin({timer});"
        end = f"gt4py_halo_timers::record({timer}, gt4py_halo_timers::began[{timer}]);"
        if gpu:  # the device's after the host's: the state's kernels are launched in between
            begin += f"\ngt4py_halo_timers::device_begin({timer});"
            end = f"gt4py_halo_timers::device_end({timer});\n" + end
        _clock_state(before, begin)
        _clock_state(graph.add_state_after(state), end)
        timers.append(("state", state.label, state.label))
    if timers:
        device = _DEVICE_CODE if gpu else _NO_DEVICE_CODE
        sdfg.append_global_code(_HOST_CODE + device + _EXPORTED_CODE)
    return timers


def _clock_state(state: dace.SDFGState, code: str) -> None:
    add_cpp_tasklet(state, f"{state.label}_clock", {}, {}, code, side_effects=True)


def drain(compiled: Any, timers: list[tuple[str, str, str]], step: str) -> list[dict]:
    """The events the timers of ``compiled`` (a step's loaded build) recorded since the last
    drain, as Chrome trace events (without process and thread)."""
    if not timers:
        return []
    count = compiled._lib.get_symbol(_COUNT, ctypes.c_long)()
    values = np.empty((count, 3))
    read = compiled._lib.get_symbol(_DRAIN, ctypes.c_long)(
        values.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), ctypes.c_long(count)
    )
    events = []
    for timer, begin, end in values[:read]:
        category, name, what = timers[int(timer) if timer >= 0 else -1 - int(timer)]
        if timer < 0:
            category = "device"  # a state's kernels on the GPU
        events.append(
            {
                "ph": "X",
                "cat": category,
                "name": name,
                "ts": begin,
                "dur": end - begin,
                "args": {category: what, "in step": step, "compiled": True},
            }
        )
    return events
