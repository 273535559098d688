// GHEX from C++: the context and the patterns of both grid kinds (unstructured_grid,
// regular_grid), which the runtime exchange (transports/ghex/native.cpp) and the compiled one
// (transports/ghex/expansion.py) share; and the state of one compiled exchange: its context,
// patterns and communication object, created once per program instance from the exchange
// plan (an unstructured dim's gids, or this rank's block of a cartesian domain), and the field
// descriptors of the exchange in flight.
#pragma once
#include <mpi.h>

#include <array>
#include <cstddef>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ghex/communication_object.hpp>
#include <ghex/context.hpp>
#include <ghex/structured/pattern.hpp>
#include <ghex/structured/regular/domain_descriptor.hpp>
#include <ghex/structured/regular/field_descriptor.hpp>
#include <ghex/structured/regular/halo_generator.hpp>
#include <ghex/unstructured/grid.hpp>
#include <ghex/unstructured/pattern.hpp>
#include <ghex/unstructured/user_concepts.hpp>

namespace gt4py_halo {

// Holds std::cerr while a GHEX context is made, then passes on what was written but the line
// oomph writes on rank 0 whenever MPI runs above MPI_THREAD_SINGLE ("thread safety is higher
// than required": mpi4py initializes MPI_THREAD_MULTIPLE). True and harmless: each exchange
// runs on its rank's one calling thread, which is what the context is made for.
class held_cerr {
  public:
    held_cerr()
    : m_saved(std::cerr.rdbuf(m_held.rdbuf()))
    {
    }

    ~held_cerr() { release(); }

    void release()
    {
        if (!m_saved) return;
        std::cerr.rdbuf(m_saved);
        m_saved = nullptr;
        std::string       line;
        std::stringstream held(m_held.str());
        while (std::getline(held, line))
            if (line != "oomph warning: MPI thread safety is higher than required")
                std::cerr << line << '\n';
        std::cerr.flush();
    }

  private:
    std::stringstream m_held;
    std::streambuf*   m_saved;
};

// A GHEX context for one calling thread, made without oomph's thread-safety line.
class context : private held_cerr, public ghex::context {
  public:
    explicit context(MPI_Comm comm)
    : held_cerr()
    , ghex::context(comm, false)
    {
        release();
    }
};

// A node's communication object and the exchange it has in flight: `start` posts one exchange
// of all the node's fields, `wait` (the blocking node at once, a split pair's finish later)
// completes it. Declared after the patterns it uses, so that it goes first.
template<class CommunicationObject>
class exchanger {
  public:
    explicit exchanger(CommunicationObject co)
    : m_co(std::move(co))
    {
    }

    template<class... BufferInfos>
    void start(BufferInfos... infos)
    {
        m_pending.emplace(m_co.exchange(infos...));
    }

    void wait()
    {
        if (m_pending) m_pending->wait();
        m_pending.reset();
    }

  private:
    CommunicationObject                                       m_co;
    std::optional<typename CommunicationObject::handle_type> m_pending;
};

// The GHEX types of an unstructured dim, and its pattern: what the compiled exchange
// (GhexUnstructured) and the runtime one (native.cpp) both build on. Collective over the
// context's communicator. gids: this rank's, in local order; halo_lids: the local indices of
// its halo; domain_id: this rank's domain, unique among the ranks. GHEX tags a message by
// the id of the domain it goes to: patterns of one context whose ranks' ids differ (one set
// per dim) never take each other's messages.
struct unstructured_grid
{
    using domain = ghex::unstructured::domain_descriptor<int, int>;
    using generator = ghex::unstructured::halo_generator<int, int>;
    using pattern_type = decltype(ghex::make_pattern<ghex::unstructured::grid>(
        std::declval<ghex::context&>(), std::declval<generator&>(),
        std::declval<std::vector<domain>&>()));
    using co_type =
        decltype(ghex::make_communication_object<pattern_type>(std::declval<ghex::context&>()));

    static std::pair<domain, pattern_type> make(ghex::context& context, const int* gids, long n,
        const int* halo_lids, long nh, int domain_id)
    {
        std::vector<domain> domains{domain(domain_id, gids, gids + n, halo_lids,
            halo_lids + nh)};
        std::vector<int> halo_gids(nh);
        for (long k = 0; k < nh; ++k) halo_gids[k] = gids[halo_lids[k]];
        generator hgen(std::move(halo_gids));
        auto pattern = ghex::make_pattern<ghex::unstructured::grid>(context, hgen, domains);
        return {domains[0], std::move(pattern)};
    }
};

// The GHEX types of a D-dimensional regular grid, and the pattern of this rank's block of it
// (per axis: the first and last owned global index, the global last index, the low and high
// halo widths, whether it is periodic): what the compiled exchange (GhexRegular) and the
// runtime one (native.cpp) both build on. Collective over the context's communicator.
template<int D>
struct regular_grid
{
    using dimension = std::integral_constant<int, D>;
    using domain = ghex::structured::regular::domain_descriptor<int, dimension>;
    using generator = ghex::structured::regular::halo_generator<int, dimension>;
    using pattern_type = decltype(ghex::make_pattern<ghex::structured::grid>(
        std::declval<ghex::context&>(), std::declval<generator&>(),
        std::declval<std::vector<domain>&>()));
    using co_type =
        decltype(ghex::make_communication_object<pattern_type>(std::declval<ghex::context&>()));
    using coordinates = std::array<int, D>;

    static std::pair<domain, pattern_type> make(ghex::context& context,
        const coordinates& first, const coordinates& last, const coordinates& global_last,
        const std::array<int, 2 * D>& halos, const std::array<bool, D>& periodic)
    {
        coordinates global_first;
        global_first.fill(0);
        std::vector<domain> domains{domain(context.rank(), first, last)};
        generator hgen(global_first, global_last, halos, periodic);
        auto pattern = ghex::make_pattern<ghex::structured::grid>(context, hgen, domains);
        return {domains[0], std::move(pattern)};
    }
};

class GhexUnstructured {
  public:
    using domain = unstructured_grid::domain;
    using pattern_type = unstructured_grid::pattern_type;
    using co_type = unstructured_grid::co_type;
    template<class T>
    using field = ghex::unstructured::data_descriptor<ghex::cpu, int, int, T>;

    // Collective over comm: every rank constructs its exchanges in the same order.
    // gids: in local order; halo_lids: the local indices of the halo.
    GhexUnstructured(MPI_Comm comm, const int* gids, long n, const int* halo_lids, long nh)
    : m_context(comm)
    , m_grid(unstructured_grid::make(m_context, gids, n, halo_lids, nh, m_context.rank()))
    , exchange(ghex::make_communication_object<pattern_type>(m_context))
    {
    }

    // Field `slot` of the node: `levels` levels, contiguous (`levels_first`) at `outer_stride`
    // elements per local index, or local indices contiguous at `outer_stride` elements per
    // level. Its descriptor is kept (GHEX reads it until the wait) and made anew only when the
    // field's memory or layout changed: a model exchanges the same fields every step.
    // A start node reads its fields (const); GHEX writes their halos when its finish waits.
    template<class T>
    auto describe(std::size_t slot, const T* values, long levels, bool levels_first,
        long outer_stride)
    {
        if (m_fields.size() <= slot) m_fields.resize(slot + 1);
        kept& k = m_fields[slot];
        if (!k.field || k.values != values || k.levels != levels ||
            k.levels_first != levels_first || k.outer_stride != outer_stride)
        {
            k = kept{values, levels, levels_first, outer_stride,
                std::make_shared<field<T>>(m_grid.first, const_cast<T*>(values), levels,
                    levels_first, outer_stride)};
        }
        return m_grid.second(*static_cast<field<T>*>(k.field.get()));  // a slot keeps its type
    }

  private:
    struct kept
    {
        const void*           values = nullptr;
        long                  levels = 0;
        bool                  levels_first = false;
        long                  outer_stride = 0;
        std::shared_ptr<void> field;
    };

    context                                       m_context;
    std::pair<domain, pattern_type>               m_grid;

  public:
    exchanger<co_type> exchange;

  private:
    std::vector<kept>                             m_fields;
};

// A cartesian exchange over D axes: the first `decomposed` split over ranks (GHEX's structured
// regular API), the others whole levels without halo. Every field of the node is described
// with D axes (axes it lacks have extent 1), so that one communication object, on one
// context, carries them all; fields of other level extents get patterns of their own, made
// the first time the extents are seen (collective: every rank describes the same fields in the
// same order).
template<int D>
class GhexRegular {
  public:
    using domain = typename regular_grid<D>::domain;
    using pattern_type = typename regular_grid<D>::pattern_type;
    using co_type = typename regular_grid<D>::co_type;
    using coordinates = typename regular_grid<D>::coordinates;
    using strides = std::array<std::size_t, D>;
    // GHEX copies runs along the axis that `Layout` maps to D - 1: the field's unit stride.
    template<class T, class Layout>
    using field = ghex::structured::regular::field_descriptor<T, ghex::cpu, domain, Layout>;

    // Collective over comm. block, per decomposed axis: the global extents, then the first and
    // the last owned global index, then whether the axis is periodic (convertible._block);
    // halo: the low and high width of each decomposed axis.
    GhexRegular(MPI_Comm comm, int decomposed, const int* block, std::vector<int> halo)
    : m_context(comm)
    , m_decomposed(decomposed)
    , exchange(ghex::make_communication_object<pattern_type>(m_context))
    {
        m_first.fill(0);
        m_last.fill(0);
        m_global_last.fill(0);
        m_offsets.fill(0);
        m_halos.fill(0);
        m_periodic.fill(false);
        for (int a = 0; a < decomposed; ++a)
        {
            m_global_last[a] = block[a] - 1;
            m_first[a] = block[decomposed + a];
            m_last[a] = block[2 * decomposed + a];
            m_periodic[a] = block[3 * decomposed + a] != 0;
            m_halos[2 * a] = halo[2 * a];
            m_halos[2 * a + 1] = halo[2 * a + 1];
            m_offsets[a] = halo[2 * a];  // the first owned index of the local array
        }
    }

    // Field `slot` of the node: its extents (halos included) and strides in elements. Its
    // descriptor is kept while the field's memory and layout stay the same.
    template<class Layout, class T>
    auto describe(std::size_t slot, const T* values, const coordinates& extents,
        const strides& element_strides)
    {
        auto& [dom, pattern] = levels(extents);
        if (m_fields.size() <= slot) m_fields.resize(slot + 1);
        kept& k = m_fields[slot];
        if (!k.field || k.values != values || k.extents != extents ||
            k.element_strides != element_strides)
        {
            strides bytes;
            for (int a = 0; a < D; ++a) bytes[a] = element_strides[a] * sizeof(T);
            k = kept{values, extents, element_strides,
                std::make_shared<field<T, Layout>>(ghex::wrap_field<ghex::cpu, Layout>(
                    dom, const_cast<T*>(values), m_offsets, extents, bytes))};
        }
        return pattern(*static_cast<field<T, Layout>*>(k.field.get()));  // a slot keeps its type
    }

  private:
    struct kept
    {
        const void*           values = nullptr;
        coordinates           extents{};
        strides               element_strides{};
        std::shared_ptr<void> field;
    };

    // The domain and pattern of fields whose level axes have the extents of `extents`.
    std::pair<domain, pattern_type>& levels(const coordinates& extents)
    {
        std::vector<int> key(extents.begin() + m_decomposed, extents.end());
        auto found = m_patterns.find(key);
        if (found == m_patterns.end())
        {
            coordinates last = m_last, global_last = m_global_last;
            for (int a = m_decomposed; a < D; ++a)
            {
                last[a] = extents[a] - 1;
                global_last[a] = extents[a] - 1;
            }
            found = m_patterns
                        .emplace(key, regular_grid<D>::make(m_context, m_first, last, global_last,
                                          m_halos, m_periodic))
                        .first;
        }
        return found->second;
    }

    context                                                     m_context;
    int                                                         m_decomposed;
    coordinates                                                 m_first, m_last, m_global_last;
    coordinates                                                 m_offsets;
    std::array<int, 2 * D>                                      m_halos;
    std::array<bool, D>                                         m_periodic;
    std::map<std::vector<int>, std::pair<domain, pattern_type>> m_patterns;

  public:
    exchanger<co_type> exchange;

  private:
    std::vector<kept>                                           m_fields;
};

} // namespace gt4py_halo
