// GHEX state of one compiled unstructured exchange (sdfg/ghex_expansion.py): the context,
// pattern and communication object, created once per program instance from the exchange
// plan's gids, and the field descriptors of the exchange in flight.
#pragma once
#include <mpi.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <ghex/communication_object.hpp>
#include <ghex/context.hpp>
#include <ghex/unstructured/grid.hpp>
#include <ghex/unstructured/pattern.hpp>
#include <ghex/unstructured/user_concepts.hpp>

namespace gt4py_halo {

class GhexUnstructured {
  public:
    using domain = ghex::unstructured::domain_descriptor<int, int>;
    using generator = ghex::unstructured::halo_generator<int, int>;
    using pattern_type = decltype(ghex::make_pattern<ghex::unstructured::grid>(
        std::declval<ghex::context&>(), std::declval<generator&>(),
        std::declval<std::vector<domain>&>()));
    using co_type =
        decltype(ghex::make_communication_object<pattern_type>(std::declval<ghex::context&>()));
    template<class T>
    using field = ghex::unstructured::data_descriptor<ghex::cpu, int, int, T>;

    // Collective over comm: every rank constructs its exchanges in the same order.
    // gids: owned then halo, in local order; halo_lids: the local indices of the halo.
    GhexUnstructured(MPI_Comm comm, const int* gids, long n, const int* halo_lids, long nh)
    : m_context(comm, false)
    , m_domains{domain(m_context.rank(), gids, gids + n, halo_lids, halo_lids + nh)}
    , m_pattern(make_pattern(halos(gids, halo_lids, nh)))
    , m_co(ghex::make_communication_object<pattern_type>(m_context))
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
                std::make_shared<field<T>>(m_domains[0], const_cast<T*>(values), levels,
                    levels_first, outer_stride)};
        }
        return m_pattern(*static_cast<field<T>*>(k.field.get()));  // a slot keeps its type
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
    struct kept
    {
        const void*           values = nullptr;
        long                  levels = 0;
        bool                  levels_first = false;
        long                  outer_stride = 0;
        std::shared_ptr<void> field;
    };

    std::vector<int> halos(const int* gids, const int* halo_lids, long nh)
    {
        std::vector<int> found(nh);
        for (long k = 0; k < nh; ++k) found[k] = gids[halo_lids[k]];
        return found;
    }

    pattern_type make_pattern(std::vector<int> halo_gids)
    {
        generator hgen(std::move(halo_gids));
        return ghex::make_pattern<ghex::unstructured::grid>(m_context, hgen, m_domains);
    }

    ghex::context                                 m_context;
    std::vector<domain>                           m_domains;
    pattern_type                                  m_pattern;
    co_type                                       m_co;
    std::optional<typename co_type::handle_type> m_pending;
    std::vector<kept>                             m_fields;
};

} // namespace gt4py_halo
