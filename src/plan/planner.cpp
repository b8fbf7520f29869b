#include "plan/planner.hpp"

#include <algorithm>

namespace smax::detail {
namespace {

std::string kib(std::int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

// Variant choice. The working set of one row is its input plus its output. Strided
// rows are gathered into contiguous memory first (execute.cpp), so the layout does
// not matter here.
// - Fits in half of L2: fused. It reads the row from memory once and computes each
//   exp once (stored, then scaled). Rows longer than fused's buffer run fused over
//   chunks (f32 softmax: the exps are stored in the output itself), which threads
//   can share.
// - Rows of kSplitMinLength or more: online over chunks, each chunk read twice from
//   cache, threads sharing the chunks.
// - Fits in L2: safe; its three passes hit cache.
// - Larger: online, which reads memory twice where the three-pass variants read it
//   three times, with its output pass reversed to start on the cached tail.
// logsumexp writes no row, so only the read counts.
void choose_variant(Plan& plan, Op op, DType dtype, std::int64_t length, const MachineInfo& m) {
  const std::int64_t row_bytes = length * static_cast<std::int64_t>(size_of(dtype)) * (op == Op::logsumexp ? 1 : 2);
  const std::string row = "row of " + std::to_string(length) + " elements (" + kib(row_bytes) + " in and out)";
  const bool fits_half_l2 = row_bytes <= m.l2_bytes / 2;
  if (fits_half_l2 && length <= kFusedMaxLength) {
    plan.algorithm = Algorithm::fused;
    plan.reason = row + " fits in half of L2 (" + kib(m.l2_bytes) +
                  "): fused reads it once, computes each exp once and writes it once";
  } else if (fits_half_l2 && dtype == DType::f32 && op == Op::softmax) {
    plan.algorithm = Algorithm::fused;
    plan.chunk = kChunkLength;
    plan.reason = row + " fits in half of L2 (" + kib(m.l2_bytes) + "): fused over chunks of " +
                  std::to_string(kChunkLength) +
                  " elements (each chunk's exps stored in the output, then scaled), merged in a fixed order, "
                  "so threads can share the row";
  } else if (length >= kSplitMinLength) {
    plan.algorithm = Algorithm::online;
    plan.order = PassOrder::reverse;
    plan.chunk = kChunkLength;
    plan.reason = row + ": online over chunks of " + std::to_string(kChunkLength) +
                  " elements, each read twice from cache and merged in a fixed order, so threads can share the row";
  } else if (row_bytes <= m.l2_bytes) {
    plan.algorithm = Algorithm::safe;
    plan.reason = row + " fits in L2 (" + kib(m.l2_bytes) + "): safe's three passes run from cache";
  } else {
    plan.algorithm = Algorithm::online;
    plan.order = PassOrder::reverse;
    plan.reason = row + " exceeds L2 (" + kib(m.l2_bytes) + "): online reads it twice, not three times";
  }
}

}  // namespace

Plan make_plan(Op op, DType dtype, std::int64_t rows, std::int64_t length, std::int64_t /*axis_stride*/,
               const Options& options, const MachineInfo& machine) {
  Plan plan;
  plan.order = options.pass_order;
  if (options.algorithm == Algorithm::automatic) {
    choose_variant(plan, op, dtype, length, machine);
  } else {
    plan.algorithm = options.algorithm;
    plan.reason = std::string(to_string(options.algorithm)) + " was asked for";
  }
  if (plan.algorithm == Algorithm::tiled) {
    // Blocks of half of L1, so that a block of input and its output share L1.
    plan.block = std::max<std::int64_t>(256, machine.l1d_bytes / 2 / static_cast<std::int64_t>(size_of(dtype)));
  }

  // Threads take whole rows, or the chunks of a split row when there are fewer rows
  // than threads. Either way each row or chunk is computed the same way whatever the
  // thread count, so results do not depend on it.
  const int wanted = options.threads > 0 ? options.threads : machine.threads;
  const std::int64_t elements = rows * std::max<std::int64_t>(length, 1);
  const std::int64_t by_work = std::max<std::int64_t>(1, elements / kMinElementsPerThread);
  const std::int64_t units = plan.chunk > 0 && rows < wanted ? (length + plan.chunk - 1) / plan.chunk : rows;
  plan.threads = static_cast<int>(std::max<std::int64_t>(1, std::min({static_cast<std::int64_t>(wanted), units, by_work})));
  plan.reason += "; " + std::to_string(plan.threads) + " of " + std::to_string(wanted) + " threads (" +
                 std::to_string(rows) + (units == rows ? " rows" : " rows split into " + std::to_string(units) + " chunks") +
                 ", at least " + std::to_string(kMinElementsPerThread) + " elements per thread)";
  return plan;
}

}  // namespace smax::detail
