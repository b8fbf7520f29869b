#include "plan/planner.hpp"

#include <algorithm>

#include "core/cache_line.hpp"

namespace smax::detail {
namespace {

std::string kib(std::int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }

// Only the softmax and log_softmax output passes of the row kernels (f32_rows.hpp)
// and of the column panels (f32_columns.hpp; three-pass softmax panels then keep their
// terms in a scratch panel, not in the output) stream, for f32, f16 and bf16, and the
// scaling pass of 16-bit rows fused over chunks (their exps wait in a float buffer);
// f64, naive's scalar loop and f32 rows fused over chunks (whose exps wait in the
// output) store through the cache. Streamed with its exps in a float buffer, an f32
// row fused over chunks ran slower: 64 x 128256 from DRAM 0.88-0.90x on the Zen 4 VM
// (docs/PERFORMANCE.md, twenty-seventh session). `moved`: the call's input and output
// bytes.
bool output_streams(const Plan& plan, Op op, DType dtype, std::int64_t moved, Stores asked,
                    const MachineInfo& m) {
  const bool f32_over_chunks = plan.algorithm == Algorithm::fused && plan.chunk > 0 && dtype == DType::f32;
  const bool can_stream =
      op != Op::logsumexp && dtype != DType::f64 && plan.algorithm != Algorithm::naive && !f32_over_chunks;
  if (!can_stream || asked == Stores::cached) return false;
  return asked == Stores::streaming || (m.l3_bytes > 0 && moved > streaming_threshold_bytes(m));
}

// Variant choice. The working set of one row is its input plus its output. Strided
// rows are gathered into contiguous memory first (execute.cpp), so the layout does
// not matter here.
// - Fits in half of L2: fused. It reads the row from memory once and computes each
//   exp once (stored, then scaled). Rows longer than fused's buffer run fused over
//   chunks (below), which threads can share; log_softmax keeps no exps, so fused
//   holds its rows up to kSplitMinLength (its row kernel fetches the output lines for
//   writing during the sum pass: f32 1 x 32000 and 1 x 50257 from DRAM 1.25-1.29x
//   safe's speed, bf16 8 x 32000 on two threads 1.18x).
// - Softmax rows that fit in L2, or any row of a call that stays in the cache
//   (kFusedCallLlcDivisor): fused over chunks too. Its scaling pass reads the stored
//   exps back from the cache, and each exp is computed once where online computes it
//   twice. Measured on the AMD EPYC (Zen 5) VM (1 MiB L2, 32 MiB L3): 1 x 128256 and
//   1 x 262144 in cache 1.45x online's speed, from DRAM the same; rows larger than L2
//   in calls that stream (64 x 262144) ran 15% slower than online, whose output
//   streams (docs/PERFORMANCE.md). 16-bit rows keep their exps in a float buffer
//   beside the row, which counts in the working set.
// - Softmax rows of a call whose output online would not stream (output_streams):
//   fused over chunks as well. Online writes such an output through the cache too,
//   so it reads and writes memory as often, and computes each exp twice. Measured on
//   the AMD EPYC Zen 4 VM (1 MiB L2, 32 MiB L3, twenty-seventh session; calls of 9 to
//   32 MiB, which had run online): f32 8 x 151936, 8 x 262144, 16 x 262144 from DRAM
//   1.07-1.13x on two threads (12 x 262144: 0.94 and 1.06), 1.19-1.23x on one,
//   1.27-1.55x hot; bf16 1.57-1.70x from DRAM on two threads, 1.81-1.86x on one.
// - 16-bit softmax rows whose float exps fit in a quarter of the counted L3: fused
//   over chunks too, in any call. Their exps wait in the float buffer, in cache, while
//   the output streams where the call is that large: memory sees one read and one
//   write, as under online, which computes each exp twice. Zen 4 VM, bf16 from DRAM
//   (twenty-seventh session; calls that had run online, streamed): 64 x 151936 to 8 x
//   2097152 1.60-1.97x on two threads, 1.90-1.99x on one.
// - Rows of kSplitMinLength or more: online over chunks, each chunk read twice from
//   cache, threads sharing the chunks.
// - Fits in L2: safe; its three passes hit cache.
// - Larger: online, which reads memory twice where the three-pass variants read it
//   three times, with its output pass reversed to start on the cached tail.
// logsumexp writes no row, so only the read counts.
void choose_variant(Plan& plan, Op op, DType dtype, std::int64_t length, std::int64_t call_bytes, Stores asked,
                    const MachineInfo& m) {  // call_bytes: the whole call's input and output
  const std::int64_t row_bytes = length * static_cast<std::int64_t>(size_of(dtype)) * (op == Op::logsumexp ? 1 : 2);
  const auto row = [&] { return "row of " + std::to_string(length) + " elements (" + kib(row_bytes) + " in and out)"; };
  const bool fits_half_l2 = row_bytes <= m.l2_bytes / 2;
  // Fused over chunks: a 16-bit row's float exps take as many bytes as its input and
  // output together, so its working set (and its call's) doubles.
  const std::int64_t exps_bytes = dtype == DType::f32 ? 0 : row_bytes;
  const bool chunks_fit_l2 = row_bytes + exps_bytes <= m.l2_bytes;
  const bool call_stays_cached = stays_cached_between_passes(dtype == DType::f32 ? call_bytes : 2 * call_bytes, m);
  Plan online;
  online.algorithm = Algorithm::online;
  const bool online_output_cached = !output_streams(online, op, dtype, call_bytes, asked, m);
  const std::int64_t float_exps_bytes = length * static_cast<std::int64_t>(sizeof(float));
  const bool exps_stay_cached = exps_bytes > 0 && float_exps_bytes <= counted_llc_bytes(m) / kFusedCallLlcDivisor;
  const bool fused_holds =
      length <= kFusedMaxLength || (op == Op::log_softmax && dtype != DType::f64 && length < kSplitMinLength);
  if (fits_half_l2 && fused_holds) {
    plan.algorithm = Algorithm::fused;
    plan.because([&] {
      return row() + " fits in half of L2 (" + kib(m.l2_bytes) +
             "): fused reads it once, computes each exp once and writes it once";
    });
  } else if (dtype != DType::f64 && op == Op::softmax && (chunks_fit_l2 || call_stays_cached || online_output_cached ||
                                                          exps_stay_cached)) {
    plan.algorithm = Algorithm::fused;
    plan.chunk = chunk_length(length);
    plan.because([&] {
      const std::string with = exps_bytes > 0 ? " with its float exps (" + kib(exps_bytes) + ")" : "";
      const std::string l2 = kib(m.l2_bytes);
      std::string where;
      if (row_bytes + exps_bytes <= m.l2_bytes / 2) {
        where = with + " fits in half of L2 (" + l2 + ")";
      } else if (chunks_fit_l2) {
        where = with + " fits in L2 (" + l2 + ")";
      } else if (call_stays_cached) {
        where = " is in a call that stays in the cache (" + kib(call_bytes) +
                (exps_bytes > 0 ? " and float exps" : "") + ", at most 1/" + std::to_string(kFusedCallLlcDivisor) +
                " of L3)";
      } else if (online_output_cached) {
        const std::string why = asked == Stores::cached
                                    ? "cached stores asked for"
                                    : "within the " + kib(streaming_threshold_bytes(m)) + " streaming threshold";
        where = " is in a call whose output would go through the cache under online too (" + kib(call_bytes) + ", " +
                why + ")";
      } else {
        where = " keeps its float exps (" + kib(float_exps_bytes) +
                ") within 1/" + std::to_string(kFusedCallLlcDivisor) + " of the counted L3 (" +
                kib(counted_llc_bytes(m)) + ") while its output streams";
      }
      return row() + where + ": fused over chunks of " + std::to_string(plan.chunk) +
             " elements (each chunk's exps stored " + (exps_bytes > 0 ? "in a float buffer" : "in the output") +
             ", then scaled from the cache), merged in a fixed order, so threads can share the row";
    });
  } else if (length >= kSplitMinLength) {
    plan.algorithm = Algorithm::online;
    plan.order = PassOrder::reverse;
    plan.chunk = chunk_length(length);
    plan.because([&] {
      return row() + ": online over chunks of " + std::to_string(plan.chunk) +
             " elements, each read twice from cache and merged in a fixed order, so threads can share the row";
    });
  } else if (row_bytes <= m.l2_bytes) {
    plan.algorithm = Algorithm::safe;
    plan.because([&] { return row() + " fits in L2 (" + kib(m.l2_bytes) + "): safe's three passes run from cache"; });
  } else {
    plan.algorithm = Algorithm::online;
    plan.order = PassOrder::reverse;
    plan.because(
        [&] { return row() + " exceeds L2 (" + kib(m.l2_bytes) + "): online reads it twice, not three times"; });
  }
}

// Panel width: the widest whose input and output (`length` x width elements each; the
// input alone for logsumexp) fit in half of L2, so that the later passes read L2, not
// memory; but rows of at least 4 KiB (such panels run online, choose_column_passes).
// A long axis (4096 along axis 0 leaves 32 f32 columns for half of L2) would otherwise
// read each row a few cache lines at a time, a large stride apart: measured on the
// development VM (4096 x 4096 along axis 0, one thread, from DRAM), panels of 1024
// columns that stream from memory three times ran two to three times as fast as
// panels of 64 columns sized for L2 (and a plain copy
// done in 64-column panels reached only 40% of the same copy done row by row).
// A short axis whose 4 KiB rows would just overflow L2 narrows them to fit it instead,
// down to 1 KiB, and keeps three passes in L2 (choose_column_passes): measured on the
// AMD Zen 4 VM ([8, 256, 56, 56] along axis 1 from DRAM, three alternating rounds),
// 256-column panels of 512 KiB 9.0 to 11.6 GB/s on one thread, 13.6 to 19.1 on two,
// against 6.9 to 7.7 and 12.9 to 14.7 for online panels of 784 columns.
// Where a panel's input would exceed a core's share of L3 (kPanelLlcDivisor), its
// rows narrow to fit it, down to 1 KiB, so that the online panel's second read finds
// it in L3; a column too long for that keeps 4 KiB rows. Measured on the AMD Zen 5
// VM (4096 x 4096 along axis 0 from DRAM, two threads): 1 KiB rows of 4 MiB panels 30
// to 34 GB/s against 26 to 31 for 4 KiB rows of 16 MiB; 512-byte rows 27 to 28. Only
// where the reported L3 is within kStreamingLlcCap: a larger one is the host's whole
// L3, of which a core's share is unknown, and on the Intel Xeon VM (480 MiB reported)
// narrow rows lose: the same shape 11 to 12 GB/s with 1.5 KiB rows of 6 MiB panels,
// 16 to 17 with 4 KiB rows (docs/PERFORMANCE.md, thirteenth session). The
// inner dimension is then cut into equal panels, rounded up to whole cache lines (two
// threads then never write one line). The width depends on the shape and the
// machine, never on the thread count; and results depend on neither (each lane is
// one column, whatever panel it lands in).
//
// `budget_bytes`: a panel's input and output bytes within L2 (half of it, or less
// where the next panel's input must fit beside them: fetching_live_multiple);
// `min_row_bytes`: kMinPanelRowBytes, or less for panels that fetch the next one.
inline constexpr std::int64_t kMinPanelRowBytes = 4096;
std::int64_t panel_width(Op op, std::int64_t length, std::int64_t element_bytes, std::int64_t inner_extent,
                         std::int64_t budget_bytes, std::int64_t min_row_bytes, const MachineInfo& m) {
  constexpr std::int64_t kMinRowBytesWithinLlc = 1024;
  constexpr std::int64_t kMinRowBytesInL2 = 1024;
  const std::int64_t line = std::max<std::int64_t>(1, std::int64_t{kCacheLineBytes} / element_bytes);
  const std::int64_t budget = std::max<std::int64_t>(budget_bytes, 4096);
  const std::int64_t column_input_bytes = std::max<std::int64_t>(length, 1) * element_bytes;
  const std::int64_t column_bytes = column_input_bytes * (op == Op::logsumexp ? 1 : 2);
  const std::int64_t within_l2 = budget / column_bytes / line * line;
  std::int64_t widest = std::max(min_row_bytes / element_bytes, within_l2);
  if (widest * column_bytes > m.l2_bytes && within_l2 * element_bytes >= kMinRowBytesInL2) widest = within_l2;
  const std::int64_t llc_share = counted_llc_bytes(m) / (kPanelLlcDivisor * std::max(m.threads, 1));
  const std::int64_t within_llc = llc_share / column_input_bytes / line * line;
  const bool share_known = m.l3_bytes <= kStreamingLlcCap;
  if (share_known && widest > within_llc && within_llc * element_bytes >= kMinRowBytesWithinLlc) widest = within_llc;
  const std::int64_t panels = (inner_extent + widest - 1) / widest;
  return std::min(inner_extent, ((inner_extent + panels - 1) / panels + line - 1) / line * line);
}

// A column panel's passes (f32_columns.hpp). One that fits in L2 (input and output)
// takes three passes, of which only the first reads memory; a taller one (4096 x 4096
// along axis 0: 32 MiB a panel) would read memory three times and write its exps
// through it, so it runs online: a running max and sum per column in one read, then
// the output pass. f64 panels always take three passes (f32_columns.hpp); an asked
// online runs them there, and every other variant maps to them.
void choose_column_passes(Plan& plan, Op op, DType dtype, std::int64_t panel_input_bytes, Algorithm asked,
                          const MachineInfo& m) {
  const std::int64_t panel_bytes = panel_input_bytes * (op == Op::logsumexp ? 1 : 2);
  const auto panel = [&] { return "each panel (" + kib(panel_bytes) + ")"; };
  if (asked != Algorithm::automatic) {
    plan.algorithm = asked;
    if (asked == Algorithm::online && dtype == DType::f64) {
      plan.because([&] { return "; online was asked for, but f64 panels take three passes"; });
    } else if (asked == Algorithm::online) {
      plan.because([&] { return "; online was asked for: a running max and sum per column, then the output"; });
    } else {
      plan.because([&] { return "; " + std::string(to_string(asked)) + " was asked for: three passes over " + panel(); });
    }
  } else if (panel_bytes > m.l2_bytes && dtype != DType::f64) {
    plan.algorithm = Algorithm::online;
    plan.because([&] {
      return "; " + panel() + " exceeds L2 (" + kib(m.l2_bytes) +
             "): online reads it twice (a running max and sum per column, then the output), not three times";
    });
  } else {
    plan.algorithm = Algorithm::fused;
    plan.because([&] {
      return "; three passes over " + panel() +
             (dtype == DType::f64 ? "" : ", which fits in L2 (" + kib(m.l2_bytes) + ")");
    });
  }
}

// A three-pass panel reads memory only in its first pass, the max, which its
// arithmetic then follows without overlap. Where its softmax terms wait in a scratch
// panel (16-bit outputs, which cannot hold them; f32 outputs that stream) or its
// output streams, it fetches the next panel's input into L2 during its sum pass
// instead, if what it keeps live fits in half of L2: its input, its float terms (as
// many bytes as the input for f32, twice as many for 16-bit) and the next input. (A
// cached f32 softmax keeps its terms in y, whose lines then compete for L2: the fetch
// lost 10-30% so.) Such panels narrow to fit that, down to 1 KiB rows, where that is
// narrow enough to fetch: the next panel's fetch takes the place of the hardware
// prefetchers that long rows need. Measured on the Intel Xeon VM (2 MiB L2; along
// axis 1, two threads; docs/PERFORMANCE.md): f32 [32, 81, 8732] from DRAM, panels of
// 976 columns (309 KiB inputs) 22.1-23.0 GB/s with the fetch, 19.8 without; of 1456
// columns (461 KiB, three of them 1.35 MiB) 17.1 with it, 19.9 without. Twenty-third
// session: f32 [8, 256, 3136] in 320 columns (1280-byte rows) with the fetch against
// 784 without 1.21x from DRAM, 1.12x with the input in cache, 1.11x all in cache; bf16
// [32, 81, 8732] in 1472 columns 1.23x, 1.16x, 1.27x; bf16 [8, 384, 3136] in 448 columns
// (1.7 MiB live) 0.94x from DRAM; rows of 512 to 704 bytes 0.69x to 0.88x.
// Equal panels may come out narrower than kMinFetchingPanelRowBytes: bf16 [8, 256,
// 3136] in 448 columns (896-byte rows) ran 0.91x as fast with the fetch as in 1568
// without it where its input was in cache and its output not; in 512 ([8, 256, 4096])
// 1.00x.
inline constexpr std::int64_t kMinFetchingPanelRowBytes = 1024;
// The L2 bytes a fetching panel keeps live for each byte of its input.
std::int64_t fetching_live_multiple(std::int64_t element_bytes) { return 2 + 4 / element_bytes; }
// Whether a three-pass panel leaves L2 room to fetch: its output streams, or it is a
// 16-bit softmax, whose terms wait in the scratch panel (state_for in f32_columns.cpp;
// an f32 softmax keeps them there only where its output streams).
bool leaves_room_to_fetch(Op op, DType dtype, Stores stores) {
  return stores == Stores::streaming || (op == Op::softmax && dtype != DType::f32 && dtype != DType::f64);
}
bool fetches_next_panel(const Plan& plan, Op op, DType dtype, std::int64_t panel_input_bytes, const MachineInfo& m) {
  const std::int64_t element_bytes = static_cast<std::int64_t>(size_of(dtype));
  return plan.panel_width > 0 && plan.algorithm != Algorithm::online && leaves_room_to_fetch(op, dtype, plan.stores) &&
         plan.panel_width * element_bytes >= kMinFetchingPanelRowBytes &&
         fetching_live_multiple(element_bytes) * panel_input_bytes <= m.l2_bytes / 2;
}

void choose_stores(Plan& plan, Op op, DType dtype, std::int64_t moved, Stores asked,
                   const MachineInfo& m) {
  if (!output_streams(plan, op, dtype, moved, asked, m)) return;
  plan.stores = Stores::streaming;
  if (asked == Stores::streaming) {
    plan.because([&] { return "; the output streams around the cache, as asked"; });
  } else {
    plan.because([&] {
      return "; the output streams around the cache (" + std::to_string(moved >> 20) + " MiB moved, over " +
             std::to_string(streaming_threshold_bytes(m) >> 20) + " MiB: the " + std::to_string(m.l3_bytes >> 20) +
             " MiB L3, counting at most " + std::to_string(kStreamingLlcCap >> 20) + " MiB)";
    });
  }
}

}  // namespace

Plan make_plan(Op op, DType dtype, std::int64_t rows, std::int64_t length, std::int64_t inner_extent,
               const Options& options, const MachineInfo& machine, bool explain) {
  Plan plan;
  plan.explained = explain;
  plan.order = options.pass_order;
  const bool columns = inner_extent > 0 && options.algorithm != Algorithm::naive;
  // What the call moves: its elements, read and written once (the variant's cache
  // rule and the stores' rule both count these bytes).
  const std::int64_t elements = rows * std::max<std::int64_t>(length, 1);
  const std::int64_t moved = 2 * elements * static_cast<std::int64_t>(size_of(dtype));
  if (columns) {
    // Every algorithm but naive computes what the panel kernel computes (the max, the
    // exact sum, the same exp); the panel's own schedule is what suits columns. naive
    // keeps its textbook rows (it overflows on purpose).
    const std::int64_t element_bytes = static_cast<std::int64_t>(size_of(dtype));
    std::int64_t width =
        panel_width(op, length, element_bytes, inner_extent, machine.l2_bytes / 2, kMinPanelRowBytes, machine);
    // Three-pass panels that will keep their softmax terms apart or stream their
    // output narrow, where that lets them fetch the next panel beside them
    // (fetches_next_panel): their input and output within L2 / fetching_live_multiple.
    Plan trial;
    trial.panel_width = width;
    choose_column_passes(trial, op, dtype, length * element_bytes * width, options.algorithm, machine);
    const bool streams = output_streams(trial, op, dtype, moved, options.stores, machine);
    trial.stores = streams ? Stores::streaming : Stores::cached;
    if (trial.algorithm != Algorithm::online && leaves_room_to_fetch(op, dtype, trial.stores)) {
      const std::int64_t budget = machine.l2_bytes / fetching_live_multiple(element_bytes);
      const std::int64_t fetching =
          panel_width(op, length, element_bytes, inner_extent, budget, kMinFetchingPanelRowBytes, machine);
      trial.panel_width = fetching;
      choose_column_passes(trial, op, dtype, length * element_bytes * fetching, options.algorithm, machine);
      if (fetches_next_panel(trial, op, dtype, length * element_bytes * fetching, machine)) {
        width = fetching;
      } else if (streams && dtype == DType::f32 && machine.vendor != "amd") {
        // 4 KiB rows then, online: 1 KiB rows that cannot fetch ran 0.87x as fast as
        // online's 4 KiB ([16, 400, 4096] along axis 1 from DRAM, two threads, the Intel
        // Xeon VM). The Zen 4 VM (1 MiB L2) ran them faster than online: [8, 256, 3136],
        // [8, 192, 3136] and [4, 224, 12544] softmax 1.05-1.09x on one thread, 0.99-1.08x
        // on two; log_softmax alike, T = 0.7 more (forty-fourth session).
        width = panel_width(op, length, element_bytes, inner_extent, budget, kMinPanelRowBytes, machine);
      }
    }
    plan.panel_width = width;
    plan.because([&] {
      return "non-last axis of " + std::to_string(length) + " elements: column panels of " +
             std::to_string(plan.panel_width) + " of the " + std::to_string(inner_extent) +
             " contiguous columns, one softmax per vector lane";
    });
    choose_column_passes(plan, op, dtype, length * element_bytes * plan.panel_width, options.algorithm, machine);
  } else if (options.algorithm == Algorithm::automatic) {
    choose_variant(plan, op, dtype, length, moved, options.stores, machine);
  } else {
    plan.algorithm = options.algorithm;
    plan.because([&] { return std::string(to_string(options.algorithm)) + " was asked for"; });
  }
  if (plan.algorithm == Algorithm::tiled) {
    // Blocks of half of L1, so that a block of input and its output share L1.
    plan.block = std::max<std::int64_t>(256, machine.l1d_bytes / 2 / static_cast<std::int64_t>(size_of(dtype)));
  }

  // Threads take whole rows, column panels, or the chunks of a split row when there are
  // fewer rows than threads. Each row, panel or chunk is computed the same way whatever
  // the thread count, so results do not depend on it.
  const int wanted = options.threads > 0 ? options.threads : machine.threads;
  const std::int64_t by_work = std::max<std::int64_t>(1, elements / kMinElementsPerThread);
  std::int64_t units = rows;
  const bool split_rows = !columns && plan.chunk > 0 && rows < wanted;
  if (columns) {
    units = rows / inner_extent * ((inner_extent + plan.panel_width - 1) / plan.panel_width);
  } else if (split_rows) {
    units = (length + plan.chunk - 1) / plan.chunk;
  }
  plan.threads = static_cast<int>(std::max<std::int64_t>(1, std::min({static_cast<std::int64_t>(wanted), units, by_work})));
  plan.because([&] {
    const std::string unit_text = split_rows ? std::to_string(rows) + " rows split into " + std::to_string(units) + " chunks"
                                             : std::to_string(units) + (columns ? " panels" : " rows");
    return "; " + std::to_string(plan.threads) + " of " + std::to_string(wanted) + " threads (" + unit_text +
           ", at least " + std::to_string(kMinElementsPerThread) + " elements per thread)";
  });

  choose_stores(plan, op, dtype, moved, options.stores, machine);
  if (columns) {
    const std::int64_t panel_input_bytes = length * static_cast<std::int64_t>(size_of(dtype)) * plan.panel_width;
    plan.fetch_next_panel = fetches_next_panel(plan, op, dtype, panel_input_bytes, machine);
    plan.because([&] {
      return plan.fetch_next_panel ? "; each panel fetches the next one's input into L2 during its sum pass" : "";
    });
    const std::int64_t element_bytes = static_cast<std::int64_t>(size_of(dtype));
    const std::int64_t row_bytes = inner_extent * element_bytes;
    if (panels_may_take_lead(op, plan, inner_extent, element_bytes)) {
      plan.because([&] {
        const std::string where =
            row_bytes % std::int64_t{kCacheLineBytes} == 0
                ? "where y does not start at a cache line,"
                : "y's rows being " + std::to_string(row_bytes) + " bytes apart, not whole cache lines,";
        return "; " + where +
               " each panel but a row's first computes one line of columns of the panel before it again, so that "
               "panels write whole lines (unless in place)";
      });
    }
  }
  return plan;
}

}  // namespace smax::detail
