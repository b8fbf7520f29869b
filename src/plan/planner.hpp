// The one place where performance decisions live.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cache_line.hpp"
#include "smax/dtype.hpp"
#include "smax/info.hpp"
#include "smax/options.hpp"

namespace smax::detail {

struct Plan {
  Algorithm algorithm = Algorithm::safe;  // never automatic
  PassOrder order = PassOrder::reverse;
  std::int64_t block = 0;                 // tiled: elements per block
  std::int64_t chunk = 0;                 // > 0: the row runs as fixed chunks (split_row.hpp)
  std::int64_t panel_width = 0;           // > 0: a non-last axis runs as column panels this wide
  bool fetch_next_panel = false;          // each panel fetches the next one's input (its sum pass)
  int threads = 1;
  Stores stores = Stores::cached;         // never automatic
  // Why, in words (smax info, plan()), where make_plan was asked to explain: building
  // them took half the time of a short call (a row of 16 floats: 270 ns, 50 in the
  // kernel), so a call that runs the plan goes without.
  bool explained = false;
  std::string reason;

  // Appends words() to reason, where the plan is explained.
  template <class Words>
  void because(Words&& words) {
    if (explained) reason += words();
  }
};

// Whether the streamed softmax or log-softmax column panels of `plan` may take a lead
// (simd::ColumnPanel::lead: each panel but a row's first starts a cache line of
// columns early, so that panels write whole lines of y): more than one panel across
// the inner extent, each at least two lines wide. execute.cpp's panel_lead decides
// from y's addresses whether they do; the plan's reason says where they would.
inline bool panels_may_take_lead(Op op, const Plan& plan, std::int64_t inner_extent, std::int64_t element_bytes) {
  return (op == Op::softmax || op == Op::log_softmax) && plan.stores == Stores::streaming &&
         plan.panel_width > 0 && plan.panel_width < inner_extent &&
         plan.panel_width * element_bytes >= 2 * static_cast<std::int64_t>(kCacheLineBytes);
}

// Below this many elements in a call, starting threads costs more than it saves.
inline constexpr std::int64_t kMinElementsPerThread = 32768;

// Rows at least this long run, under `auto`, as chunks of at most kChunkLength
// elements (chunk_length) whose (max, sum) pairs merge in a fixed order: the chunks can go to different
// threads, and each is read twice from cache, not from memory. The choice depends
// on the length alone, never on the thread count, so results do not either. Chunks
// of 32768 against 16384 (Intel Xeon VM, `scripts/ab.sh`, docs/PERFORMANCE.md,
// twenty-second session): rows in cache, one thread, 1 x 20000 1.09x, 1 x 32000
// 1.07x, 4 x 32000 1.08x, 1 x 128256 1.01-1.03x, bf16 1.02x; from DRAM on two threads
// the same within 2-3% (one row of 2^24: 0.97, 1.01 and 0.98 in three runs). A row of
// up to 32768 elements is then one chunk: no merge, no second guess. (Rows under
// 65536 run on one thread anyway: kMinElementsPerThread.)
inline constexpr std::int64_t kSplitMinLength = 65536;
inline constexpr std::int64_t kChunkLength = 32768;

// The chunk length of a row of n elements split into chunks: as many chunks as
// kChunkLength makes, rounded up to an even count (an odd one leaves one of two
// threads a chunk more than the other: 1 x 151936 in five chunks of 32768 ran 1.47x
// faster on two threads than on one; docs/PERFORMANCE.md, twenty-third session), of
// equal lengths in whole multiples of 64 elements (the last chunk shorter). It
// depends on n alone, never on the thread count.
inline std::int64_t chunk_length(std::int64_t n) {
  std::int64_t chunks = (n + kChunkLength - 1) / kChunkLength;
  if (chunks > 1 && chunks % 2 == 1) ++chunks;
  const std::int64_t length = (n + chunks - 1) / std::max<std::int64_t>(chunks, 1);
  return (length + 63) / 64 * 64;
}

// Under Stores::automatic, a call that moves more than streaming_threshold_bytes
// (input plus output) writes its softmax or log_softmax output with streaming stores:
// input and output together exceed the last-level cache, so the output would not stay
// there for whatever reads it next, and streaming skips the read for ownership of
// every line, a third of a cached write's traffic. The threshold is the last-level
// cache, counting at most kStreamingLlcCap of it (a VM may report its host's whole L3,
// more than one core reaches). Measured on the Intel Xeon VM (480 MiB L3 reported;
// scripts/ab.sh, docs/PERFORMANCE.md, twenty-third session), calls moving 51 to 64 MiB
// on two threads: where the output buffer was not in cache, streaming ran 1.18 to 1.45
// times as fast whether the input was in cache or not; only where one output buffer
// was rewritten call after call (a benchmark's loop, which the VM's larger real L3
// keeps) did cached stores win, by up to 5% (f32) and 10% (bf16). On the AMD EPYC Zen
// 5 VM (32 MiB L3) such loops ran 5% to 40% faster cached up to 32 MiB moved and about
// as fast at 64 MiB (seventh session). Twice the cache, the rule until the
// twenty-third session, had been set on such loops alone.
inline constexpr std::int64_t kStreamingLlcCap = std::int64_t{48} << 20;
// The last-level cache as the planner's rules count it: at most kStreamingLlcCap.
inline std::int64_t counted_llc_bytes(const MachineInfo& m) { return std::min(m.l3_bytes, kStreamingLlcCap); }
inline std::int64_t streaming_threshold_bytes(const MachineInfo& m) { return counted_llc_bytes(m); }

// BackwardOptions::stores = automatic streams dx where y, dy and dx together exceed
// this share of the last-level cache, counting at most kStreamingLlcCap of it (a VM
// may report its host's whole L3). Measured on the Zen 5 VM (32 MiB L3):
// softmax_backward of 8 x 128256 f32 (11 MiB moved) took 400 and 318 us a call on one
// and two threads with dx streamed, 428 and 339 with dx cached (blocks of
// back-to-back calls on rotating buffers, alternating). On the Intel Xeon VM (480 MiB
// reported; what it keeps of data read once: 8 to 16 MiB), two threads, streamed
// against cached: 8 x 128256 f32 (11.7 MiB) from DRAM 1.09x (`scripts/ab.sh ...
// m=1024`; 1.25-1.55x in a loop over rotating buffers), hot (the same buffers each
// call) 1.00-1.17x; 4 x 128256 f32 and 8 x 128256 bf16 (5.9 MiB) from DRAM 1.19x and
// 1.17x, hot 0.79x and 0.84x (docs/PERFORMANCE.md, twenty-second session). A sixth:
// 8 MiB there, 5.3 MiB on the Zen 5 VM.
inline constexpr std::int64_t kBackwardStreamingLlcDivisor = 6;

// Under automatic, rows of an output shorter than these go through the cache, however
// large the call: their streaming stores ran slower than cached ones from DRAM (AMD
// Zen 4 VM, outputs in fresh buffers). softmax_backward f32: rows of 64 to 200
// elements 1.1-1.6x the time on one thread, up to 1.3x on two; rows of 256 to 1000
// streamed 1.08-1.28x faster on one thread, 1.04-1.55x on two. cross_entropy's
// gradient: f32 rows of 256 to 1000 streamed 0.93-1.01x, bf16 1000 0.84-0.91x, on one
// and two threads (docs/PERFORMANCE.md, forty-sixth session).
inline constexpr std::int64_t kShortestStreamedDxRowBytes = 1024;
inline constexpr std::int64_t kShortestStreamedGradRowBytes = 4096;

// Whether a training op's output streams under Stores: as asked, or under automatic
// where the call's tensors (`moved` bytes) exceed `threshold` bytes and its rows along
// the axis take `row_bytes`, at least `shortest_row_bytes`.
inline bool training_output_streams(Stores stores, std::int64_t moved, std::int64_t threshold,
                                    std::int64_t row_bytes, std::int64_t shortest_row_bytes) {
  if (stores != Stores::automatic) return stores == Stores::streaming;
  return threshold > 0 && moved > threshold && row_bytes >= shortest_row_bytes;
}
inline std::int64_t backward_streaming_threshold_bytes(const MachineInfo& m) {
  return counted_llc_bytes(m) / kBackwardStreamingLlcDivisor;
}

// Under Algorithm::automatic, an f32 softmax call that moves at most this share of the
// last-level cache stays in cache between the passes of fused over chunks
// (choose_variant), whatever its row length; cross-entropy's stored exps take the
// same rule.
inline constexpr std::int64_t kFusedCallLlcDivisor = 4;
// Whether a call moving `bytes` (input plus output) stays in the cache between two
// passes over it (kFusedCallLlcDivisor).
inline bool stays_cached_between_passes(std::int64_t bytes, const MachineInfo& m) {
  return m.l3_bytes <= 0 || bytes <= m.l3_bytes / kFusedCallLlcDivisor;
}

// A column panel's input is kept within this share of each core's part of the
// last-level cache (counting at most kStreamingLlcCap of it), so that an online
// panel's second read finds it there (panel_width): 4 MiB a core on the Zen 5 VM.
inline constexpr std::int64_t kPanelLlcDivisor = 4;

// inner_extent: the extent of the contiguous dimension that column panels would run
// across (detail::column_dim), 0 if the problem has none (its axis is contiguous).
Plan make_plan(Op op, DType dtype, std::int64_t rows, std::int64_t length, std::int64_t inner_extent,
               const Options& options, const MachineInfo& machine, bool explain = false);

}  // namespace smax::detail
