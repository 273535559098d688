/* gt4py_halo's C, where Python's cost per operation is more than the work.

   1. run(program): block copies between host arrays, many in one call.
   A runtime exchange of NumPy fields copies a box per direction and field from fields to
   message buffers, from buffers to fields, and from owned cells to the halo of the same rank.
   Each box is a few contiguous runs; NumPy costs a Python call and microseconds per box,
   which on a small halo is most of the exchange. Here one call runs a whole phase's copies.
   program is a C-contiguous int64 buffer of records, one per copy,
       source address, destination address, run bytes, dims,
       then per outer dim (outermost first): count, source stride, destination stride (bytes)
   copying count_0 x ... x count_{dims-1} contiguous runs of `run bytes`; or, for an index
   list (unstructured fields), with dims written as -1 - dims,
       source address, destination address, run bytes, -1 - dims,
       count, index address, indexed stride, other stride, scatter,
       then per outer dim of one entry: count, source stride, destination stride
   copying for each i < count the block of one entry: from source + index[i] x indexed stride
   to destination + i x other stride (a gather), or (scatter != 0) from source + i x other
   stride to destination + index[i] x indexed stride; index: count C-contiguous int64; or,
   for two blocks of one layout in lockstep, with dims written as PAIRED + dims (dims >= 1),
       source address, destination address, run bytes, PAIRED + dims,
       the second block's source address, its destination address,
       then the outer dims as above
   copying each run of the first block, then the same run of the second: blocks that no
   other block of the program reads or writes (a rank's two halos across its unit-stride
   axis, one element per row: their rows' cache lines are fetched once, not twice). The
   records are made by gt4py_halo/runtime/packing.py from NumPy views of the same arrays,
   boxes and the plan's index lists (their addresses, shapes and strides; indices the plan
   checked against the fields' shape), so every byte touched lies inside those views; the
   caller keeps the arrays and index lists alive while a program runs.

   2. Layout(objects): the objects' layouts, to tell whether what was checked and bound for
   them still holds (gt4py_halo/runtime/exchange.py). A NumPy array can change in place: be
   reshaped, given other strides or another dtype, made read-only; copies bound to its old
   layout would then write wrong halos. (NumPy refuses to resize a weakly referenced array, as
   every cached one is, so its memory stays.) The layout of an object exporting a buffer
   (NumPy) is its address, read-only flag, item size, element format, shape and strides; of
   others (device arrays, GT4Py fields) their shape.

   3. Again(args, buffers, address, bindings, clock): a compiled step's last call (gt4py_halo/
   compiled/last_call.py), run again when the next call passes the same objects whose buffers
   (a GT4Py field's is its ndarray, NumPy's itself) have the same layouts: a model's steady
   state, where the Python checks of that cost more than a small exchange; MessagesUnexpected
   where the step says its MPI exchanges received messages unlike expected; Rebound(index)
   where a name the step read at its build holds another object now (bindings, see
   rebound_index and gt4py_halo/compiled/bindings.py), before anything runs. It holds the
   arguments weakly where they allow it (a step never keeps a user's field alive), numbers
   (scalars) as they are, compared by type and value, a float's sign of zero included (and
   never a call with an argument of neither kind: holding it would keep it alive), and
   buffers weakly only (one that takes no weak reference is not held: its argument's own
   layout is checked). A GT4Py field keeps its buffer (a frozen dataclass): a
   field of the held buffer's layout is the field checked then. Before the step runs it
   writes the stamp of the call into the build's slots, and after counts the call (clock:
   (owner, address of the step's count of calls, the step's number, slot addresses), from
   gt4py_halo/compiled/stamps.py; owner keeps the memory alive).

   5. flag(address, op, value), flags_reached(pairs, seconds): the flags of the 'shm'
   transport (gt4py_halo/transports/shm/runtime.py), int64 words in a node's shared memory
   that other processes read and write: flag stores value with release order (op 0) or loads
   with acquire order (op 1, value unused), so that what a rank wrote before a store is seen
   by a rank that then loads it. flags_reached waits until
   each word of pairs (a C-contiguous int64 buffer of address, target pairs) holds at least
   its target, yielding the core between looks (ranks may share cores) and the GIL meanwhile;
   false if seconds passed first (the caller says that it waits, and waits again). The
   addresses are the transport's own control words, inside a shared window it keeps.

   6. ShmRun(...): a kept blocking call of the 'shm' transport (gt4py_halo/transports/shm/
   runtime.py's PreparedShmExchange.kept): the whole exchange in one call where nothing is
   in flight and the neighbours' records say what the kept copies were bound to; it hands
   the exchange to Python (slow(arrays, waiting, number, read)) where a record differs, or a
   wait lasts longer than SHM_FAST_WAIT_S (Python checks, reports and reads for others), and
   runs the Python exchange (elsewhere(arrays, waiting)) where an exchange is in flight.

   4. Persistent(...): the persistent MPI requests of a message set (gt4py_halo/transports/
   mpi/runtime.py), started and completed with the copies between them in one call per phase:
   on a small halo the Python calls around MPI (mpi4py's, the copies', the checks of what
   arrived) cost more than the messages. It calls the MPI that mpi4py loaded, through function
   addresses and handle values mpi4py gives (no MPI header here: handles are opaque bytes of
   the sizes mpi4py reports, and MPI_Datatype is passed as an int or a pointer by its size).
   Persistent requests keep their handles while started and completed, so mpi4py's Request
   objects and this copy of their handles stay interchangeable. Each start counts itself on
   the transport's counter of starts (one int64, shared by its message sets) and keeps the
   count it found (started()): ranks that start the same exchanges in the same order number
   them alike, whoever finishes first (the tag of an exchange's messages of runs).
   SlotRun(busy, slot, requests, pack, local, unpack, elsewhere, not_as_expected): a kept
   blocking call's exchange (6.) on one message set, its copies bound to the fields: while
   the set's slot is free it takes the slot (busy, the plan's set of busy slots), runs
   Persistent.exchange and frees it, calling not_as_expected(code) where the messages were
   not as expected; while the slot is busy (an exchange in flight holds it) it calls
   elsewhere(arrays, waiting), which takes another.

   5. Repeating: the base of a compiled step (gt4py_halo/compiled/program.py's Program) and of
   a runtime exchange's blocking call (gt4py_halo/runtime/exchange.py's BlockingExchange),
   whose call runs one of its kept calls (the list given to _keep, the most recently run
   first) in C when it passes that call's arguments again, with no Python frame between the
   caller and the step or the exchange: in a model's steady state (the same fields at each
   call, or sets of buffers swapped between calls) the Python of a call costs more than a
   small exchange. The call that ran goes to the front of the list. A step's kept call is an
   object whose `native` is an Again (or None: never run here); an exchange's is an
   ExchangeAgain (6.). Any other call goes to the object's `_called(*args, **kwargs)`, and so
   does every call while the watched name (watch: profiling's recorder) holds an object other
   than None or a watched hook (watch_hooks: DaCe's call hooks, which only its Python calls
   invoke) is registered; also a call whose kept arguments hold but a name the step read
   holds another object now (Rebound: Python raises the user's error from the same check).
   Where a step's kept call ran and its messages were unlike expected, its
   `messages_checked()` raises the user's error.

   6. ExchangeAgain(fields, arrays, dim, run, waiting, numbering, (name, kind, specs)): a
   runtime exchange's kept call: for the same fields (held as Again holds arguments, their
   arrays as buffers) and the same dim it calls run(arrays, waiting), the prepared exchange.
   Where the transport's messages do not check themselves, the ranks' agreement numbers every
   call (gt4py_halo/runtime/agreement.py): numbering, the agreement's Numbering base, whose
   per-call part for a kind of fields repeated (the dim's last, so no check) is done here as
   its Python does it (the call's number, the ring of the last calls); a call with anything
   more to do (alarms due to be read, a broken exchange, another kind) goes to Python. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

#define MAX_DIMS 32
#define LAYOUT_WORDS (5 + 2 * 64) /* NumPy's most dims: 64 */

static inline void copy_run(char *dst, const char *src, int64_t run) {
    switch (run) { /* the usual element sizes: inlined moves, not calls */
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, (size_t)run);
    }
}

/* `count` runs of `size` bytes, `src_stride` and `dst_stride` apart, and as many of a second
   block in lockstep where dst2 is not NULL; inlined where `size` is a constant: moves. */
static inline __attribute__((always_inline)) void moves(size_t size, char *dst, const char *src,
                                                        int64_t count, int64_t src_stride,
                                                        int64_t dst_stride, char *dst2,
                                                        const char *src2) {
    for (int64_t i = 0; i < count; ++i) {
        memcpy(dst + i * dst_stride, src + i * src_stride, size);
        if (dst2 != NULL) memcpy(dst2 + i * dst_stride, src2 + i * src_stride, size);
    }
}

/* The same, for runs of any size: the element sizes in loops of their own (a switch per run
   costs more than the move). */
static void copy_runs(char *dst, const char *src, int64_t run, int64_t count, int64_t src_stride,
                      int64_t dst_stride, char *dst2, const char *src2) {
    if (run == 8)
        moves(8, dst, src, count, src_stride, dst_stride, dst2, src2);
    else if (run == 4)
        moves(4, dst, src, count, src_stride, dst_stride, dst2, src2);
    else
        for (int64_t i = 0; i < count; ++i) {
            copy_run(dst + i * dst_stride, src + i * src_stride, run);
            if (dst2 != NULL) copy_run(dst2 + i * dst_stride, src2 + i * src_stride, run);
        }
}

static void copy_block(char *dst, const char *src, int64_t run, int64_t dims,
                       const int64_t *outer) {
    const int64_t count = outer[0], src_stride = outer[1], dst_stride = outer[2];
    if (dims == 1) {
        copy_runs(dst, src, run, count, src_stride, dst_stride, NULL, NULL);
        return;
    }
    for (int64_t i = 0; i < count; ++i)
        copy_block(dst + i * dst_stride, src + i * src_stride, run, dims - 1, outer + 3);
}

#define PAIRED 64 /* dims of a record of two blocks in lockstep: PAIRED + their dims */

static void copy_pair(char *dst, const char *src, char *dst2, const char *src2, int64_t run,
                      int64_t dims, const int64_t *outer) {
    const int64_t count = outer[0], src_stride = outer[1], dst_stride = outer[2];
    if (dims == 1) {
        copy_runs(dst, src, run, count, src_stride, dst_stride, dst2, src2);
        return;
    }
    for (int64_t i = 0; i < count; ++i) {
        const int64_t from = i * src_stride, to = i * dst_stride;
        copy_pair(dst + to, src + from, dst2 + to, src2 + from, run, dims - 1, outer + 3);
    }
}

/* The words of a record's head: 4, 9 for an index list (dims < 0: its dims are -1 - dims), 6
   for a pair (dims >= PAIRED: its dims are dims - PAIRED). */
static inline int64_t head_words(int64_t dims) { return dims < 0 ? 9 : dims >= PAIRED ? 6 : 4; }
static inline int64_t dims_of(int64_t dims) {
    return dims < 0 ? -1 - dims : dims >= PAIRED ? dims - PAIRED : dims;
}

/* Whether `program` is a sequence of whole records. */
static int well_formed(const int64_t *at, const int64_t *end) {
    while (at + 4 <= end) {
        const int64_t head = head_words(at[3]), dims = dims_of(at[3]);
        if (dims > MAX_DIMS || (at[3] >= PAIRED && dims < 1) || head + 3 * dims > end - at)
            return 0;
        at += head + 3 * dims;
    }
    return at == end;
}

static void copy_entries(char *dst, const char *src, int64_t run, int64_t dims,
                         const int64_t *at) {
    const int64_t count = at[0], indexed = at[2], other = at[3], scatter = at[4];
    const int64_t *index = (const int64_t *)(intptr_t)at[1];
    for (int64_t i = 0; i < count; ++i) {
        const char *from = scatter ? src + i * other : src + index[i] * indexed;
        char *to = scatter ? dst + index[i] * indexed : dst + i * other;
        if (dims == 0)
            copy_run(to, from, run);
        else
            copy_block(to, from, run, dims, at + 5);
    }
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
        if (dims < 0) {
            copy_entries(dst, src, run, -1 - dims, at + 4);
            at += 9 + 3 * (-1 - dims);
        } else if (dims >= PAIRED) {
            copy_pair(dst, src, (char *)(intptr_t)at[5], (const char *)(intptr_t)at[4], run,
                      dims - PAIRED, at + 6);
            at += 6 + 3 * (dims - PAIRED);
        } else {
            if (dims == 0)
                copy_run(dst, src, run);
            else
                copy_block(dst, src, run, dims, at + 4);
            at += 4 + 3 * dims;
        }
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* Writes the buffer layout of `obj` into `words` (LAYOUT_WORDS of them); returns their count,
   or 0 where `obj` exports no buffer. */
static Py_ssize_t buffer_layout(PyObject *obj, int64_t *words) {
    Py_buffer view;
    if (!PyObject_CheckBuffer(obj)) return 0;
    if (PyObject_GetBuffer(obj, &view, PyBUF_STRIDES | PyBUF_FORMAT) < 0) { /* e.g. a dtype
                                                                               with no format */
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = 0;
    if (view.ndim <= (LAYOUT_WORDS - 5) / 2) {
        uint64_t format = 14695981039346656037u; /* FNV-1a of the element format ("B" if none) */
        for (const char *c = view.format ? view.format : "B"; *c; ++c)
            format = (format ^ (unsigned char)*c) * 1099511628211u;
        words[0] = (int64_t)(intptr_t)view.buf;
        words[1] = view.readonly;
        words[2] = view.itemsize;
        words[3] = view.ndim;
        words[4] = (int64_t)format;
        for (int i = 0; i < view.ndim; ++i) {
            words[5 + i] = view.shape[i];
            words[5 + view.ndim + i] = view.strides[i];
        }
        n = 5 + 2 * (Py_ssize_t)view.ndim;
    }
    PyBuffer_Release(&view);
    return n;
}

static PyObject *shape_name;
/* Raised by Again's call when the step's MPI exchanges received messages unlike expected
   (gt4py_halo/compiled/last_call.py reads the library's note and raises the user's error). */
static PyObject *MessagesUnexpected;

/* The layout of `obj`: bytes of its buffer layout, else its shape, else NULL (none: a scalar). */
static PyObject *layout_of(PyObject *obj) {
    int64_t words[LAYOUT_WORDS];
    Py_ssize_t n = buffer_layout(obj, words);
    if (n > 0) return PyBytes_FromStringAndSize((const char *)words, n * 8);
    PyObject *shape = PyObject_GetAttr(obj, shape_name);
    if (shape == NULL) PyErr_Clear();
    return shape;
}

/* 1 if `obj` has `layout` (from layout_of), 0 if not, -1 on error. */
static int has_layout(PyObject *obj, PyObject *layout) {
    if (layout == NULL) return 1;
    if (PyBytes_CheckExact(layout)) {
        int64_t words[LAYOUT_WORDS];
        Py_ssize_t n = buffer_layout(obj, words);
        return n * 8 == PyBytes_GET_SIZE(layout) &&
               memcmp(words, PyBytes_AS_STRING(layout), (size_t)n * 8) == 0;
    }
    PyObject *shape = PyObject_GetAttr(obj, shape_name);
    if (shape == NULL) {
        PyErr_Clear();
        return 0;
    }
    int equal = PyObject_RichCompareBool(shape, layout, Py_EQ);
    Py_DECREF(shape);
    return equal;
}

/* The layouts of `n` objects, a new array of new references (or NULLs); NULL on error. */
static PyObject **layouts_of(PyObject *const *objects, Py_ssize_t n) {
    PyObject **layouts = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    if (layouts == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        layouts[i] = layout_of(objects[i]);
        if (PyErr_Occurred()) {
            for (Py_ssize_t j = 0; j <= i; ++j) Py_XDECREF(layouts[j]);
            PyMem_Free(layouts);
            return NULL;
        }
    }
    return layouts;
}

static void free_layouts(PyObject **layouts, Py_ssize_t n) {
    if (layouts == NULL) return;
    for (Py_ssize_t i = 0; i < n; ++i) Py_XDECREF(layouts[i]);
    PyMem_Free(layouts);
}

typedef struct {
    PyObject_HEAD
    Py_ssize_t count;
    PyObject **layouts;
} Layout;

static void layout_dealloc(Layout *self) {
    free_layouts(self->layouts, self->count);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *layout_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *objects;
    if (!PyArg_ParseTuple(args, "O", &objects)) return NULL;
    PyObject *fast = PySequence_Fast(objects, "Layout(objects): a sequence");
    if (fast == NULL) return NULL;
    Layout *self = (Layout *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->count = PySequence_Fast_GET_SIZE(fast);
        self->layouts = layouts_of(PySequence_Fast_ITEMS(fast), self->count);
        if (self->layouts == NULL) Py_CLEAR(self);
    }
    Py_DECREF(fast);
    return (PyObject *)self;
}

static PyObject *layout_same(Layout *self, PyObject *objects) {
    PyObject *fast = PySequence_Fast(objects, "same(objects): a sequence");
    if (fast == NULL) return NULL;
    int found = PySequence_Fast_GET_SIZE(fast) == self->count;
    for (Py_ssize_t i = 0; found == 1 && i < self->count; ++i)
        found = has_layout(PySequence_Fast_GET_ITEM(fast, i), self->layouts[i]);
    Py_DECREF(fast);
    if (found < 0) return NULL;
    return PyBool_FromLong(found);
}

static PyMethodDef layout_methods[] = {
    {"same", (PyCFunction)layout_same, METH_O,
     "same(objects): whether objects have the layouts the Layout was made of."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.Layout",
    .tp_basicsize = sizeof(Layout),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Layout(objects): their layouts (see the module's source); holds no object.",
    .tp_new = layout_new,
    .tp_dealloc = (destructor)layout_dealloc,
    .tp_methods = layout_methods,
};

/* Arguments as a kept call holds them (3. and 6.): weakly where they allow it, numbers as they
   are, and the layouts of their buffers then. */
typedef struct {
    Py_ssize_t count;
    int never;          /* an argument neither a number nor weakly referable: never the same */
    PyObject **held;    /* per argument: a weak reference, or the value itself */
    PyObject **buffers; /* per argument: a weak reference to its buffer, or NULL (itself) */
    PyObject **layouts; /* per argument: its buffer's layout then, or NULL */
} Held;

static int held_traverse(Held *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; self->held != NULL && i < self->count; ++i) Py_VISIT(self->held[i]);
    return 0;
}

static void held_free(Held *self) {
    for (Py_ssize_t i = 0; self->held != NULL && i < self->count; ++i) {
        Py_XDECREF(self->held[i]);
        Py_XDECREF(self->buffers[i]);
    }
    PyMem_Free(self->held);
    PyMem_Free(self->buffers);
    free_layouts(self->layouts, self->count);
    self->held = self->buffers = self->layouts = NULL;
}

typedef struct {
    PyObject_HEAD
    Held args;
    int (*step)(void); /* nonzero: its MPI exchanges received messages unlike expected */
    PyObject *bindings; /* the names the step read at its build (see rebound) */
    PyObject *clock;    /* what the addresses below lie in (kept alive) */
    int64_t *calls;     /* the step's count of calls that ran */
    int64_t number;     /* the step's number, in the high half of its stamps */
    Py_ssize_t nslots;
    int64_t **slots;    /* where the step's build reads the stamp of the running call */
} Again;

/* The bindings may hold the object whose step this is (a method's `self`, which holds the
   step): a cycle the garbage collector must see through. */
static int again_traverse(Again *self, visitproc visit, void *arg) {
    Py_VISIT(self->bindings);
    Py_VISIT(self->clock);
    return held_traverse(&self->args, visit, arg);
}

static int again_clear(Again *self) {
    Py_CLEAR(self->bindings);
    Py_CLEAR(self->clock);
    return 0;
}

static void again_dealloc(Again *self) {
    PyObject_GC_UnTrack(self);
    held_free(&self->args);
    Py_XDECREF(self->bindings);
    Py_XDECREF(self->clock);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A weak reference to `obj`, or `obj` itself where it takes none and is a number (a
   scalar); Py_None for an object of neither kind (held, it would be kept alive); NULL on
   error. */
static PyObject *hold(PyObject *obj) {
    PyObject *ref = PyWeakref_NewRef(obj, NULL);
    if (ref == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        ref = Py_NewRef(PyNumber_Check(obj) ? obj : Py_None);
    }
    return ref;
}

/* Whether scalars `a` and `b` of one type are the same value: equal, and of the same bits
   where a float's equal values differ (0.0 and -0.0 are equal; 1 / x tells them apart).
   -1 on error. */
static int same_value(PyObject *a, PyObject *b) {
    int equal = PyObject_RichCompareBool(a, b, Py_EQ);
    if (equal != 1 || PyLong_Check(a)) return equal;
    double x = PyFloat_AsDouble(a), y = PyFloat_AsDouble(b);
    if (PyErr_Occurred()) { /* no float: no signed zero */
        PyErr_Clear();
        return 1;
    }
    return memcmp(&x, &y, sizeof x) == 0;
}

/* The object `held` (from hold) refers to, NULL if it died; borrowed, compared as an address
   or used while its holder (an argument of the call) keeps it alive. -1 on error. */
static int held_object(PyObject *held, PyObject **obj) {
    if (!PyWeakref_CheckRef(held)) {
        *obj = held;
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (PyWeakref_GetRef(held, obj) < 0) return -1;
    Py_XDECREF(*obj);
#else
    *obj = PyWeakref_GET_OBJECT(held);
    if (*obj == Py_None) *obj = NULL;
#endif
    return 0;
}

/* What binding `root`, `names` resolves to now (a new reference): `root` a dict (exactly)
   in which names[0] is looked up, a cell (its contents), or an object (or a weak reference
   to it); then the rest of `names` as its attributes. NULL where it resolves to nothing
   (gone, or an attribute lookup raised: what it raised is dropped, the name counts as
   changed); NULL with an error set on an error of the dict's. */
static PyObject *resolve(PyObject *root, PyObject *names) {
    Py_ssize_t i = 0, n = PyTuple_GET_SIZE(names);
    PyObject *value;
    if (PyDict_CheckExact(root)) {
        if (n == 0) return NULL;
        value = PyDict_GetItemWithError(root, PyTuple_GET_ITEM(names, 0));
        i = 1;
    } else if (PyCell_Check(root)) {
        value = PyCell_GET(root);
    } else if (PyWeakref_CheckRef(root)) {
        if (held_object(root, &value) < 0) return NULL;
    } else {
        value = root;
    }
    if (value == NULL) return NULL;
    Py_INCREF(value);
    for (; i < n; ++i) {
        PyObject *next = PyObject_GetAttr(value, PyTuple_GET_ITEM(names, i));
        Py_DECREF(value);
        if (next == NULL) {
            PyErr_Clear();
            return NULL;
        }
        value = next;
    }
    return value;
}

/* Whether `obj != obj` is true (a NaN): 1, 0, or -1 with an error set. (RichCompareBool
   would say an object equals itself.) */
static int unequal_to_itself(PyObject *obj) {
    PyObject *unequal = PyObject_RichCompare(obj, obj, Py_NE);
    if (unequal == NULL) return -1;
    int truth = PyObject_IsTrue(unequal);
    Py_DECREF(unequal);
    return truth;
}

/* Whether constants `was` and `now` (held by value: numbers, strings, tuples) compile alike:
   floats (Python's or NumPy's float64) of the same bits (a NaN is a NaN, -0.0 is not 0.0),
   or objects of one type that are equal, or both unequal to themselves (NaNs of NumPy's
   other floats); those that do not compare (arrays in a tuple) are not. */
static int same_constant(PyObject *was, PyObject *now) {
    if (PyFloat_Check(was) && PyFloat_Check(now)) {
        double x = PyFloat_AS_DOUBLE(was), y = PyFloat_AS_DOUBLE(now);
        return memcmp(&x, &y, sizeof x) == 0;
    }
    if (Py_TYPE(was) != Py_TYPE(now)) return 0;
    int equal = PyObject_RichCompareBool(was, now, Py_EQ);
    if (equal == 0) equal = unequal_to_itself(was) == 1 && unequal_to_itself(now) == 1;
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return equal == 1;
}

/* The index of the first of `bindings` ((root, names, held, weak) tuples, gt4py_halo/
   compiled/bindings.py) that resolves to another object than it held (by a weak reference
   if weak, else the object itself, then a constant compared by value: same_constant); -1 if
   none; -2 on error. */
static Py_ssize_t rebound_index(PyObject *bindings) {
    Py_ssize_t n = PyTuple_GET_SIZE(bindings);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *entry = PyTuple_GET_ITEM(bindings, i), *was = PyTuple_GET_ITEM(entry, 2);
        int weak = PyTuple_GET_ITEM(entry, 3) == Py_True;
        PyObject *now = resolve(PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1));
        if (now == NULL) {
            if (PyErr_Occurred()) return -2;
            return i;
        }
        if (weak && held_object(was, &was) < 0) {
            Py_DECREF(now);
            return -2;
        }
        int equal = was == now;
        if (!equal && was != NULL && !weak) equal = same_constant(was, now);
        Py_DECREF(now);
        if (!equal) return i;
    }
    return -1;
}

static PyObject *Rebound;

/* 0 if the step's names hold what they did at its build; -1 with Rebound(index) raised if
   one does not, or with the error raised. */
static int check_bindings(PyObject *bindings) {
    if (bindings == NULL) return 0;
    Py_ssize_t index = rebound_index(bindings);
    if (index == -1) return 0;
    if (index >= 0) {
        PyObject *value = PyLong_FromSsize_t(index);
        if (value != NULL) {
            PyErr_SetObject(Rebound, value);
            Py_DECREF(value);
        }
    }
    return -1;
}

static PyObject *rebound(PyObject *module, PyObject *bindings) {
    if (!PyTuple_Check(bindings)) {
        PyErr_SetString(PyExc_TypeError, "gt4py_halo: rebound takes a tuple");
        return NULL;
    }
    Py_ssize_t index = rebound_index(bindings);
    if (index == -2) return NULL;
    return PyLong_FromSsize_t(index);
}

/* Hold `arguments` (a tuple) in `self` (zeroed), with `buffers` (a tuple: per argument its
   buffer, or the argument itself); 0, or -1 on error (what was held is freed by held_free). */
static int held_init(Held *self, PyObject *arguments, PyObject *buffers) {
    Py_ssize_t n = PyTuple_GET_SIZE(arguments);
    if (PyTuple_GET_SIZE(buffers) != n) {
        PyErr_SetString(PyExc_ValueError, "gt4py_halo: a buffer per argument");
        return -1;
    }
    self->held = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    self->buffers = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    PyObject **checked = PyMem_Calloc(n ? n : 1, sizeof(PyObject *)); /* borrowed */
    if (self->held == NULL || self->buffers == NULL || checked == NULL) {
        PyMem_Free(checked);
        PyErr_NoMemory();
        return -1;
    }
    self->count = n;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *arg = PyTuple_GET_ITEM(arguments, i), *buffer = PyTuple_GET_ITEM(buffers, i);
        checked[i] = arg;
        if ((self->held[i] = hold(arg)) == NULL) break;
        if (self->held[i] == Py_None && arg != Py_None) self->never = 1;
        if (buffer == arg) continue;
        /* a buffer that takes no weak reference is not held (it would be kept alive): the
           argument's own layout is checked instead */
        self->buffers[i] = PyWeakref_NewRef(buffer, NULL);
        if (self->buffers[i] != NULL) {
            checked[i] = buffer;
        } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
        } else {
            break;
        }
    }
    if (!PyErr_Occurred()) self->layouts = layouts_of(checked, n);
    PyMem_Free(checked);
    return self->layouts == NULL ? -1 : 0;
}

/* 1 if `args` are the held arguments, alive and their buffers of their layouts then; 0 if
   not; -1 on error. */
static int held_same(Held *self, PyObject *args) {
    if (self->never || !PyTuple_Check(args) || PyTuple_GET_SIZE(args) != self->count) return 0;
    for (Py_ssize_t i = 0; i < self->count; ++i) {
        PyObject *arg = PyTuple_GET_ITEM(args, i), *held, *buffer = arg;
        if (!PyWeakref_CheckRef(self->held[i])) {
            /* a scalar, held itself: equal by type and value (the same value is not always
               the same object: CPython caches small ints, so a rank's recomputed value would
               be the last call's on some ranks only) */
            held = self->held[i];
            if (held == arg) continue;
            if (Py_TYPE(held) != Py_TYPE(arg)) return 0;
            int equal = same_value(held, arg);
            if (equal != 1) return equal;
            continue;
        }
        if (held_object(self->held[i], &held) < 0) return -1;
        if (held != arg) return 0;
        if (self->buffers[i] != NULL) {
            if (held_object(self->buffers[i], &buffer) < 0) return -1;
            if (buffer == NULL) return 0;
        }
        int equal = has_layout(buffer, self->layouts[i]);
        if (equal != 1) return equal;
    }
    return 1;
}

static PyObject *again_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *arguments, *buffers, *address, *bindings, *clock, *calls, *slots;
    long long number;
    if (!PyArg_ParseTuple(args, "O!O!O!O!(OO!LO!)", &PyTuple_Type, &arguments, &PyTuple_Type,
                          &buffers, &PyLong_Type, &address, &PyTuple_Type, &bindings, &clock,
                          &PyLong_Type, &calls, &number, &PyTuple_Type, &slots))
        return NULL;
    void *step = PyLong_AsVoidPtr(address);
    if (step == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "gt4py_halo: no step");
        return NULL;
    }
    Again *self = (Again *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->step = (int (*)(void))step;
    self->bindings = Py_NewRef(bindings);
    self->clock = Py_NewRef(clock);
    self->number = number;
    self->calls = (int64_t *)PyLong_AsVoidPtr(calls);
    if (self->calls == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "gt4py_halo: no count of calls");
        Py_DECREF(self);
        return NULL;
    }
    self->nslots = PyTuple_GET_SIZE(slots);
    self->slots = PyMem_Calloc(self->nslots ? self->nslots : 1, sizeof(int64_t *));
    if (self->slots == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < self->nslots; ++i) {
        self->slots[i] = (int64_t *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(slots, i));
        if (PyErr_Occurred()) {
            Py_DECREF(self);
            return NULL;
        }
    }
    if (held_init(&self->args, arguments, buffers) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* 1 if `args` are the held arguments (held_same); 0 if not; -1 on error, and with Rebound
   raised where they are and a name the step read holds another object (check_bindings). */
static int same(Again *self, PyObject *args) {
    int found = held_same(&self->args, args);
    if (found != 1) return found;
    /* the same arguments: then the names (new ones go to Python, which checks them there
       with the other ranks) */
    return check_bindings(self->bindings) < 0 ? -1 : 1;
}

static PyObject *again_same(Again *self, PyObject *args) {
    int found = same(self, args);
    if (found < 0) return NULL;
    return PyBool_FromLong(found);
}

/* 1 if `arguments` are the held ones (same) and the step ran for them, 0 if they are not
   (nothing ran); -1 on error: Rebound before anything ran, MessagesUnexpected after. */
static int run_again(Again *self, PyObject *arguments) {
    int found = same(self, arguments);
    if (found != 1) return found;
    int unexpected;
    /* the stamp of this call where the build reads it (as StepClock.stamp writes it,
       gt4py_halo/compiled/stamps.py) */
    const int64_t calls = *self->calls + 1;
    const int64_t stamp = (int64_t)((uint64_t)self->number << 32 | ((uint64_t)calls & 0xFFFFFFFFu));
    for (Py_ssize_t i = 0; i < self->nslots; ++i) *self->slots[i] = stamp;
    Py_BEGIN_ALLOW_THREADS /* as ctypes does: a step may run long (it waits for messages) */
    unexpected = self->step();
    Py_END_ALLOW_THREADS
    *self->calls = calls;
    if (unexpected) {
        PyErr_SetNone(MessagesUnexpected);
        return -1;
    }
    return 1;
}

static PyObject *again_call(Again *self, PyObject *args, PyObject *kwargs) {
    PyObject *arguments;
    if (!PyArg_ParseTuple(args, "O", &arguments)) return NULL;
    int found = run_again(self, arguments);
    if (found < 0) return NULL;
    return PyBool_FromLong(found);
}

static PyMethodDef again_methods[] = {
    {"same", (PyCFunction)again_same, METH_O,
     "same(args): whether args are the held arguments, alive and of their layouts then."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AgainType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.Again",
    .tp_basicsize = sizeof(Again),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Again(args, buffers, address, bindings, clock): called with the same args, "
              "stamps and calls the C function at address (no arguments) and returns True; else "
              "returns False.",
    .tp_new = again_new,
    .tp_traverse = (traverseproc)again_traverse,
    .tp_clear = (inquiry)again_clear,
    .tp_dealloc = (destructor)again_dealloc,
    .tp_call = (ternaryfunc)again_call,
    .tp_methods = again_methods,
};

/* Numbering (6. above). */
typedef struct {
    PyObject_HEAD
    long long call;   /* the number of the exchange's last call */
    double read_due;  /* when a call next reads the alarms (time.monotonic()) */
    PyObject *broken; /* None, or what broke the exchange */
    PyObject *last;   /* per dim, the kind of fields of its last exchange (a dict) */
    PyObject *made;   /* the last calls, each (call, dim, kind, specs) at its number modulo
                         their count (a list) */
} Numbering;

static int numbering_traverse(Numbering *self, visitproc visit, void *arg) {
    Py_VISIT(self->broken);
    Py_VISIT(self->last);
    Py_VISIT(self->made);
    return 0;
}

static int numbering_clear(Numbering *self) {
    Py_CLEAR(self->broken);
    Py_CLEAR(self->last);
    Py_CLEAR(self->made);
    return 0;
}

static void numbering_dealloc(Numbering *self) {
    PyObject_GC_UnTrack(self);
    numbering_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef numbering_members[] = {
    {"call", T_LONGLONG, offsetof(Numbering, call), 0, "The number of the last call."},
    {"_read_due", T_DOUBLE, offsetof(Numbering, read_due), 0,
     "When a call next reads the alarms (time.monotonic())."},
    {"_broken", T_OBJECT, offsetof(Numbering, broken), 0, "None, or what broke the exchange."},
    {"last", T_OBJECT_EX, offsetof(Numbering, last), 0,
     "Per dim, the kind of fields of its last exchange."},
    {"_calls", T_OBJECT_EX, offsetof(Numbering, made), 0,
     "The last calls, (call, dim, kind, specs) at call modulo their count."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NumberingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.Numbering",
    .tp_basicsize = sizeof(Numbering),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The base of a runtime exchange's agreement: what a call repeating its dim's "
              "last kind of fields reads and writes, which ExchangeAgain does in C.",
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)numbering_traverse,
    .tp_clear = (inquiry)numbering_clear,
    .tp_dealloc = (destructor)numbering_dealloc,
    .tp_members = numbering_members,
};

/* 1 if `numbering` numbered a call of `name` and `kind` of fields (`specs`), as its Python
   next_call and made do where nothing is due (no alarms to read, the exchange not broken)
   and `kind` is the last kind of `name` (no check); 0 if it did not (Python does all of it);
   -1 on error. */
static int numbered(Numbering *self, PyObject *name, PyObject *kind, PyObject *specs) {
    struct timespec now;
    if ((self->broken != NULL && self->broken != Py_None) || self->last == NULL ||
        !PyDict_Check(self->last) || self->made == NULL || !PyList_Check(self->made) ||
        PyList_GET_SIZE(self->made) == 0 || clock_gettime(CLOCK_MONOTONIC, &now) != 0 ||
        (double)now.tv_sec + 1e-9 * (double)now.tv_nsec >= self->read_due)
        return 0;
    PyObject *last = PyDict_GetItemWithError(self->last, name);
    if (last == NULL) return PyErr_Occurred() ? -1 : 0;
    int equal = PyObject_RichCompareBool(last, kind, Py_EQ);
    if (equal != 1) return equal;
    PyObject *call = PyLong_FromLongLong(self->call + 1);
    PyObject *made = call == NULL ? NULL : PyTuple_Pack(4, call, name, kind, specs);
    Py_XDECREF(call);
    if (made == NULL) return -1;
    self->call += 1;
    return PyList_SetItem(self->made, (Py_ssize_t)(self->call % PyList_GET_SIZE(self->made)),
                          made) < 0 ? -1 : 1;
}

/* ExchangeAgain (6. above). */
typedef struct {
    PyObject_HEAD
    Held fields;
    PyObject *dim;       /* the call's dim argument: None or a str */
    PyObject *run;       /* run(arrays, waiting): the prepared exchange */
    PyObject *waiting;   /* what a slow wait for its messages does, or None */
    PyObject *numbering; /* the exchange's agreement (a Numbering), or None */
    PyObject *name;      /* the dim the ranks compare, the kind of the fields and their specs */
    PyObject *kind;
    PyObject *specs;
} ExchangeAgain;

static int exchange_again_traverse(ExchangeAgain *self, visitproc visit, void *arg) {
    Py_VISIT(self->dim);
    Py_VISIT(self->run);
    Py_VISIT(self->waiting);
    Py_VISIT(self->numbering);
    Py_VISIT(self->name);
    Py_VISIT(self->kind);
    Py_VISIT(self->specs);
    return held_traverse(&self->fields, visit, arg);
}

static int exchange_again_clear(ExchangeAgain *self) {
    Py_CLEAR(self->dim);
    Py_CLEAR(self->run);
    Py_CLEAR(self->waiting);
    Py_CLEAR(self->numbering);
    Py_CLEAR(self->name);
    Py_CLEAR(self->kind);
    Py_CLEAR(self->specs);
    return 0;
}

static void exchange_again_dealloc(ExchangeAgain *self) {
    PyObject_GC_UnTrack(self);
    exchange_again_clear(self);
    held_free(&self->fields);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *exchange_again_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fields, *arrays, *dim, *run, *waiting, *numbering, *name, *kind, *specs;
    if (!PyArg_ParseTuple(args, "O!O!OOOO(OOO)", &PyTuple_Type, &fields, &PyTuple_Type, &arrays,
                          &dim, &run, &waiting, &numbering, &name, &kind, &specs))
        return NULL;
    if (dim != Py_None && !PyUnicode_CheckExact(dim)) {
        PyErr_SetString(PyExc_TypeError, "gt4py_halo: ExchangeAgain's dim is None or a str");
        return NULL;
    }
    if (numbering != Py_None && !PyObject_TypeCheck(numbering, &NumberingType)) {
        PyErr_SetString(PyExc_TypeError, "gt4py_halo: ExchangeAgain's numbering is a Numbering");
        return NULL;
    }
    ExchangeAgain *self = (ExchangeAgain *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->dim = Py_NewRef(dim);
    self->run = Py_NewRef(run);
    self->waiting = Py_NewRef(waiting);
    self->numbering = Py_NewRef(numbering);
    self->name = Py_NewRef(name);
    self->kind = Py_NewRef(kind);
    self->specs = Py_NewRef(specs);
    if (held_init(&self->fields, fields, arrays) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    /* an array not held (it takes no weak reference) could not be passed to run: never in C */
    for (Py_ssize_t i = 0; i < self->fields.count; ++i)
        if (self->fields.buffers[i] == NULL &&
            PyTuple_GET_ITEM(arrays, i) != PyTuple_GET_ITEM(fields, i))
            self->fields.never = 1;
    return (PyObject *)self;
}

static PyObject *dim_name;

/* 1 if `args` and `kwargs` are the held call's (the same fields, alive and of their layouts
   then, and the same dim) and the exchange ran for them; 0 if not, or if the agreement must
   run in Python (numbered): nothing ran; -1 on error. */
static int run_exchange_again(ExchangeAgain *self, PyObject *args, PyObject *kwargs) {
    PyObject *dim = Py_None;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        if (PyDict_GET_SIZE(kwargs) != 1) return 0;
        dim = PyDict_GetItemWithError(kwargs, dim_name);
        if (dim == NULL) return PyErr_Occurred() ? -1 : 0;
    }
    if (dim != self->dim) {
        if (dim == Py_None || self->dim == Py_None || !PyUnicode_CheckExact(dim)) return 0;
        int equal = PyUnicode_Compare(dim, self->dim);
        if (equal == -1 && PyErr_Occurred()) return -1;
        if (equal != 0) return 0;
    }
    int found = held_same(&self->fields, args);
    if (found != 1) return found;
    if (self->numbering != Py_None) {
        found = numbered((Numbering *)self->numbering, self->name, self->kind, self->specs);
        if (found != 1) return found;
    }
    PyObject *arrays = PyList_New(self->fields.count);
    if (arrays == NULL) return -1;
    for (Py_ssize_t i = 0; i < self->fields.count; ++i) {
        PyObject *array = PyTuple_GET_ITEM(args, i);
        if (self->fields.buffers[i] != NULL && held_object(self->fields.buffers[i], &array) < 0) {
            Py_DECREF(arrays);
            return -1;
        }
        PyList_SET_ITEM(arrays, i, Py_NewRef(array)); /* (alive: held_same found it) */
    }
    PyObject *result = PyObject_CallFunctionObjArgs(self->run, arrays, self->waiting, NULL);
    Py_DECREF(arrays);
    if (result == NULL) return -1;
    Py_DECREF(result);
    return 1;
}

static PyTypeObject ExchangeAgainType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.ExchangeAgain",
    .tp_basicsize = sizeof(ExchangeAgain),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "ExchangeAgain(fields, arrays, dim, run, waiting, numbering, (name, kind, "
              "specs)): a runtime exchange's kept call, which a Repeating runs for the same "
              "fields and dim.",
    .tp_new = exchange_again_new,
    .tp_traverse = (traverseproc)exchange_again_traverse,
    .tp_clear = (inquiry)exchange_again_clear,
    .tp_dealloc = (destructor)exchange_again_dealloc,
};

/* Repeating (5. above). */
typedef struct {
    PyObject_HEAD
    PyObject *calls; /* a list of its kept calls, the most recently run first; or NULL */
} Repeating;

static PyObject *watched_namespace, *watched_name, *watched_hooks, *called_name, *native_name,
    *checked_name;

static int repeating_traverse(Repeating *self, visitproc visit, void *arg) {
    Py_VISIT(self->calls);
    return 0;
}

static int repeating_clear(Repeating *self) {
    Py_CLEAR(self->calls);
    return 0;
}

static void repeating_dealloc(Repeating *self) {
    PyObject_GC_UnTrack(self);
    repeating_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 if neither the watched name nor a watched hook is set (or no name is watched yet: then
   0), -1 on error. */
static int quiet(void) {
    if (watched_namespace == NULL) return 0;
    PyObject *value = PyDict_GetItemWithError(watched_namespace, watched_name);
    if (value == NULL && PyErr_Occurred()) return -1;
    if (value != NULL && value != Py_None) return 0;
    for (Py_ssize_t i = 0; watched_hooks != NULL && i < PyList_GET_SIZE(watched_hooks); ++i)
        if (PyList_GET_ITEM(watched_hooks, i) != Py_None) return 0;
    return 1;
}

/* 1 if one of the kept calls ran for `args` and `kwargs` (then it is moved to the front of
   the list), 0 if none is theirs (nothing ran), -1 on error. A kept call is an ExchangeAgain,
   or an object whose `native` is an Again (a step's, which takes no keyword arguments) or
   None (passed over). Rebound is dropped (0): Python raises the user's error from the same
   check. */
static int run_kept(PyObject *calls, PyObject *args, PyObject *kwargs) {
    const int keywords = kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(calls); ++i) {
        PyObject *call = PyList_GET_ITEM(calls, i);
        int ran;
        Py_INCREF(call); /* the list may change below */
        if (Py_IS_TYPE(call, &ExchangeAgainType)) {
            ran = run_exchange_again((ExchangeAgain *)call, args, kwargs);
        } else {
            PyObject *native = PyObject_GetAttr(call, native_name);
            if (native == NULL) {
                Py_DECREF(call);
                return -1;
            }
            if (keywords || !PyObject_TypeCheck(native, &AgainType)) {
                Py_DECREF(native);
                Py_DECREF(call);
                continue;
            }
            ran = run_again((Again *)native, args);
            Py_DECREF(native);
            if (ran < 0 && PyErr_ExceptionMatches(MessagesUnexpected)) {
                PyErr_Clear(); /* it ran: the call raises the user's error */
                PyObject *result = PyObject_CallMethodNoArgs(call, checked_name);
                Py_XDECREF(result);
                ran = result == NULL ? -1 : 1;
            } else if (ran < 0 && PyErr_ExceptionMatches(Rebound)) {
                PyErr_Clear();
                Py_DECREF(call);
                return 0;
            }
        }
        if (ran == 1 && i > 0 && PyList_GET_SIZE(calls) > i && PyList_GET_ITEM(calls, i) == call &&
            (PySequence_DelItem(calls, i) < 0 || PyList_Insert(calls, 0, call) < 0))
            ran = -1;
        Py_DECREF(call);
        if (ran != 0) return ran;
    }
    return 0;
}

static PyObject *repeating_call(Repeating *self, PyObject *args, PyObject *kwargs) {
    if (self->calls != NULL) {
        PyObject *calls = Py_NewRef(self->calls);
        int ran = quiet();
        if (ran == 1) ran = run_kept(calls, args, kwargs);
        Py_DECREF(calls);
        if (ran < 0) return NULL;
        if (ran == 1) Py_RETURN_NONE;
    }
    PyObject *called = PyObject_GetAttr((PyObject *)self, called_name);
    if (called == NULL) return NULL;
    PyObject *result = PyObject_Call(called, args, kwargs);
    Py_DECREF(called);
    return result;
}

static PyObject *repeating_keep(Repeating *self, PyObject *calls) {
    if (calls != Py_None && !PyList_Check(calls)) {
        PyErr_SetString(PyExc_TypeError, "gt4py_halo: _keep takes a list or None");
        return NULL;
    }
    Py_CLEAR(self->calls);
    if (calls != Py_None) self->calls = Py_NewRef(calls);
    Py_RETURN_NONE;
}

static PyMethodDef repeating_methods[] = {
    {"_keep", (PyCFunction)repeating_keep, METH_O,
     "_keep(calls): the kept calls its call runs in C (a list, kept as it is, the most "
     "recently run first), or None: none."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RepeatingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.Repeating",
    .tp_basicsize = sizeof(Repeating),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The base of a compiled step and of a runtime exchange's blocking call: its call "
              "runs a kept call in C when it can, else calls self._called(*args, **kwargs).",
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)repeating_traverse,
    .tp_clear = (inquiry)repeating_clear,
    .tp_dealloc = (destructor)repeating_dealloc,
    .tp_call = (ternaryfunc)repeating_call,
    .tp_methods = repeating_methods,
};

static PyObject *quiet_now(PyObject *module, PyObject *unused) {
    int found = quiet();
    if (found < 0) return NULL;
    return PyBool_FromLong(found);
}

static PyObject *watch(PyObject *module, PyObject *args) {
    PyObject *namespace, *name;
    if (!PyArg_ParseTuple(args, "O!U", &PyDict_Type, &namespace, &name)) return NULL;
    Py_XSETREF(watched_namespace, Py_NewRef(namespace));
    Py_XSETREF(watched_name, Py_NewRef(name));
    Py_RETURN_NONE;
}

static PyObject *watch_hooks(PyObject *module, PyObject *hooks) {
    if (!PyList_Check(hooks)) {
        PyErr_SetString(PyExc_TypeError, "gt4py_halo: watch_hooks takes a list");
        return NULL;
    }
    Py_XSETREF(watched_hooks, Py_NewRef(hooks));
    Py_RETURN_NONE;
}

typedef int (*startall_f)(int, void *);
typedef int (*waitall_f)(int, void *, void *);
typedef int (*count_int_f)(const void *, int, int *);
typedef int (*count_ptr_f)(const void *, void *, int *);

typedef struct {
    PyObject_HEAD
    startall_f startall;
    waitall_f waitall;
    void *get_count;
    int datatype_is_int; /* MPI_Datatype an int (MPICH's ABI), else a pointer */
    intptr_t byte;       /* MPI_BYTE's handle */
    int nrecv, nsend;
    Py_ssize_t status_size;
    char *recv, *send;   /* the requests' handles, contiguous as MPI_Startall takes them */
    char *statuses;      /* one per receive (and per send: room for the larger count) */
    int64_t *expected;   /* per receive: the message's bytes */
    char **trailers;     /* per receive: where its fields' signature lands, or NULL */
    uint64_t signature;
    PyObject *counter;  /* the transport's count of starts: an object of one writable int64 */
    int64_t *starts;    /* its memory */
    int64_t started;    /* the count at this set's last start */
    PyObject *error; /* raised with MPI's error code: mpi4py's MPI.Exception */
    unsigned long waits; /* 2 per wait, odd while one lasts: read from another thread */
} Persistent;

static void persistent_dealloc(Persistent *self) {
    PyMem_Free(self->recv);
    PyMem_Free(self->send);
    PyMem_Free(self->statuses);
    PyMem_Free(self->expected);
    PyMem_Free(self->trailers);
    Py_XDECREF(self->counter);
    Py_XDECREF(self->error);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void *copy_of(const Py_buffer *view) {
    void *copy = PyMem_Malloc(view->len ? (size_t)view->len : 1);
    if (copy != NULL) memcpy(copy, view->buf, (size_t)view->len);
    return copy;
}

static PyObject *persistent_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    unsigned long long startall, waitall, get_count, byte, signature;
    Py_ssize_t request_size, status_size, datatype_size;
    Py_buffer recv, send, expected, trailers, starts;
    PyObject *error, *counter;
    if (!PyArg_ParseTuple(args, "(KKK)(nnn)KOy*y*y*y*KO", &startall, &waitall, &get_count,
                          &request_size, &status_size, &datatype_size, &byte, &error, &recv,
                          &send, &expected, &trailers, &signature, &counter))
        return NULL;
    Persistent *self = NULL;
    if (PyObject_GetBuffer(counter, &starts, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        starts.obj = NULL;
        goto done;
    }
    Py_ssize_t nrecv = request_size > 0 ? recv.len / request_size : -1;
    if (request_size <= 0 || status_size <= 0 || recv.len % request_size ||
        send.len % request_size || expected.len != nrecv * 8 ||
        trailers.len != nrecv * (Py_ssize_t)sizeof(char *) ||
        (datatype_size != sizeof(int) && datatype_size != sizeof(void *)) || !startall ||
        !waitall || !get_count || starts.len != sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "gt4py_halo: malformed persistent requests");
        goto done;
    }
    self = (Persistent *)type->tp_alloc(type, 0);
    if (self == NULL) goto done;
    self->startall = (startall_f)(uintptr_t)startall;
    self->waitall = (waitall_f)(uintptr_t)waitall;
    self->get_count = (void *)(uintptr_t)get_count;
    self->datatype_is_int = datatype_size == sizeof(int) && sizeof(int) != sizeof(void *);
    self->byte = (intptr_t)byte;
    self->nrecv = (int)nrecv;
    self->nsend = (int)(send.len / request_size);
    self->status_size = status_size;
    int most = self->nrecv > self->nsend ? self->nrecv : self->nsend;
    self->recv = copy_of(&recv);
    self->send = copy_of(&send);
    self->expected = copy_of(&expected);
    self->trailers = copy_of(&trailers);
    self->statuses = PyMem_Calloc(most ? (size_t)most : 1, (size_t)status_size);
    self->signature = signature;
    self->counter = Py_NewRef(counter); /* (numpy keeps the memory where it is) */
    self->starts = (int64_t *)starts.buf;
    self->error = Py_NewRef(error);
    if (!self->recv || !self->send || !self->expected || !self->trailers || !self->statuses) {
        Py_CLEAR(self);
        PyErr_NoMemory();
    }
done:
    PyBuffer_Release(&recv);
    PyBuffer_Release(&send);
    PyBuffer_Release(&expected);
    PyBuffer_Release(&trailers);
    if (starts.obj != NULL) PyBuffer_Release(&starts);
    return (PyObject *)self;
}

/* Raises the MPI error `rc` as mpi4py does; 0 if there is none. */
static int raised(Persistent *self, int rc) {
    if (rc == 0) return 0;
    PyObject *code = PyLong_FromLong(rc);
    if (code != NULL) {
        PyErr_SetObject(self->error, code);
        Py_DECREF(code);
    }
    return -1;
}

static int startall(Persistent *self, int count, char *requests) {
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = count ? self->startall(count, requests) : 0;
    Py_END_ALLOW_THREADS
    return raised(self, rc);
}

static int waitall(Persistent *self, int count, char *requests) {
    if (!count) return 0;
    int rc;
    __atomic_store_n(&self->waits, self->waits + 1, __ATOMIC_RELAXED);
    Py_BEGIN_ALLOW_THREADS
    rc = self->waitall(count, requests, self->statuses);
    Py_END_ALLOW_THREADS
    __atomic_store_n(&self->waits, self->waits + 1, __ATOMIC_RELAXED);
    return rc;
}

/* Calls each of `copies` (a list of callables); -1 if one raised. */
static int call_each(PyObject *copies) {
    if (!PyList_Check(copies)) {
        PyErr_SetString(PyExc_TypeError, "gt4py_halo: copies must be a list");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(copies); ++i) {
        PyObject *done = PyObject_CallNoArgs(PyList_GET_ITEM(copies, i));
        if (done == NULL) return -1;
        Py_DECREF(done);
    }
    return 0;
}

/* Waits for the receives: MPI's error code, else -1 if a message is not of the expected size
   or signature, else 0. */
static int wait_receives(Persistent *self) {
    int rc = waitall(self, self->nrecv, self->recv);
    if (rc) return rc;
    for (int i = 0; i < self->nrecv; ++i) {
        const char *status = self->statuses + i * self->status_size;
        int count = -1;
        rc = self->datatype_is_int
                 ? ((count_int_f)self->get_count)(status, (int)self->byte, &count)
                 : ((count_ptr_f)self->get_count)(status, (void *)self->byte, &count);
        if (rc) return rc;
        if (count != self->expected[i]) return -1;
        uint64_t signature;
        if (self->trailers[i] == NULL) continue;
        memcpy(&signature, self->trailers[i], sizeof signature); /* (maybe unaligned) */
        if (signature != self->signature) return -1;
    }
    return 0;
}

/* Starts the receives, the exchange's first step: counted (the file's comment, 4.). */
static int start_receives(Persistent *self) {
    self->started = (*self->starts)++;
    return startall(self, self->nrecv, self->recv);
}

static PyObject *persistent_start(Persistent *self, PyObject *args) {
    PyObject *pack, *local;
    if (!PyArg_ParseTuple(args, "OO", &pack, &local)) return NULL;
    if (start_receives(self) < 0 || call_each(pack) < 0 ||
        startall(self, self->nsend, self->send) < 0 || call_each(local) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *persistent_finish(Persistent *self, PyObject *unpack) {
    int rc = wait_receives(self);
    if (rc == 0 && (call_each(unpack) < 0 || raised(self, waitall(self, self->nsend, self->send))))
        return NULL;
    return PyLong_FromLong(rc);
}

static PyObject *persistent_exchange(Persistent *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "exchange(pack, local, unpack)");
        return NULL;
    }
    if (start_receives(self) < 0 || call_each(args[0]) < 0 ||
        startall(self, self->nsend, self->send) < 0 || call_each(args[1]) < 0)
        return NULL;
    return persistent_finish(self, args[2]);
}

static PyObject *persistent_post_receives(Persistent *self, PyObject *unused) {
    if (start_receives(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *persistent_post_sends(Persistent *self, PyObject *unused) {
    if (startall(self, self->nsend, self->send) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *persistent_wait_receives(Persistent *self, PyObject *unused) {
    return PyLong_FromLong(wait_receives(self));
}

static PyObject *persistent_wait_sends(Persistent *self, PyObject *unused) {
    if (raised(self, waitall(self, self->nsend, self->send)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *persistent_status(Persistent *self, PyObject *index) {
    Py_ssize_t i = PyLong_AsSsize_t(index);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= self->nrecv) {
        PyErr_SetString(PyExc_IndexError, "gt4py_halo: no such receive");
        return NULL;
    }
    return PyBytes_FromStringAndSize(self->statuses + i * self->status_size, self->status_size);
}

static PyObject *persistent_started(Persistent *self, PyObject *unused) {
    return PyLong_FromLongLong(self->started);
}

static PyObject *persistent_waits(Persistent *self, PyObject *unused) {
    return PyLong_FromUnsignedLong(__atomic_load_n(&self->waits, __ATOMIC_RELAXED));
}

static PyMethodDef persistent_methods[] = {
    {"start", (PyCFunction)persistent_start, METH_VARARGS,
     "start(pack, local): start the receives, call the pack copies, start the sends, call "
     "the local copies."},
    {"finish", (PyCFunction)persistent_finish, METH_O,
     "finish(unpack): wait_receives(); if it gave 0, call the unpack copies and wait for the "
     "sends; wait_receives' code (the sends are not waited for where it is not 0)."},
    {"exchange", (PyCFunction)(void (*)(void))persistent_exchange, METH_FASTCALL,
     "exchange(pack, local, unpack): start(pack, local), then finish(unpack)."},
    {"post_receives", (PyCFunction)persistent_post_receives, METH_NOARGS,
     "Start the receives."},
    {"post_sends", (PyCFunction)persistent_post_sends, METH_NOARGS,
     "Start the sends."},
    {"wait_receives", (PyCFunction)persistent_wait_receives, METH_NOARGS,
     "Wait for the receives: MPI's error code; else -1 if a message is not of the expected "
     "size or (where given) signature; else 0."},
    {"wait_sends", (PyCFunction)persistent_wait_sends, METH_NOARGS,
     "Wait for the sends."},
    {"waits", (PyCFunction)persistent_waits, METH_NOARGS,
     "Twice the waits for messages begun, plus one while one lasts (odd: waiting); safe to "
     "call from another thread while a wait lasts."},
    {"started", (PyCFunction)persistent_started, METH_NOARGS,
     "The transport's count of starts at this set's last start (its exchange's number)."},
    {"status", (PyCFunction)persistent_status, METH_O,
     "status(i): the bytes of receive i's MPI_Status after the last wait."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PersistentType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.Persistent",
    .tp_basicsize = sizeof(Persistent),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Persistent((startall, waitall, get_count), (request, status, datatype sizes), "
              "byte, error, receives, sends, expected, trailers, signature, counter): see the "
              "module's source. MPI's errors raise error(code).",
    .tp_new = persistent_new,
    .tp_dealloc = (destructor)persistent_dealloc,
    .tp_methods = persistent_methods,
};

/* SlotRun (4. above). */
typedef struct {
    PyObject_HEAD
    PyObject *busy;            /* the plan's busy slots (a set) */
    PyObject *slot;            /* the message set's slot (an int) */
    PyObject *requests;        /* its Persistent */
    PyObject *copies[3];       /* pack, local, unpack: the copies bound to the fields (lists) */
    PyObject *elsewhere;       /* elsewhere(arrays, waiting): the exchange, on another slot */
    PyObject *not_as_expected; /* not_as_expected(code): raises for the messages received */
} SlotRun;

static int slot_run_traverse(SlotRun *self, visitproc visit, void *arg) {
    Py_VISIT(self->busy);
    Py_VISIT(self->requests);
    for (int i = 0; i < 3; ++i) Py_VISIT(self->copies[i]);
    Py_VISIT(self->elsewhere);
    Py_VISIT(self->not_as_expected);
    return 0;
}

static int slot_run_clear(SlotRun *self) {
    Py_CLEAR(self->busy);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->requests);
    for (int i = 0; i < 3; ++i) Py_CLEAR(self->copies[i]);
    Py_CLEAR(self->elsewhere);
    Py_CLEAR(self->not_as_expected);
    return 0;
}

static void slot_run_dealloc(SlotRun *self) {
    PyObject_GC_UnTrack(self);
    slot_run_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *slot_run_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *busy, *slot, *requests, *pack, *local, *unpack, *elsewhere, *not_as_expected;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!OO", &PySet_Type, &busy, &PyLong_Type, &slot,
                          &PersistentType, &requests, &PyList_Type, &pack, &PyList_Type, &local,
                          &PyList_Type, &unpack, &elsewhere, &not_as_expected))
        return NULL;
    SlotRun *self = (SlotRun *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->busy = Py_NewRef(busy);
    self->slot = Py_NewRef(slot);
    self->requests = Py_NewRef(requests);
    self->copies[0] = Py_NewRef(pack);
    self->copies[1] = Py_NewRef(local);
    self->copies[2] = Py_NewRef(unpack);
    self->elsewhere = Py_NewRef(elsewhere);
    self->not_as_expected = Py_NewRef(not_as_expected);
    return (PyObject *)self;
}

/* run(arrays, waiting): the exchange on its slot, busy meanwhile, in one call into C
   (Persistent.exchange over the bound copies), or elsewhere(arrays, waiting) while the slot
   is busy (an exchange of the plan in flight holds it). */
static PyObject *slot_run_call(SlotRun *self, PyObject *args, PyObject *kwargs) {
    int busy = PySet_Contains(self->busy, self->slot);
    if (busy < 0) return NULL;
    if (busy) return PyObject_Call(self->elsewhere, args, kwargs);
    if (PySet_Add(self->busy, self->slot) < 0) return NULL;
    PyObject *code = persistent_exchange((Persistent *)self->requests, self->copies, 3);
    PyObject *error = PyErr_GetRaisedException(); /* (discarding an int raises nothing) */
    if (PySet_Discard(self->busy, self->slot) < 0) Py_CLEAR(code);
    if (error != NULL) PyErr_SetRaisedException(error);
    if (code == NULL) return NULL;
    int wrong = PyObject_IsTrue(code);
    if (wrong == 1) {
        PyObject *raised = PyObject_CallOneArg(self->not_as_expected, code);
        Py_XDECREF(raised);
        wrong = raised == NULL ? -1 : 0;
    }
    Py_DECREF(code);
    if (wrong < 0) return NULL;
    Py_RETURN_NONE;
}

static PyTypeObject SlotRunType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.SlotRun",
    .tp_basicsize = sizeof(SlotRun),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "SlotRun(busy, slot, requests, pack, local, unpack, elsewhere, not_as_expected): "
              "called (arrays, waiting), exchanges on the slot's message set with the bound "
              "copies (see the module's source).",
    .tp_new = slot_run_new,
    .tp_traverse = (traverseproc)slot_run_traverse,
    .tp_clear = (inquiry)slot_run_clear,
    .tp_dealloc = (destructor)slot_run_dealloc,
    .tp_call = (ternaryfunc)slot_run_call,
};

/* identities(tag, objects): (tag, id(objects[0]), ...), a key of the objects' identities. */
static PyObject *identities(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "identities(tag, objects)");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(args[1], "identities(tag, objects): a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *key = PyTuple_New(n + 1);
    if (key != NULL) {
        PyTuple_SET_ITEM(key, 0, Py_NewRef(args[0]));
        for (Py_ssize_t i = 0; i < n; ++i) {
            PyObject *id = PyLong_FromVoidPtr(PySequence_Fast_GET_ITEM(fast, i));
            if (id == NULL) {
                Py_CLEAR(key);
                break;
            }
            PyTuple_SET_ITEM(key, i + 1, id);
        }
    }
    Py_DECREF(fast);
    return key;
}

static PyObject *lookup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "lookup(entries: dict, tag, objects)");
        return NULL;
    }
    PyObject *key = identities(self, args + 1, 2);
    if (key == NULL) return NULL;
    PyObject *value = PyDict_GetItemWithError(args[0], key);
    Py_DECREF(key);
    if (value != NULL) return Py_NewRef(value);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *arrays(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "arrays(fields, ndarray: type, as_array)");
        return NULL;
    }
    PyObject *fast = PySequence_Fast(args[0], "arrays(fields, ...): a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; ++i) {
        PyObject *field = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *array;
        if (Py_TYPE(field) == (PyTypeObject *)args[1]) {
            array = Py_NewRef(field);
        } else {
            PyObject *position = PyLong_FromSsize_t(i);
            array = position == NULL ? NULL
                                     : PyObject_CallFunctionObjArgs(args[2], field, position, NULL);
            Py_XDECREF(position);
        }
        if (array == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, array);
    }
    Py_DECREF(fast);
    return list;
}


/* Whether every word of pairs (address, target) reaches its target within seconds. */
static int shm_reached(const int64_t *pairs, Py_ssize_t n, double seconds) {
    int reached = 0;
    Py_BEGIN_ALLOW_THREADS
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double end = now.tv_sec + 1e-9 * now.tv_nsec + seconds;
    Py_ssize_t i = 0;
    for (unsigned long looks = 0;; ++looks) {
        while (i < n && __atomic_load_n((int64_t *)(uintptr_t)pairs[2 * i], __ATOMIC_ACQUIRE) >=
                            pairs[2 * i + 1])
            ++i;
        if (i == n) {
            reached = 1;
            break;
        }
        if (seconds <= 0) break;
        if (looks % 1024 == 1023) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec + 1e-9 * now.tv_nsec >= end) break;
        }
        sched_yield();
    }
    Py_END_ALLOW_THREADS
    return reached;
}

static PyObject *flag(PyObject *self, PyObject *args) {
    unsigned long long address;
    int op;
    long long value;
    if (!PyArg_ParseTuple(args, "KiL", &address, &op, &value)) return NULL;
    int64_t *word = (int64_t *)(uintptr_t)address;
    if (op == 0) {
        __atomic_store_n(word, (int64_t)value, __ATOMIC_RELEASE);
        Py_RETURN_NONE;
    }
    if (op == 1) return PyLong_FromLongLong(__atomic_load_n(word, __ATOMIC_ACQUIRE));
    PyErr_SetString(PyExc_ValueError, "flag(address, op, value): op 0 (store) or 1 (load)");
    return NULL;
}

static PyObject *flags_reached(PyObject *self, PyObject *args) {
    Py_buffer pairs;
    double seconds;
    if (!PyArg_ParseTuple(args, "y*d", &pairs, &seconds)) return NULL;
    if (pairs.len % (2 * sizeof(int64_t)) != 0) {
        PyBuffer_Release(&pairs);
        PyErr_SetString(PyExc_ValueError, "flags_reached(pairs, seconds): int64 pairs");
        return NULL;
    }
    int reached = shm_reached(pairs.buf, pairs.len / (2 * (Py_ssize_t)sizeof(int64_t)), seconds);
    PyBuffer_Release(&pairs);
    return PyBool_FromLong(reached);
}


/* ShmRun (6. above). The record layout is runtime.py's: number, signature, count, a stamp
   (0 here), the fields' words (from word 4, _HEAD), then at word done the done flags of the neighbours it reads from. */
#define SHM_FAST_WAIT_S 0.5
typedef struct {
    PyObject_HEAD
    PyObject *state;     /* int64 array: the count of starts */
    PyObject *in_flight; /* dict: the process's 'shm' exchanges in flight (the fast path only
                            without any: it reads for none of them while it waits) */
    PyObject *local;     /* int64 program: the copies to the rank's own halo */
    PyObject *words;     /* int64 array: the fields' words of its record */
    PyObject *bases;     /* int64 array: its own records' address, then its neighbours' */
    PyObject *readers;   /* int64 array: the addresses of its readers' done flags for it, in
                            their records of slot 0 */
    PyObject *fast;      /* list [key, program, ...]: the copies from the neighbours whose
                            records' field words, one after the other, are the bytes key (the
                            list also holds what the program copies through) */
    PyObject *elsewhere; /* elsewhere(arrays, waiting): the exchange in Python */
    PyObject *slow;      /* slow(arrays, waiting, number, read): the rest of one in Python */
    int64_t record, slots, signature, count, done;
} ShmRun;

static int shm_run_traverse(ShmRun *self, visitproc visit, void *arg) {
    Py_VISIT(self->state);
    Py_VISIT(self->in_flight);
    Py_VISIT(self->local);
    Py_VISIT(self->words);
    Py_VISIT(self->bases);
    Py_VISIT(self->readers);
    Py_VISIT(self->fast);
    Py_VISIT(self->elsewhere);
    Py_VISIT(self->slow);
    return 0;
}

static int shm_run_clear(ShmRun *self) {
    Py_CLEAR(self->state);
    Py_CLEAR(self->in_flight);
    Py_CLEAR(self->local);
    Py_CLEAR(self->words);
    Py_CLEAR(self->bases);
    Py_CLEAR(self->readers);
    Py_CLEAR(self->fast);
    Py_CLEAR(self->elsewhere);
    Py_CLEAR(self->slow);
    return 0;
}

static void shm_run_dealloc(ShmRun *self) {
    PyObject_GC_UnTrack(self);
    shm_run_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *shm_run_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *state, *in_flight, *local, *words, *bases, *readers, *fast, *elsewhere, *slow;
    long long record, slots, signature, count, done;
    if (!PyArg_ParseTuple(args, "OO!OOOOO!OOLLLLL", &state, &PyDict_Type, &in_flight, &local,
                          &words, &bases, &readers, &PyList_Type, &fast, &elsewhere, &slow,
                          &record, &slots, &signature, &count, &done))
        return NULL;
    if (PyList_GET_SIZE(fast) < 2 || slots < 1 || record < 4) {
        PyErr_SetString(PyExc_ValueError, "ShmRun: fast is [key, program, ...]; slots > 0");
        return NULL;
    }
    ShmRun *self = (ShmRun *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->state = Py_NewRef(state);
    self->in_flight = Py_NewRef(in_flight);
    self->local = Py_NewRef(local);
    self->words = Py_NewRef(words);
    self->bases = Py_NewRef(bases);
    self->readers = Py_NewRef(readers);
    self->fast = Py_NewRef(fast);
    self->elsewhere = Py_NewRef(elsewhere);
    self->slow = Py_NewRef(slow);
    self->record = record;
    self->slots = slots;
    self->signature = signature;
    self->count = count;
    self->done = done;
    return (PyObject *)self;
}

/* Calls slow(arrays, waiting, number, read) with the call's arguments. */
static PyObject *shm_slow(ShmRun *self, PyObject *args, int64_t number, int read) {
    PyObject *arrays, *waiting = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &arrays, &waiting)) return NULL;
    return PyObject_CallFunction(self->slow, "OOLO", arrays, waiting, (long long)number,
                                 read ? Py_True : Py_False);
}

/* What the halves of an exchange read of a ShmRun: its buffers, acquired together (state,
   words, bases, the key of its bound copies, readers), and those copies. */
typedef struct {
    Py_buffer views[5];
    int got;
    PyObject *key, *program;
} ShmViews;

static void shm_release(ShmViews *v) {
    for (int i = 0; i < v->got; ++i) PyBuffer_Release(&v->views[i]);
    Py_XDECREF(v->key);
    Py_XDECREF(v->program);
}

static int shm_acquire(ShmRun *self, ShmViews *v) {
    v->got = 0;
    v->key = Py_NewRef(PyList_GET_ITEM(self->fast, 0));
    v->program = Py_NewRef(PyList_GET_ITEM(self->fast, 1));
    PyObject *objects[5] = {self->state, self->words, self->bases, v->key, self->readers};
    for (; v->got < 5; ++v->got)
        if (PyObject_GetBuffer(objects[v->got], &v->views[v->got],
                               v->got == 0 ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE
                                           : PyBUF_C_CONTIGUOUS) < 0)
            return -1;
    if (v->views[0].len < 8 || v->views[2].len < 8) {
        PyErr_SetString(PyExc_ValueError, "ShmRun: no count of starts, or no own records");
        return -1;
    }
    return 0;
}

/* The start of exchange `number`: the copies to the rank's own halo, its record, the count
   of starts past it. */
static int shm_publish(ShmRun *self, ShmViews *v, int64_t number) {
    PyObject *ran = run(NULL, self->local);
    if (ran == NULL) return -1;
    Py_DECREF(ran);
    int64_t *counts = v->views[0].buf;
    const int64_t *base = v->views[2].buf;
    int64_t *own = (int64_t *)(intptr_t)(base[0] + number % self->slots * self->record * 8);
    own[1] = self->signature;
    own[2] = self->count;
    memcpy(own + 4, v->views[1].buf, (size_t)v->views[1].len);
    counts[0] = number + 1;
    __atomic_store_n(own, number + 1, __ATOMIC_RELEASE);
    return 0;
}

/* The finish of exchange `number`, each wait at most `seconds`: the neighbours' records,
   compared with those the bound copies were bound to; the copies; its done flags; then (if
   `readers`) the wait for its readers. 0: all of it done; 1: nothing read (a record not
   there, or not the bound one's); 2: read, its readers not done; -1: an error. */
static int shm_complete(ShmRun *self, ShmViews *v, int64_t number, double seconds,
                        int readers) {
    const int64_t *base = v->views[2].buf, *flags = v->views[4].buf;
    const Py_ssize_t field_bytes = v->views[1].len, neighbours = v->views[2].len / 8 - 1;
    const Py_ssize_t nreaders = v->views[4].len / 8;
    const int64_t offset = number % self->slots * self->record * 8;
    int64_t *pairs = PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)(neighbours + nreaders + 1));
    if (pairs == NULL) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < neighbours; ++i) {
        pairs[2 * i] = base[1 + i] + offset;
        pairs[2 * i + 1] = number + 1;
    }
    int status = 1, same = shm_reached(pairs, neighbours, seconds) &&
                           v->views[3].len == neighbours * field_bytes;
    for (Py_ssize_t i = 0; same && i < neighbours; ++i) {
        const int64_t *theirs = (const int64_t *)(intptr_t)(base[1 + i] + offset);
        same = theirs[0] == number + 1 && theirs[1] == self->signature &&
               memcmp(theirs + 4, (const char *)v->views[3].buf + i * field_bytes,
                      (size_t)field_bytes) == 0;
    }
    if (same) { /* else fields the copies were not bound to, or ranks that disagree */
        PyObject *ran = run(NULL, v->program);
        status = ran == NULL ? -1 : 0;
        Py_XDECREF(ran);
    }
    int64_t *own = (int64_t *)(intptr_t)(base[0] + offset);
    for (Py_ssize_t i = 0; status == 0 && i < neighbours; ++i) /* its reads from each done */
        __atomic_store_n(own + self->done + i, number + 1, __ATOMIC_RELEASE);
    if (status == 0 && readers) {
        for (Py_ssize_t i = 0; i < nreaders; ++i) {
            pairs[2 * i] = flags[i] + offset;
            pairs[2 * i + 1] = number + 1;
        }
        if (!shm_reached(pairs, nreaders, seconds)) status = 2;
    }
    PyMem_Free(pairs);
    return status;
}

static PyObject *shm_run_call(ShmRun *self, PyObject *args, PyObject *kwargs) {
    if (PyDict_GET_SIZE(self->in_flight) != 0) return PyObject_Call(self->elsewhere, args, kwargs);
    ShmViews v;
    PyObject *result = NULL;
    if (shm_acquire(self, &v) == 0) {
        int64_t number = ((int64_t *)v.views[0].buf)[0];
        int status = shm_publish(self, &v, number);
        if (status == 0) status = shm_complete(self, &v, number, SHM_FAST_WAIT_S, 1);
        if (status == 0) result = Py_NewRef(Py_None);
        if (status > 0) result = shm_slow(self, args, number, status == 2);
    }
    shm_release(&v);
    return result;
}

/* ShmRun.publish(number): the start of a split exchange whose number (and slot) Python took. */
static PyObject *shm_run_publish(ShmRun *self, PyObject *arg) {
    long long number = PyLong_AsLongLong(arg);
    if (number == -1 && PyErr_Occurred()) return NULL;
    ShmViews v;
    int status = shm_acquire(self, &v);
    if (status == 0) status = shm_publish(self, &v, number);
    shm_release(&v);
    return status == 0 ? Py_NewRef(Py_None) : NULL;
}

/* ShmRun.complete(number, block, readers): its finish from C (shm_complete's status);
   waiting only where `block` and no other 'shm' exchange is in flight: a wait in C reads for
   none of them. */
static PyObject *shm_run_complete(ShmRun *self, PyObject *args) {
    long long number;
    int block, readers;
    if (!PyArg_ParseTuple(args, "Lpp", &number, &block, &readers)) return NULL;
    double seconds = block && PyDict_GET_SIZE(self->in_flight) <= 1 ? SHM_FAST_WAIT_S : 0.0;
    ShmViews v;
    int status = shm_acquire(self, &v);
    if (status == 0) status = shm_complete(self, &v, number, seconds, readers);
    shm_release(&v);
    return status < 0 ? NULL : PyLong_FromLong(status);
}

static PyMethodDef shm_run_methods[] = {
    {"publish", (PyCFunction)shm_run_publish, METH_O,
     "publish(number): the start of exchange number (a split call's, its slot free)."},
    {"complete", (PyCFunction)shm_run_complete, METH_VARARGS,
     "complete(number, block, readers): its finish from C; 0 done, 1 nothing read (Python "
     "reads), 2 read but its readers not done."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ShmRunType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gt4py_halo._native.ShmRun",
    .tp_basicsize = sizeof(ShmRun),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "ShmRun(state, in_flight, local, words, bases, readers, fast, elsewhere, slow, "
              "record, slots, signature, count, done): called (arrays, waiting), a kept blocking "
              "exchange of the 'shm' transport (see the module's source).",
    .tp_new = shm_run_new,
    .tp_traverse = (traverseproc)shm_run_traverse,
    .tp_clear = (inquiry)shm_run_clear,
    .tp_dealloc = (destructor)shm_run_dealloc,
    .tp_call = (ternaryfunc)shm_run_call,
    .tp_methods = shm_run_methods,
};

static PyMethodDef methods[] = {
    {"run", run, METH_O, "Run a program of block copies (see the module's source)."},
    {"identities", (PyCFunction)(void (*)(void))identities, METH_FASTCALL,
     "identities(tag, objects): (tag, id(objects[0]), ...): a key of the objects' identities."},
    {"lookup", (PyCFunction)(void (*)(void))lookup, METH_FASTCALL,
     "lookup(entries, tag, objects): entries.get(identities(tag, objects))."},
    {"quiet", quiet_now, METH_NOARGS,
     "quiet(): whether a kept call may run from C now (what watch watches is unset)."},
    {"watch", watch, METH_VARARGS,
     "watch(namespace, name): a Repeating runs its kept calls in C only while namespace[name] "
     "is None (or missing)."},
    {"watch_hooks", watch_hooks, METH_O,
     "watch_hooks(hooks): and while every item of the list hooks is None."},
    {"rebound", (PyCFunction)rebound, METH_O,
     "rebound(bindings): the index of the first binding that holds another object, or -1."},
    {"arrays", (PyCFunction)(void (*)(void))arrays, METH_FASTCALL,
     "arrays(fields, ndarray, as_array): [f if type(f) is ndarray else as_array(f, i) for i, f "
     "in enumerate(fields)]."},
    {"flag", flag, METH_VARARGS,
     "flag(address, op, value): store (op 0, release) or load (1, acquire) an int64 shared "
     "with other processes; the load returns the word's value."},
    {"flags_reached", flags_reached, METH_VARARGS,
     "flags_reached(pairs, seconds): wait until each int64 at pairs' addresses reaches its "
     "target; false if seconds passed first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "gt4py_halo's C (see its source).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    shape_name = PyUnicode_InternFromString("shape");
    called_name = PyUnicode_InternFromString("_called");
    native_name = PyUnicode_InternFromString("native");
    checked_name = PyUnicode_InternFromString("messages_checked");
    dim_name = PyUnicode_InternFromString("dim");
    if (shape_name == NULL || called_name == NULL || native_name == NULL ||
        checked_name == NULL || dim_name == NULL || PyType_Ready(&LayoutType) < 0 ||
        PyType_Ready(&AgainType) < 0 || PyType_Ready(&NumberingType) < 0 ||
        PyType_Ready(&ExchangeAgainType) < 0 || PyType_Ready(&RepeatingType) < 0 ||
        PyType_Ready(&PersistentType) < 0 || PyType_Ready(&SlotRunType) < 0 ||
        PyType_Ready(&ShmRunType) < 0)
        return NULL;
    MessagesUnexpected =
        PyErr_NewException("gt4py_halo._native.MessagesUnexpected", NULL, NULL);
    if (MessagesUnexpected == NULL) return NULL;
    Rebound = PyErr_NewException("gt4py_halo._native.Rebound", NULL, NULL);
    if (Rebound == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "MessagesUnexpected", MessagesUnexpected) < 0 ||
        PyModule_AddObjectRef(m, "Rebound", Rebound) < 0 ||
        PyModule_AddObjectRef(m, "Layout", (PyObject *)&LayoutType) < 0 ||
        PyModule_AddObjectRef(m, "Again", (PyObject *)&AgainType) < 0 ||
        PyModule_AddObjectRef(m, "Numbering", (PyObject *)&NumberingType) < 0 ||
        PyModule_AddObjectRef(m, "ExchangeAgain", (PyObject *)&ExchangeAgainType) < 0 ||
        PyModule_AddObjectRef(m, "Repeating", (PyObject *)&RepeatingType) < 0 ||
        PyModule_AddObjectRef(m, "Persistent", (PyObject *)&PersistentType) < 0 ||
        PyModule_AddObjectRef(m, "SlotRun", (PyObject *)&SlotRunType) < 0 ||
        PyModule_AddObjectRef(m, "ShmRun", (PyObject *)&ShmRunType) < 0 ||
        PyModule_AddIntConstant(m, "PAIRED", PAIRED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
