#include "plan/planner.hpp"

#include <algorithm>

namespace smax::detail {
namespace {

std::string kib(std::int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

// Variant choice. The working set of one row is its input plus its output.
// - Strided rows that fit: fused (below). Rows of kSplitMinLength or more: online
//   over chunks. Contiguous f32 rows: safe, the variant with vectorised passes.
// - Fits in half of L2 and in the fused buffer: fused, one read and one write.
// - Fits in L2: safe; its three passes hit cache.
// - Larger: online, which reads memory twice where the three-pass variants read it
//   three times, with its output pass reversed to start on the cached tail.
// logsumexp writes no row, so only the read counts.
// A strided row (a non-last axis) puts each element on its own cache line, so every
// pass costs a line per element: fused, which reads it once, wins whenever it fits.
void choose_variant(Plan& plan, Op op, DType dtype, std::int64_t length, std::int64_t axis_stride,
                    const MachineInfo& m) {
  const std::int64_t row_bytes = length * static_cast<std::int64_t>(size_of(dtype)) * (op == Op::logsumexp ? 1 : 2);
  const std::string row = "row of " + std::to_string(length) + " elements (" + kib(row_bytes) + " in and out)";
  // f32 rows are gathered into contiguous memory before they run (execute.cpp).
  const bool strided = dtype != DType::f32 && axis_stride != 1 && axis_stride != -1 && length > 1;
  if (strided && length <= kFusedMaxLength) {
    plan.algorithm = Algorithm::fused;
    plan.reason = "strided " + row + " (stride " + std::to_string(axis_stride) +
                  "): fused gathers it once into its buffer";
  } else if (length >= kSplitMinLength) {
    plan.algorithm = Algorithm::online;
    plan.order = PassOrder::reverse;
    plan.chunk = kChunkLength;
    plan.reason = (strided ? "strided " : "") + row + ": online over chunks of " + std::to_string(kChunkLength) +
                  " elements, each read twice from cache and merged in a fixed order, so threads can share the row";
  } else if (dtype == DType::f32) {
    // Measured (docs/PERFORMANCE.md, microbenchmark): on cache-resident f32 rows safe's
    // vectorised passes run at least as fast as fused, whose copy into its buffer costs
    // more than the buffer saves.
    plan.algorithm = Algorithm::safe;
    plan.reason = "f32 " + row + (axis_stride != 1 ? " (strided: gathered once into a contiguous buffer)" : "") +
                  ": safe's three vectorised passes, the later two from cache";
  } else if (strided) {
    plan.algorithm = Algorithm::online;
    plan.order = PassOrder::reverse;
    plan.reason = "strided " + row + " (stride " + std::to_string(axis_stride) +
                  ") too long for fused: online reads it twice, not three times";
  } else if (length <= kFusedMaxLength && row_bytes <= m.l2_bytes / 2) {
    plan.algorithm = Algorithm::fused;
    plan.reason = row + " fits in half of L2 (" + kib(m.l2_bytes) + "): fused reads it once and writes it once";
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

Plan make_plan(Op op, DType dtype, std::int64_t rows, std::int64_t length, std::int64_t axis_stride,
               const Options& options, const MachineInfo& machine) {
  Plan plan;
  plan.order = options.pass_order;
  if (options.algorithm == Algorithm::automatic) {
    choose_variant(plan, op, dtype, length, axis_stride, machine);
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
