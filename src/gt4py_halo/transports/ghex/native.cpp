// The runtime 'ghex' exchange in C++ (transports/ghex/runtime.py says what it guarantees and
// native.py how it is built): GHEX's patterns, field descriptors and communication objects
// made and called here, so that an exchange from Python is one call (pack, post, poll, unpack)
// with no Python between GHEX's steps.
//
// Every field is described in bytes, its innermost axis merged with its elements' bytes
// (runtime.py describes it so), so that one buffer type serves every dtype: fields of any
// dtypes travel in one GHEX exchange, one message per neighbour, and this module has one
// instantiation per grid kind. A cartesian field has 4 axes (missing ones: outermost, extent
// 1), its innermost contiguous; an unstructured one a row of bytes per local index. Messages
// are laid out by the global grid alone (GHEX's buffers follow the layout map, fixed here), so
// ranks whose fields differ in memory layout still exchange exact halos.
//
// The GIL is held throughout: a GHEX context serves one thread at a time (it is made for one).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <gt4py_halo_ghex.hpp>

namespace {

using byte = unsigned char;
using regular = gt4py_halo::regular_grid<4>;
using unstructured = gt4py_halo::unstructured_grid;
using regular_field = ghex::structured::regular::field_descriptor<byte, ghex::cpu,
    regular::domain, gridtools::layout_map<0, 1, 2, 3>>;

// An unstructured field as GHEX's user concept: `width` contiguous bytes per local index (its
// levels), `stride` bytes from one index to the next. Its messages hold each index's bytes in
// turn; packed row by row (GHEX's own descriptor copies byte by byte in this case).
class unstructured_field : public ghex::unstructured::data_descriptor<ghex::cpu, int, int, byte>
{
  public:
    unstructured_field(const unstructured::domain& domain, byte* values, std::size_t width,
        std::size_t stride)
    : data_descriptor(domain, values, width, true, stride)
    , m_values(values)
    , m_width(width)
    , m_stride(stride)
    {
    }

    template<class IndexContainer>
    void pack(byte* buffer, const IndexContainer& c, void*)
    {
        for (const auto& is : c)
            for (std::size_t index : is.local_indices())
            {
                std::memcpy(buffer, m_values + index * m_stride, m_width);
                buffer += m_width;
            }
    }

    template<class IndexContainer>
    void unpack(const byte* buffer, const IndexContainer& c, void*)
    {
        for (const auto& is : c)
            for (std::size_t index : is.local_indices())
            {
                std::memcpy(m_values + index * m_stride, buffer, m_width);
                buffer += m_width;
            }
    }

  private:
    byte*       m_values;
    std::size_t m_width;
    std::size_t m_stride;
};

// ---- exchanges, independent of Python ----

struct in_flight_base
{
    virtual ~in_flight_base() = default;
    virtual bool ready() = 0;
};

struct exchange_base
{
    virtual ~exchange_base() = default;
    virtual std::unique_ptr<in_flight_base> start() = 0;
};

// The fields of one prepared exchange over patterns of grid kind `Grid`, with the idle
// communication objects that exchanged them (each keeps message buffers sized for them): one
// exchange runs per communication object at a time, so exchanges of these fields in flight
// together take one each.
template<class Grid, class Field>
class exchange_of : public exchange_base
{
  public:
    using pattern_type = typename Grid::pattern_type;
    using co_type = typename Grid::co_type;
    using info_type = decltype(std::declval<pattern_type&>()(std::declval<Field&>()));

    explicit exchange_of(ghex::context& context)
    : m_context(context)
    {
    }

    void add(pattern_type& pattern, std::unique_ptr<Field> field)
    {
        m_infos.push_back(pattern(*field));  // reads the field through this pointer
        m_fields.push_back(std::move(field));
    }

    std::unique_ptr<in_flight_base> start() override
    {
        std::unique_ptr<co_type> co;
        if (m_idle.empty())
            co = std::make_unique<co_type>(
                ghex::make_communication_object<pattern_type>(m_context));
        else
        {
            co = std::move(m_idle.back());
            m_idle.pop_back();
        }
        auto handle = co->exchange(m_infos.begin(), m_infos.end());
        return std::make_unique<in_flight>(*this, std::move(co), std::move(handle));
    }

  private:
    // Finished when ready; gives its communication object back when destroyed (an abandoned
    // exchange never is).
    class in_flight : public in_flight_base
    {
      public:
        in_flight(exchange_of& owner, std::unique_ptr<co_type> co,
            typename co_type::handle_type handle)
        : m_owner(owner)
        , m_co(std::move(co))
        , m_handle(std::move(handle))
        {
        }

        ~in_flight() override { m_owner.m_idle.push_back(std::move(m_co)); }

        // progresses GHEX once; once true, the halos are written and the handle cleared
        bool ready() override { return m_handle.is_ready(); }

      private:
        exchange_of&                  m_owner;
        std::unique_ptr<co_type>      m_co;
        typename co_type::handle_type m_handle;
    };

    ghex::context&                        m_context;
    std::vector<std::unique_ptr<Field>>   m_fields;
    std::vector<info_type>                m_infos;
    std::vector<std::unique_ptr<co_type>> m_idle;
};

// ---- Python types ----

// Thrown where a Python error is set.
struct python_error
{
};

void raise_cpp(const std::exception& e) { PyErr_SetString(PyExc_RuntimeError, e.what()); }

struct ContextObject
{
    PyObject_HEAD
    gt4py_halo::context* context;
    double alarm_after_s;
    long   polls_per_clock;
};

struct PatternObject
{
    PyObject_HEAD
    PyObject* context;  // a ContextObject: GHEX's patterns use its communicator
    bool      is_regular;
    std::unique_ptr<std::pair<regular::domain, regular::pattern_type>>           on_grid;
    std::unique_ptr<std::pair<unstructured::domain, unstructured::pattern_type>> on_mesh;
    std::array<int, 4> offsets;  // regular: the first owned index of each axis in the field
};

struct PreparedObject
{
    PyObject_HEAD
    PyObject*                      patterns;  // a tuple of PatternObject, kept for GHEX
    std::unique_ptr<exchange_base> exchange;
};

struct HandleObject
{
    PyObject_HEAD
    PyObject*                       prepared;  // its PreparedObject
    PyObject*                       kept;      // what GHEX writes into: kept until done
    std::unique_ptr<in_flight_base> flight;
};

PyTypeObject ContextType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject PatternType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject PreparedType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject HandleType = {PyVarObject_HEAD_INIT(nullptr, 0)};

ContextObject* context_of(PyObject* pattern)
{
    return reinterpret_cast<ContextObject*>(reinterpret_cast<PatternObject*>(pattern)->context);
}

// Context(comm_handle, alarm_after_s, polls_per_clock): a GHEX context over the communicator
// with Fortran handle `comm_handle` (mpi4py's py2f; GHEX duplicates it). Collective.
PyObject* context_new(PyTypeObject* type, PyObject* args, PyObject*)
{
    long long handle;
    double    alarm_after_s;
    long      polls_per_clock;
    if (!PyArg_ParseTuple(args, "Ldl", &handle, &alarm_after_s, &polls_per_clock)) return nullptr;
    if (polls_per_clock < 1)
    {
        PyErr_SetString(PyExc_ValueError, "polls_per_clock must be positive");
        return nullptr;
    }
    auto* self = reinterpret_cast<ContextObject*>(type->tp_alloc(type, 0));
    if (!self) return nullptr;
    try
    {
        self->context = new gt4py_halo::context(MPI_Comm_f2c(static_cast<MPI_Fint>(handle)));
    }
    catch (const std::exception& e)
    {
        Py_DECREF(self);
        raise_cpp(e);
        return nullptr;
    }
    self->alarm_after_s = alarm_after_s;
    self->polls_per_clock = polls_per_clock;
    return reinterpret_cast<PyObject*>(self);
}

void context_dealloc(PyObject* op)
{
    auto* self = reinterpret_cast<ContextObject*>(op);
    int   finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) delete self->context;  // GHEX frees its communicator
    Py_TYPE(op)->tp_free(op);
}

// Reads N integers of `sequence` into `out` (each in the range of T, and >= 0 where T is
// unsigned); false, with the error set, where it cannot.
template<class T, std::size_t N>
bool read_ints(PyObject* sequence, std::array<T, N>& out, const char* what)
{
    PyObject* fast = PySequence_Fast(sequence, what);
    if (!fast) return false;
    bool ok = PySequence_Fast_GET_SIZE(fast) == static_cast<Py_ssize_t>(N);
    for (std::size_t k = 0; ok && k < N; ++k)
    {
        long long value = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, k));
        ok = !(value == -1 && PyErr_Occurred()) &&
             value >= static_cast<long long>(std::numeric_limits<T>::min()) &&
             (value < 0 || static_cast<unsigned long long>(value) <=
                               static_cast<unsigned long long>(std::numeric_limits<T>::max()));
        out[k] = static_cast<T>(value);
    }
    Py_DECREF(fast);
    if (!ok && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "%s: %zu integers in range", what, N);
    return ok;
}

PatternObject* new_pattern(PyObject* context, bool is_regular)
{
    auto* self = reinterpret_cast<PatternObject*>(PatternType.tp_alloc(&PatternType, 0));
    if (!self) return nullptr;
    new (&self->on_grid) decltype(self->on_grid)();
    new (&self->on_mesh) decltype(self->on_mesh)();
    Py_INCREF(context);
    self->context = context;
    self->is_regular = is_regular;
    return self;
}

// regular_pattern(context, first, last, global_last, halos, periodic, offsets): the pattern
// of this rank's block (per axis; halos: low and high width per axis) of a 4-D grid, and
// where the block starts in its fields. Collective.
PyObject* regular_pattern(PyObject*, PyObject* args)
{
    PyObject *context, *first_, *last_, *global_last_, *halos_, *periodic_, *offsets_;
    if (!PyArg_ParseTuple(args, "O!OOOOOO", &ContextType, &context, &first_, &last_,
            &global_last_, &halos_, &periodic_, &offsets_))
        return nullptr;
    regular::coordinates first, last, global_last;
    std::array<int, 8>   halos;
    std::array<int, 4>   periodic, offsets;
    if (!read_ints(first_, first, "first") || !read_ints(last_, last, "last") ||
        !read_ints(global_last_, global_last, "global_last") ||
        !read_ints(halos_, halos, "halos") || !read_ints(periodic_, periodic, "periodic") ||
        !read_ints(offsets_, offsets, "offsets"))
        return nullptr;
    std::array<bool, 4> is_periodic;
    for (int a = 0; a < 4; ++a) is_periodic[a] = periodic[a] != 0;
    PatternObject* self = new_pattern(context, true);
    if (!self) return nullptr;
    self->offsets = offsets;
    try
    {
        self->on_grid = std::make_unique<std::pair<regular::domain, regular::pattern_type>>(
            regular::make(*reinterpret_cast<ContextObject*>(context)->context, first, last,
                global_last, halos, is_periodic));
    }
    catch (const std::exception& e)
    {
        Py_DECREF(self);
        raise_cpp(e);
        return nullptr;
    }
    return reinterpret_cast<PyObject*>(self);
}

// unstructured_pattern(context, gids, halo_lids, domain_id): the pattern of an unstructured
// dim (int32 buffers: this rank's gids in local order, the local indices of its halo; this
// rank's domain id, see unstructured_grid). Collective.
PyObject* unstructured_pattern(PyObject*, PyObject* args)
{
    PyObject* context;
    Py_buffer gids, halo_lids;
    int domain_id;
    if (!PyArg_ParseTuple(args, "O!y*y*i", &ContextType, &context, &gids, &halo_lids,
            &domain_id))
        return nullptr;
    PatternObject* self = new_pattern(context, false);
    if (self)
    {
        try
        {
            self->on_mesh = std::make_unique<
                std::pair<unstructured::domain, unstructured::pattern_type>>(unstructured::make(
                *reinterpret_cast<ContextObject*>(context)->context,
                static_cast<const int*>(gids.buf), gids.len / sizeof(int),
                static_cast<const int*>(halo_lids.buf), halo_lids.len / sizeof(int), domain_id));
        }
        catch (const std::exception& e)
        {
            Py_CLEAR(self);
            raise_cpp(e);
        }
    }
    PyBuffer_Release(&gids);
    PyBuffer_Release(&halo_lids);
    return reinterpret_cast<PyObject*>(self);
}

void pattern_dealloc(PyObject* op)
{
    auto* self = reinterpret_cast<PatternObject*>(op);
    self->on_grid.~unique_ptr();
    self->on_mesh.~unique_ptr();
    Py_XDECREF(self->context);
    Py_TYPE(op)->tp_free(op);
}

// Prepared(fields): the exchange of `fields`, each (pattern, address, ...) over patterns of
// one kind: regular (pattern, address, extents, byte strides), 4 axes each (the innermost in
// bytes, of stride 1); unstructured (pattern, address, bytes per index, bytes between
// indices). Holds the fields' addresses, not their arrays: the caller keeps those alive and
// passes them to each start.
PyObject* prepared_new(PyTypeObject* type, PyObject* args, PyObject*)
{
    PyObject* fields;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &fields)) return nullptr;
    Py_ssize_t n = PyList_GET_SIZE(fields);
    if (n == 0)
    {
        PyErr_SetString(PyExc_ValueError, "no fields");
        return nullptr;
    }
    PyObject* patterns = PyTuple_New(n);
    if (!patterns) return nullptr;
    auto* self = reinterpret_cast<PreparedObject*>(type->tp_alloc(type, 0));
    if (!self)
    {
        Py_DECREF(patterns);
        return nullptr;
    }
    new (&self->exchange) std::unique_ptr<exchange_base>();
    self->patterns = patterns;
    try
    {
        using regular_exchange = exchange_of<regular, regular_field>;
        using unstructured_exchange = exchange_of<unstructured, unstructured_field>;
        regular_exchange*      regulars = nullptr;
        unstructured_exchange* unstructureds = nullptr;
        for (Py_ssize_t k = 0; k < n; ++k)
        {
            PyObject*          item = PyList_GET_ITEM(fields, k);
            PyObject *         pattern_, *a_, *b_;
            unsigned long long address;
            if (!PyArg_ParseTuple(item, "O!KOO", &PatternType, &pattern_, &address, &a_, &b_))
                throw python_error{};
            Py_INCREF(pattern_);
            PyTuple_SET_ITEM(patterns, k, pattern_);
            auto* pattern = reinterpret_cast<PatternObject*>(pattern_);
            auto* values = reinterpret_cast<byte*>(static_cast<std::uintptr_t>(address));
            ghex::context& context = *context_of(pattern_)->context;
            if (k == 0 && pattern->is_regular)
                self->exchange = std::make_unique<regular_exchange>(context);
            else if (k == 0)
                self->exchange = std::make_unique<unstructured_exchange>(context);
            regulars = dynamic_cast<regular_exchange*>(self->exchange.get());
            unstructureds = dynamic_cast<unstructured_exchange*>(self->exchange.get());
            if (pattern->is_regular != (regulars != nullptr))
            {
                PyErr_SetString(PyExc_ValueError, "fields of regular and unstructured patterns");
                throw python_error{};
            }
            if (pattern->is_regular)
            {
                regular::coordinates       extents;
                std::array<std::size_t, 4> strides;
                if (!read_ints(a_, extents, "extents") || !read_ints(b_, strides, "strides"))
                    throw python_error{};
                regulars->add(pattern->on_grid->second,
                    std::make_unique<regular_field>(ghex::wrap_field<ghex::cpu,
                        gridtools::layout_map<0, 1, 2, 3>>(pattern->on_grid->first, values,
                        pattern->offsets, extents, strides)));
            }
            else
            {
                std::size_t width = PyLong_AsSize_t(a_), stride = PyLong_AsSize_t(b_);
                if (PyErr_Occurred()) throw python_error{};
                unstructureds->add(pattern->on_mesh->second,
                    std::make_unique<unstructured_field>(pattern->on_mesh->first, values,
                        width, stride));
            }
        }
    }
    catch (const python_error&)
    {
        Py_DECREF(self);
        return nullptr;
    }
    catch (const std::exception& e)
    {
        Py_DECREF(self);
        raise_cpp(e);
        return nullptr;
    }
    return reinterpret_cast<PyObject*>(self);
}

void prepared_dealloc(PyObject* op)
{
    auto* self = reinterpret_cast<PreparedObject*>(op);
    self->exchange.~unique_ptr();
    Py_XDECREF(self->patterns);
    Py_TYPE(op)->tp_free(op);
}

ContextObject* context_of_prepared(PreparedObject* prepared)
{
    return context_of(PyTuple_GET_ITEM(prepared->patterns, 0));
}

// Polls `flight` until its halos are written. Once the wait has lasted the context's
// alarm time, calls `waiting` (unless None) at every clock read (every polls_per_clock
// polls), and checks for signals there too. False, with the error set, where either
// raised: the exchange is then left in flight.
bool poll(in_flight_base& flight, ContextObject* context, PyObject* waiting)
{
    using clock = std::chrono::steady_clock;
    long              polls = 0;
    bool              timed = false;
    clock::time_point deadline;
    while (!flight.ready())
    {
        if (++polls % context->polls_per_clock) continue;
        if (PyErr_CheckSignals() < 0) return false;
        if (!timed)
        {
            timed = true;
            deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                          std::chrono::duration<double>(context->alarm_after_s));
        }
        else if (waiting != Py_None && clock::now() >= deadline)
        {
            PyObject* result = PyObject_CallNoArgs(waiting);
            if (!result) return false;
            Py_DECREF(result);
        }
    }
    return true;
}

// What an exchange left in flight by an error keeps for good: GHEX may still write into
// its fields and buffers, and its communication object needs its context.
void abandon(std::unique_ptr<in_flight_base> flight, PyObject* prepared, PyObject* kept)
{
    flight.release();
    Py_INCREF(prepared);
    Py_INCREF(kept);
}

// Prepared.start(kept): post the exchange; the Handle keeps `kept` (the arrays GHEX writes
// into) until it is finished.
PyObject* prepared_start(PyObject* op, PyObject* kept)
{
    auto* self = reinterpret_cast<PreparedObject*>(op);
    auto* handle = reinterpret_cast<HandleObject*>(HandleType.tp_alloc(&HandleType, 0));
    if (!handle) return nullptr;
    new (&handle->flight) std::unique_ptr<in_flight_base>();
    try
    {
        handle->flight = self->exchange->start();
    }
    catch (const std::exception& e)
    {
        Py_DECREF(handle);
        raise_cpp(e);
        return nullptr;
    }
    Py_INCREF(op);
    handle->prepared = op;
    Py_INCREF(kept);
    handle->kept = kept;
    return reinterpret_cast<PyObject*>(handle);
}

// Prepared.exchange(kept, waiting): start, poll and finish in one call (``poll``); on an
// error from `waiting` the exchange is left in flight for good, `kept` with it.
PyObject* prepared_exchange(PyObject* op, PyObject* const* args, Py_ssize_t nargs)
{
    if (nargs != 2)
    {
        PyErr_SetString(PyExc_TypeError, "exchange(kept, waiting)");
        return nullptr;
    }
    auto*                           self = reinterpret_cast<PreparedObject*>(op);
    std::unique_ptr<in_flight_base> flight;
    try
    {
        flight = self->exchange->start();
        if (!poll(*flight, context_of_prepared(self), args[1]))
        {
            abandon(std::move(flight), op, args[0]);
            return nullptr;
        }
        flight.reset();
    }
    catch (const std::exception& e)
    {
        if (flight) abandon(std::move(flight), op, args[0]);
        raise_cpp(e);
        return nullptr;
    }
    Py_RETURN_NONE;
}

PyMethodDef prepared_methods[] = {
    {"start", prepared_start, METH_O, "Post the exchange: a Handle."},
    {"exchange", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(prepared_exchange)),
        METH_FASTCALL, "Exchange now (start, poll, finish)."},
    {nullptr, nullptr, 0, nullptr}};

void handle_dealloc(PyObject* op)
{
    auto* self = reinterpret_cast<HandleObject*>(op);
    self->flight.~unique_ptr();  // (only finished ones get here: Python keeps the others)
    Py_XDECREF(self->kept);
    Py_XDECREF(self->prepared);
    Py_TYPE(op)->tp_free(op);
}

// Handle.test(): whether the halos are written (progresses GHEX once).
PyObject* handle_test(PyObject* op, PyObject*)
{
    auto* self = reinterpret_cast<HandleObject*>(op);
    try
    {
        if (self->flight && self->flight->ready())
        {
            self->flight.reset();
            Py_CLEAR(self->kept);
        }
    }
    catch (const std::exception& e)
    {
        raise_cpp(e);
        return nullptr;
    }
    return PyBool_FromLong(!self->flight);
}

// Handle.wait(waiting): poll until the halos are written (``poll``); on an error from
// `waiting` the exchange is left in flight for good.
PyObject* handle_wait(PyObject* op, PyObject* waiting)
{
    auto* self = reinterpret_cast<HandleObject*>(op);
    if (!self->flight) Py_RETURN_NONE;
    try
    {
        auto* prepared = reinterpret_cast<PreparedObject*>(self->prepared);
        if (!poll(*self->flight, context_of_prepared(prepared), waiting))
        {
            abandon(std::move(self->flight), self->prepared, self->kept);
            return nullptr;
        }
    }
    catch (const std::exception& e)
    {
        abandon(std::move(self->flight), self->prepared, self->kept);
        raise_cpp(e);
        return nullptr;
    }
    self->flight.reset();
    Py_CLEAR(self->kept);
    Py_RETURN_NONE;
}

PyMethodDef handle_methods[] = {
    {"test", handle_test, METH_NOARGS, "Whether the halos are written."},
    {"wait", handle_wait, METH_O, "Poll until the halos are written."},
    {nullptr, nullptr, 0, nullptr}};

PyMethodDef module_methods[] = {
    {"regular_pattern", regular_pattern, METH_VARARGS, "The pattern of a block of a 4-D grid."},
    {"unstructured_pattern", unstructured_pattern, METH_VARARGS,
        "The pattern of an unstructured dim."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_ghex_native",
    "gt4py_halo's runtime GHEX exchange in C++ (transports/ghex/native.cpp).", -1,
    module_methods};

bool ready_type(PyTypeObject& type, const char* name, std::size_t size, destructor dealloc,
    newfunc make, PyMethodDef* methods)
{
    type.tp_name = name;
    type.tp_basicsize = static_cast<Py_ssize_t>(size);
    type.tp_flags = Py_TPFLAGS_DEFAULT;
    type.tp_dealloc = dealloc;
    type.tp_new = make;
    type.tp_methods = methods;
    return PyType_Ready(&type) == 0;
}

} // namespace

PyMODINIT_FUNC PyInit__ghex_native()
{
    if (!ready_type(ContextType, "_ghex_native.Context", sizeof(ContextObject), context_dealloc,
            context_new, nullptr) ||
        !ready_type(PatternType, "_ghex_native.Pattern", sizeof(PatternObject),
            pattern_dealloc, nullptr, nullptr) ||
        !ready_type(PreparedType, "_ghex_native.Prepared", sizeof(PreparedObject),
            prepared_dealloc, prepared_new, prepared_methods) ||
        !ready_type(HandleType, "_ghex_native.Handle", sizeof(HandleObject), handle_dealloc,
            nullptr, handle_methods))
        return nullptr;
    PyObject* module = PyModule_Create(&module_def);
    if (!module) return nullptr;
    if (PyModule_AddObjectRef(module, "Context", reinterpret_cast<PyObject*>(&ContextType)) ||
        PyModule_AddObjectRef(module, "Prepared", reinterpret_cast<PyObject*>(&PreparedType)))
    {
        Py_DECREF(module);
        return nullptr;
    }
    return module;
}
