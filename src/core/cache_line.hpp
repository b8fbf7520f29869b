// The cache line: the unit in which memory moves between the caches and DRAM. Its
// size decides where rows split lines between threads or panels, where a streaming
// store must fill a whole line (a line streamed in part is written back in part, at a
// read of its rest), and how far apart fetches go. 64 bytes on every x86 core and on
// the Arm cores smax is tested on (Neoverse, under qemu in CI).
#pragma once

#include <cstddef>

namespace smax::detail {

inline constexpr std::size_t kCacheLineBytes = 64;

}  // namespace smax::detail
