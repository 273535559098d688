/* Block copies between host arrays, many in one call.

   A runtime exchange of NumPy fields copies a box per direction and field from fields to
   message buffers, from buffers to fields, and from owned cells to the halo of the same rank.
   Each box is a few contiguous runs; NumPy costs a Python call and microseconds per box,
   which on a small halo is most of the exchange. Here one call runs a whole phase's copies.

   run(program): program is a C-contiguous int64 buffer of records, one per copy,
       source address, destination address, run bytes, dims,
       then per outer dim (outermost first): count, source stride, destination stride (bytes)
   copying count_0 x ... x count_{dims-1} contiguous runs of `run bytes`. The records are
   made by gt4py_halo/runtime/packing.py from NumPy views of the same arrays and boxes (their
   addresses, shapes and strides), so every byte touched lies inside those views; the caller
   keeps the arrays alive while a program runs. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DIMS 32

static inline void copy_run(char *dst, const char *src, int64_t run) {
    switch (run) { /* the usual element sizes: inlined moves, not calls */
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, (size_t)run);
    }
}

static void copy_block(char *dst, const char *src, int64_t run, int64_t dims,
                       const int64_t *outer) {
    const int64_t count = outer[0], src_stride = outer[1], dst_stride = outer[2];
    if (dims == 1) {
        for (int64_t i = 0; i < count; ++i)
            copy_run(dst + i * dst_stride, src + i * src_stride, run);
        return;
    }
    for (int64_t i = 0; i < count; ++i)
        copy_block(dst + i * dst_stride, src + i * src_stride, run, dims - 1, outer + 3);
}

/* Whether `program` is a sequence of whole records. */
static int well_formed(const int64_t *at, const int64_t *end) {
    while (at + 4 <= end) {
        const int64_t dims = at[3];
        if (dims < 0 || dims > MAX_DIMS || 3 * dims > end - at - 4) return 0;
        at += 4 + 3 * dims;
    }
    return at == end;
}

static PyObject *run(PyObject *self, PyObject *program) {
    Py_buffer view;
    if (PyObject_GetBuffer(program, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const int64_t *at = (const int64_t *)view.buf;
    const int64_t *end = at + view.len / (Py_ssize_t)sizeof(int64_t);
    if (view.len % (Py_ssize_t)sizeof(int64_t) || !well_formed(at, end)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "gt4py_halo: a malformed copy program");
        return NULL;
    }
    while (at < end) {
        const char *src = (const char *)(intptr_t)at[0];
        char *dst = (char *)(intptr_t)at[1];
        const int64_t run = at[2], dims = at[3];
        if (dims == 0)
            copy_run(dst, src, run);
        else
            copy_block(dst, src, run, dims, at + 4);
        at += 4 + 3 * dims;
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run", run, METH_O, "Run a program of block copies (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_copies", "Block copies between host arrays, many in one call.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__copies(void) { return PyModule_Create(&module); }
