// The one place where performance decisions live.
#pragma once

#include <cstdint>
#include <string>

#include "smax/dtype.hpp"
#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax::detail {

struct Plan {
  Algorithm algorithm = Algorithm::safe;  // never automatic
  PassOrder order = PassOrder::reverse;
  std::int64_t block = 0;                 // tiled: elements per block
  int threads = 1;
  std::string reason;
};

// Below this many elements in a call, starting threads costs more than it saves.
inline constexpr std::int64_t kMinElementsPerThread = 32768;

// axis_stride: elements between neighbours of a row (1 for the last axis of a
// C-contiguous tensor).
Plan make_plan(Op op, DType dtype, std::int64_t rows, std::int64_t length, std::int64_t axis_stride,
               const Options& options, const MachineInfo& machine);

}  // namespace smax::detail
