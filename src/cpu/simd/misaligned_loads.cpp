// misaligned_loads.hpp's choice: the vendor's at first use, or what a test set.
#include "cpu/simd/misaligned_loads.hpp"

#include <atomic>

#include "smax/info.hpp"

namespace smax::cpu::simd {
namespace {
// -1 until the first use, then 0 or 1.
std::atomic<int> joins_set_to{-1};
}  // namespace

bool joins_misaligned_loads() {
  int joins = joins_set_to.load(std::memory_order_relaxed);
  if (joins < 0) {
    // What each vendor's cores ran faster: walk-inl.h's ShiftedLoads has the numbers.
    joins = machine().vendor == "amd" ? 0 : 1;
    int unset = -1;
    joins_set_to.compare_exchange_strong(unset, joins, std::memory_order_relaxed);
  }
  return joins != 0;
}

void set_joins_misaligned_loads(bool joins) { joins_set_to.store(joins ? 1 : 0, std::memory_order_relaxed); }

}  // namespace smax::cpu::simd
