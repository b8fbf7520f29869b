// What the library knows about the machine, and which plan it would run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smax/dtype.hpp"
#include "smax/options.hpp"

namespace smax {

std::string_view version() noexcept;  // "MAJOR.MINOR.PATCH"

// Read once at run time (never hard-coded). A cache size the OS does not report is
// replaced by a conservative default and listed in `assumed`.
struct MachineInfo {
  std::string cpu_model;
  std::string architecture;           // "x86_64", "aarch64", ...
  std::string vendor;                 // "intel", "amd"; empty where not detected
  std::vector<std::string> features;  // e.g. "avx2", "avx512f"; empty where not detected
  std::int64_t l1d_bytes = 0;         // per core
  std::int64_t l2_bytes = 0;          // per core
  std::int64_t l3_bytes = 0;          // last level, shared
  int threads = 1;                    // what threads = 0 means
  std::vector<std::string> assumed;   // names of the fields that are defaults
};

const MachineInfo& machine();

enum class Op : std::uint8_t { softmax, log_softmax, logsumexp };
std::string_view to_string(Op op) noexcept;  // "softmax", "log_softmax", "logsumexp"

// The plan for a C-contiguous tensor of this shape, and why.
struct PlanInfo {
  Algorithm algorithm = Algorithm::safe;  // never `automatic`
  PassOrder pass_order = PassOrder::reverse;
  std::int64_t rows = 0;          // independent rows
  std::int64_t length = 0;        // elements per row
  std::int64_t block_length = 0;  // tiled: elements per block; 0 otherwise
  std::int64_t chunk_length = 0;  // long rows: elements per chunk of a split row; 0 if rows are not split
  std::int64_t panel_width = 0;   // a non-last axis: columns per panel (one softmax per vector lane); 0 for rows
  int threads = 1;                // threads the call will use
  Stores stores = Stores::cached; // how the output is written: cached or streaming, never automatic
  std::string reason;             // one line: why this variant, this thread count and these stores
};

// Validates the request like the operation would (throws smax::Error).
PlanInfo plan(Op op, std::span<const std::int64_t> shape, DType dtype, const Options& options = {});

}  // namespace smax
