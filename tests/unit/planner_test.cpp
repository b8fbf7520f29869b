// smax::machine() and smax::plan(): what the planner sees and what it picks.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <string>
#include <vector>

#include "op_runner.hpp"
#include "plan/planner.hpp"
#include "seed.hpp"

namespace smax::test {
namespace {

class Planner : public SeededTest {};

// How many rows of `columns` f32 elements make a call whose input and output together
// just exceed the streaming threshold: auto streams their output.
std::int64_t rows_beyond_streaming(std::int64_t columns) {
  return detail::streaming_threshold_bytes(machine()) / (8 * columns) + 1;
}

TEST_F(Planner, MachineReportsCachesAndThreads) {
  const MachineInfo& m = machine();
  EXPECT_GT(m.l1d_bytes, 0);
  EXPECT_GT(m.l2_bytes, 0);
  EXPECT_GT(m.l3_bytes, 0);
  EXPECT_GE(m.threads, 1);
  EXPECT_FALSE(m.architecture.empty());
  EXPECT_FALSE(m.cpu_model.empty());
  EXPECT_EQ(&machine(), &m) << "machine() is read once";
}

// x86 Linux names the vendor in /proc/cpuinfo too ("vendor_id : AuthenticAMD"). Other
// vendors (Hygon, Zhaoxin) are left out: how the compiler's runtime files them varies.
TEST_F(Planner, MachineReportsTheVendorThatProcCpuinfoNames) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string vendor_id;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("vendor_id", 0) == 0) {
      vendor_id = line.substr(line.find(':') + 2);
      break;
    }
  }
  if (machine().architecture != "x86_64" || (vendor_id != "GenuineIntel" && vendor_id != "AuthenticAMD")) {
    GTEST_SKIP() << "not an Intel or AMD x86 CPU by /proc/cpuinfo: '" << vendor_id << "'";
  }
  EXPECT_EQ(machine().vendor, vendor_id == "GenuineIntel" ? "intel" : "amd") << vendor_id;
}

TEST_F(Planner, VersionHasThreeParts) {
  const std::string v(version());
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
}

TEST_F(Planner, SmallRowsAreFused) {
  const std::array<std::int64_t, 2> shape{64, 1000};
  const PlanInfo p = plan(Op::softmax, shape, DType::f64);
  EXPECT_EQ(p.algorithm, Algorithm::fused) << p.reason;
  EXPECT_EQ(p.rows, 64);
  EXPECT_EQ(p.length, 1000);
  EXPECT_FALSE(p.reason.empty());
  for (DType dtype : kAllDTypes) {
    for (int axis : {0, 1}) {
      EXPECT_EQ(plan(Op::softmax, shape, dtype, {.axis = axis}).algorithm, Algorithm::fused) << to_string(dtype);
    }
  }
}

TEST_F(Planner, SoftmaxRowsThatFitInCacheRunFusedOverChunks) {
  const std::array<std::int64_t, 2> shape{1, 3 * kFusedMaxLength};
  if (shape[1] * 8 > machine().l2_bytes / 2) GTEST_SKIP() << "L2 too small for this shape";
  const PlanInfo p = plan(Op::softmax, shape, DType::f32);
  EXPECT_EQ(p.algorithm, Algorithm::fused) << p.reason;
  EXPECT_GT(p.chunk_length, 0) << p.reason;
  // log_softmax keeps no exps: no fused-over-chunks form, but fused holds its rows
  // beyond the buffer's length (below the length from which rows split across threads).
  const PlanInfo log = plan(Op::log_softmax, shape, DType::f32);
  EXPECT_EQ(log.algorithm, Algorithm::fused) << log.reason;
  EXPECT_EQ(log.chunk_length, 0) << log.reason;

  // A row that fits in L2 but not in half of it; one larger than L2 in a call that
  // stays within a quarter of L3 (kFusedCallLlcDivisor); and the same row in a call
  // beyond it and beyond the streaming threshold, which runs online (its output
  // streams).
  const MachineInfo& m = machine();
  const std::array<std::int64_t, 2> in_l2{4, m.l2_bytes / 8};
  const std::array<std::int64_t, 2> beyond_l2{1, m.l2_bytes / 2};
  const std::int64_t cached_call = m.l3_bytes / detail::kFusedCallLlcDivisor;
  const std::array<std::int64_t, 2> beyond_cache{std::max(rows_beyond_streaming(m.l2_bytes / 2),
                                                          cached_call / (m.l2_bytes * 4) + 1),
                                                 m.l2_bytes / 2};
  ASSERT_GT(beyond_cache[0] * beyond_cache[1] * 8, cached_call);
  for (const auto& fused_shape : {in_l2, beyond_l2}) {
    if (fused_shape == beyond_l2 && beyond_l2[1] * 8 > cached_call) continue;
    const PlanInfo q = plan(Op::softmax, fused_shape, DType::f32);
    EXPECT_EQ(q.algorithm, Algorithm::fused) << q.reason;
    EXPECT_GT(q.chunk_length, 0) << q.reason;
  }
  // 16-bit rows too, their float exps (twice their input's bytes) counted in: a row of
  // in_l2's shape with its exps just fills L2.
  const PlanInfo b = plan(Op::softmax, in_l2, DType::bf16);
  EXPECT_EQ(b.algorithm, Algorithm::fused) << b.reason;
  EXPECT_GT(b.chunk_length, 0) << b.reason;
  // beyond_cache's bytes again in bf16, whose output streams: fused over chunks all
  // the same where its float exps fit in a quarter of the counted L3, streamed.
  const std::array<std::int64_t, 2> beyond_cache_bf16{2 * beyond_cache[0], beyond_cache[1]};
  const PlanInfo b_streamed = plan(Op::softmax, beyond_cache_bf16, DType::bf16);
  if (beyond_cache[1] * 4 <= detail::counted_llc_bytes(m) / detail::kFusedCallLlcDivisor) {
    EXPECT_EQ(b_streamed.algorithm, Algorithm::fused) << b_streamed.reason;
    EXPECT_GT(b_streamed.chunk_length, 0) << b_streamed.reason;
    EXPECT_EQ(b_streamed.stores, Stores::streaming) << b_streamed.reason;
  } else {
    EXPECT_NE(b_streamed.algorithm, Algorithm::fused) << b_streamed.reason;
  }
  const PlanInfo streamed = plan(Op::softmax, beyond_cache, DType::f32);
  EXPECT_EQ(streamed.algorithm, Algorithm::online) << streamed.reason;
  EXPECT_EQ(streamed.stores, Stores::streaming) << streamed.reason;
}

TEST_F(Planner, StoresStreamOnlySoftmaxAndLogSoftmaxOfF32And16Bit) {
  const std::array<std::int64_t, 2> large{rows_beyond_streaming(4096), 4096};
  const std::array<std::int64_t, 2> small{64, 1000};
  const PlanInfo auto_large = plan(Op::softmax, large, DType::f32);
  EXPECT_EQ(auto_large.stores, Stores::streaming) << auto_large.reason;
  EXPECT_EQ(plan(Op::softmax, small, DType::f32).stores, Stores::cached);
  EXPECT_EQ(plan(Op::softmax, large, DType::f32, {.stores = Stores::cached}).stores, Stores::cached);
  EXPECT_EQ(plan(Op::softmax, small, DType::f32, {.stores = Stores::streaming}).stores, Stores::streaming);
  EXPECT_EQ(plan(Op::log_softmax, large, DType::f32).stores, Stores::streaming);
  // 16-bit rows stream as f32 ones do, where their bytes exceed the same share of L3.
  const std::array<std::int64_t, 2> large_16bit{2 * large[0], 4096};
  EXPECT_EQ(plan(Op::softmax, large_16bit, DType::bf16).stores, Stores::streaming);
  EXPECT_EQ(plan(Op::log_softmax, large_16bit, DType::f16).stores, Stores::streaming);
  EXPECT_EQ(plan(Op::softmax, small, DType::bf16).stores, Stores::cached);
  EXPECT_EQ(plan(Op::softmax, small, DType::f16, {.stores = Stores::streaming}).stores, Stores::streaming);
  // What cannot stream stores through the cache, whatever was asked.
  for (Options options : {Options{.stores = Stores::streaming}, Options{.stores = Stores::automatic}}) {
    EXPECT_EQ(plan(Op::logsumexp, large, DType::f32, options).stores, Stores::cached);
    EXPECT_EQ(plan(Op::softmax, large, DType::f64, options).stores, Stores::cached);
    // Column panels of three passes (64 elements along axis 0: a panel fits in L2)
    // stream too: their softmax terms wait in a scratch panel.
    options.axis = 0;
    const std::array<std::int64_t, 2> short_columns{64, 2 * rows_beyond_streaming(64)};
    for (DType dtype : {DType::bf16, DType::f32}) {
      EXPECT_EQ(plan(Op::softmax, short_columns, dtype, options).algorithm, Algorithm::fused);
      EXPECT_EQ(plan(Op::softmax, short_columns, dtype, options).stores, Stores::streaming);
    }
    options.axis = -1;
    options.algorithm = Algorithm::naive;
    EXPECT_EQ(plan(Op::softmax, large, DType::f32, options).stores, Stores::cached);
  }
  // Rows that run fused over chunks keep their exps in the output.
  const std::array<std::int64_t, 2> chunked{64, 3 * kFusedMaxLength};
  const PlanInfo p = plan(Op::softmax, chunked, DType::f32, {.stores = Stores::streaming});
  if (p.algorithm == Algorithm::fused && p.chunk_length > 0) {
    EXPECT_EQ(p.stores, Stores::cached) << p.reason;
  }
}

// Online column panels write their output in a pass of its own, which streams like
// the rows' output passes.
TEST_F(Planner, TallColumnPanelsRunOnlineAndStream) {
  const std::array<std::int64_t, 2> large{rows_beyond_streaming(4096), 4096};
  const PlanInfo p = plan(Op::softmax, large, DType::f32, {.axis = 0});
  EXPECT_EQ(p.algorithm, Algorithm::online) << p.reason;
  EXPECT_GT(p.panel_width, 0) << p.reason;
  EXPECT_EQ(p.stores, Stores::streaming) << p.reason;
  EXPECT_EQ(plan(Op::log_softmax, large, DType::f32, {.axis = 0}).stores, Stores::streaming);
  EXPECT_EQ(plan(Op::softmax, large, DType::f32, {.axis = 0, .stores = Stores::cached}).stores, Stores::cached);
  // 16-bit panels run online too (their outputs store through the cache); f64 keeps
  // its three passes.
  for (DType dtype : {DType::f16, DType::bf16}) {
    const PlanInfo q = plan(Op::softmax, large, dtype, {.axis = 0});
    EXPECT_EQ(q.algorithm, Algorithm::online) << q.reason;
    EXPECT_EQ(q.stores, Stores::cached) << q.reason;
  }
  EXPECT_EQ(plan(Op::softmax, large, DType::f64, {.axis = 0}).algorithm, Algorithm::fused);
  // Panels that fit in L2 take three passes; asking for online gets it anyway.
  const std::array<std::int64_t, 2> short_columns{81, 8732};
  EXPECT_EQ(plan(Op::softmax, short_columns, DType::f32, {.axis = 0}).algorithm, Algorithm::fused);
  EXPECT_EQ(plan(Op::softmax, short_columns, DType::f32, {.axis = 0, .algorithm = Algorithm::online}).algorithm,
            Algorithm::online);
}

// A tall panel's input stays within a core's share of L3 where rows of at least 1 KiB
// allow it (the online panel's second read then finds it there); else its rows are
// 4 KiB, as are those of panels within the share (with 4 KiB rows: columns of 1024
// and more leave L2's budget no room for wider ones).
// The panel width make_plan picks for softmax of f32 [length, 4096] along axis 0 on m.
std::int64_t column_panel_width(std::int64_t length, const MachineInfo& m) {
  return detail::make_plan(Op::softmax, DType::f32, 4096, length, 4096, {.axis = 0}, m).panel_width;
}

MachineInfo two_cores(std::int64_t l2_bytes, std::int64_t l3_bytes) {
  MachineInfo m;
  m.l1d_bytes = 48 << 10;
  m.l2_bytes = l2_bytes;
  m.l3_bytes = l3_bytes;
  m.threads = 2;
  return m;
}

// Softmax rows longer than L2 in a call beyond a quarter of L3 but within the
// streaming threshold, whose output online would write through the cache: fused over
// chunks, which computes each exp once (choose_variant). Beyond the threshold: online,
// whose output streams (16-bit rows, whose exps wait apart: fused over chunks, streamed).
// The Zen 4 VM's caches; log_softmax has no fused-over-chunks form.
TEST_F(Planner, LongSoftmaxRowsWhoseOutputGoesThroughTheCacheRunFusedOverChunks) {
  const MachineInfo zen4 = two_cores(1 << 20, 32 << 20);
  const auto rows_plan = [&](Op op, DType dtype, std::int64_t rows) {
    return detail::make_plan(op, dtype, rows, 262144, 0, {}, zen4);
  };
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (std::int64_t rows : {8, 16}) {  // 16 and 32 MiB of f32 in and out
      const detail::Plan p = rows_plan(Op::softmax, dtype, rows);
      EXPECT_EQ(p.algorithm, Algorithm::fused) << rows << " rows: " << p.reason;
      EXPECT_GT(p.chunk, 0) << p.reason;
      EXPECT_EQ(p.stores, Stores::cached) << p.reason;
    }
    EXPECT_EQ(rows_plan(Op::log_softmax, dtype, 8).algorithm, Algorithm::online);
  }
  const detail::Plan streamed = rows_plan(Op::softmax, DType::f32, 24);  // 48 MiB
  EXPECT_EQ(streamed.algorithm, Algorithm::online) << streamed.reason;
  EXPECT_EQ(streamed.stores, Stores::streaming) << streamed.reason;
  // 16-bit rows keep their exps in a float buffer, so where their call streams they
  // run fused over chunks, streamed, while those exps fit in a quarter of the L3 (8
  // MiB): 64 x 262144 (1 MiB of exps), not one row of 2^24 (64 MiB).
  for (DType dtype : {DType::bf16, DType::f16}) {
    const detail::Plan b = rows_plan(Op::softmax, dtype, 64);
    EXPECT_EQ(b.algorithm, Algorithm::fused) << b.reason;
    EXPECT_GT(b.chunk, 0) << b.reason;
    EXPECT_EQ(b.stores, Stores::streaming) << b.reason;
    const detail::Plan long_row = detail::make_plan(Op::softmax, dtype, 1, 1 << 24, 0, {}, zen4);
    EXPECT_EQ(long_row.algorithm, Algorithm::online) << long_row.reason;
  }
  EXPECT_EQ(rows_plan(Op::softmax, DType::f32, 64).algorithm, Algorithm::online);
  // Asked to store through the cache, online's output would not stream at any size.
  const detail::Plan cached =
      detail::make_plan(Op::softmax, DType::f32, 64, 262144, 0, {.stores = Stores::cached}, zen4);
  EXPECT_EQ(cached.algorithm, Algorithm::fused) << cached.reason;
  EXPECT_GT(cached.chunk, 0) << cached.reason;
}

// An L3 the size of a core complex's (AMD Zen 5 VM: 32 MiB): tall panels narrow to a
// core's share of it, rows no narrower than 1 KiB, as few panels as fit.
TEST_F(Planner, TallPanelsFitTheirShareOfAnL3OfTheCoresOwn) {
  const MachineInfo m = two_cores(1 << 20, 32 << 20);
  const std::int64_t share = detail::counted_llc_bytes(m) / (detail::kPanelLlcDivisor * m.threads);
  for (std::int64_t length : {1024, 2048, 4096, 16384, 65536}) {
    SCOPED_TRACE(length);
    const std::int64_t width = column_panel_width(length, m);
    const std::int64_t row_bytes = width * 4;
    if (length * 4096 <= share) {
      EXPECT_EQ(row_bytes, 4096);
    } else if (share / (length * 4) * 4 >= 1024) {
      EXPECT_LE(length * row_bytes, share);
      EXPECT_GE(row_bytes, 1024);
      // As few panels as fit: one fewer, of equal widths in whole lines, would not.
      const std::int64_t panels = (4096 + width - 1) / width;
      ASSERT_GT(panels, 1);
      const std::int64_t fewer_width = ((4096 + panels - 2) / (panels - 1) + 15) / 16 * 16;
      EXPECT_GT(length * fewer_width * 4, share) << "the widest that fits";
    } else {
      EXPECT_EQ(row_bytes, 4096);
    }
  }
  EXPECT_EQ(column_panel_width(4096, m), 256) << "4 MiB panels of 1 KiB rows";
}

// An L3 beyond kStreamingLlcCap is the host's (Intel Xeon VM: 480 MiB reported): a
// core's share of it is unknown, so tall panels keep their 4 KiB rows.
TEST_F(Planner, TallPanelsKeepLongRowsWhereTheL3IsTheHosts) {
  const MachineInfo m = two_cores(2 << 20, 480 << 20);
  for (std::int64_t length : {1024, 4096, 65536}) {
    EXPECT_EQ(column_panel_width(length, m), 1024) << length;
  }
}

// A short axis whose panels of 4 KiB rows would just overflow L2 (and so run online)
// narrows its rows to fit half of L2, down to 1 KiB, and takes three passes there:
// [8, 256, 56, 56] along axis 1 with a 1 MiB L2 (cached stores: streamed panels
// have a rule of their own, StreamedThreePassPanelsFetchTheNextPanel). Where 4 KiB
// rows fit (a 2 MiB L2), or only rows under 1 KiB would (a longer axis), the width is
// the old one.
TEST_F(Planner, ShortAxisPanelsNarrowToFitL2) {
  const auto columns_plan = [](std::int64_t length, const MachineInfo& m) {
    return detail::make_plan(Op::softmax, DType::f32, 8 * 3136, length, 3136, {.axis = 1, .stores = Stores::cached},
                             m);
  };
  const MachineInfo small_l2 = two_cores(1 << 20, 32 << 20);
  const detail::Plan narrowed = columns_plan(256, small_l2);
  EXPECT_EQ(narrowed.algorithm, Algorithm::fused);
  EXPECT_LE(256 * narrowed.panel_width * 4 * 2, small_l2.l2_bytes / 2);
  EXPECT_GE(narrowed.panel_width * 4, 1024);

  const detail::Plan kept = columns_plan(256, two_cores(2 << 20, 32 << 20));
  EXPECT_EQ(kept.algorithm, Algorithm::fused);
  EXPECT_EQ(kept.panel_width, 784) << "four panels of 4 KiB rows or less fit a 2 MiB L2";

  const detail::Plan tall = columns_plan(1024, small_l2);
  EXPECT_EQ(tall.algorithm, Algorithm::online);
  EXPECT_EQ(tall.panel_width, 784) << "1 KiB rows of 1024 would not fit half of L2: 4 KiB rows, in four panels";
}

// A three-pass f32 panel whose output streams fetches the next panel's input during
// its sum pass, where three panels' inputs fit in half of L2: its panels narrow to a
// third of L2 for input and output ([32, 81, 8732] along axis 1 with a 2 MiB L2: 976
// columns, where half of L2 gives 1456), down to 1 KiB rows ([8, 256, 3136]: 320
// columns, where half of L2 gives 784). Cached outputs do not fetch, nor panels whose
// next would not fit even with 1 KiB rows ([16, 400, 4096]: those take 400 KiB; it
// keeps the 4 KiB rows a third of L2 gives, and runs online).
TEST_F(Planner, StreamedThreePassPanelsFetchTheNextPanel) {
  const MachineInfo m = two_cores(2 << 20, 480 << 20);
  const auto columns_plan = [&](std::int64_t outer, std::int64_t length, std::int64_t inner, Stores stores) {
    return detail::make_plan(Op::softmax, DType::f32, outer * inner, length, inner, {.axis = 1, .stores = stores}, m);
  };
  const detail::Plan streamed = columns_plan(32, 81, 8732, Stores::automatic);
  EXPECT_EQ(streamed.algorithm, Algorithm::fused);
  EXPECT_EQ(streamed.stores, Stores::streaming);
  EXPECT_EQ(streamed.panel_width, 976);
  EXPECT_TRUE(streamed.fetch_next_panel);
  EXPECT_LE(3 * 81 * streamed.panel_width * 4, m.l2_bytes / 2);

  const detail::Plan cached = columns_plan(32, 81, 8732, Stores::cached);
  EXPECT_EQ(cached.panel_width, 1456);
  EXPECT_FALSE(cached.fetch_next_panel);

  const detail::Plan short_rows = columns_plan(8, 256, 3136, Stores::automatic);
  EXPECT_EQ(short_rows.algorithm, Algorithm::fused);
  EXPECT_EQ(short_rows.stores, Stores::streaming) << "49 MiB moved, over the 48 MiB counted of the L3";
  EXPECT_EQ(short_rows.panel_width, 320);
  EXPECT_TRUE(short_rows.fetch_next_panel);
  EXPECT_LE(3 * 256 * short_rows.panel_width * 4, m.l2_bytes / 2);
  EXPECT_EQ(columns_plan(8, 256, 3136, Stores::cached).panel_width, 784);

  const detail::Plan too_tall = columns_plan(16, 400, 4096, Stores::streaming);
  EXPECT_EQ(too_tall.algorithm, Algorithm::online);
  EXPECT_EQ(too_tall.panel_width, 1024);
  EXPECT_FALSE(too_tall.fetch_next_panel);

  // Online panels read memory twice anyway: no fetch.
  EXPECT_FALSE(columns_plan(1, 4096, 4096 * 8, Stores::streaming).fetch_next_panel);
}

// Streamed f32 panels that fit three passes in L2 but cannot fetch the next panel
// beside them: online's 4 KiB rows on Intel cores, three passes in the L2 panels on AMD
// cores ([8, 256, 3136] with a 1 MiB L2; planner.cpp has the measurements).
TEST_F(Planner, PanelsThatCannotFetchFollowTheVendor) {
  MachineInfo m = two_cores(1 << 20, 32 << 20);
  const auto columns_plan = [&] {
    return detail::make_plan(Op::softmax, DType::f32, 8 * 3136, 256, 3136, {.axis = 1, .stores = Stores::streaming}, m);
  };
  m.vendor = "intel";
  const detail::Plan intel = columns_plan();
  EXPECT_EQ(intel.algorithm, Algorithm::online);
  EXPECT_EQ(intel.panel_width, 784);
  m.vendor = "amd";
  const detail::Plan amd = columns_plan();
  EXPECT_EQ(amd.algorithm, Algorithm::fused);
  EXPECT_EQ(amd.panel_width, 256);
  EXPECT_FALSE(amd.fetch_next_panel);
  EXPECT_LE(256 * amd.panel_width * 4 * 2, m.l2_bytes / 2);
}

// The lead of streamed panels (execute.cpp's panel_lead) is decided from y's
// addresses, which the plan does not see; its reason says when it comes.
TEST_F(Planner, ReasonsSayWhenPanelsTakeALead) {
  const MachineInfo m = two_cores(1 << 20, 32 << 20);
  const auto columns_plan = [&](std::int64_t outer, std::int64_t length, std::int64_t inner, Op op, Stores stores) {
    return detail::make_plan(op, DType::f32, outer * inner, length, inner, {.axis = 1, .stores = stores}, m, true);
  };
  const auto says = [](const detail::Plan& p, const char* text) { return p.reason.find(text) != std::string::npos; };
  const detail::Plan apart = columns_plan(32, 81, 8732, Op::softmax, Stores::streaming);
  EXPECT_TRUE(says(apart, "y's rows being 34928 bytes apart, not whole cache lines")) << apart.reason;
  const detail::Plan lines = columns_plan(1, 4096, 4096, Op::log_softmax, Stores::streaming);
  EXPECT_TRUE(says(lines, "where y does not start at a cache line")) << lines.reason;
  for (const detail::Plan& none : {columns_plan(32, 81, 8732, Op::softmax, Stores::cached),
                                   columns_plan(32, 81, 8732, Op::logsumexp, Stores::streaming),
                                   columns_plan(32, 81, 64, Op::softmax, Stores::streaming)}) {
    EXPECT_FALSE(says(none, "panel before it again")) << none.reason;
  }
}

// 16-bit softmax panels keep their float terms in a scratch panel, so they fetch the
// next panel's input whatever their stores, where their input, their terms (twice its
// bytes) and the next input fit in half of L2: panels narrow to a quarter of L2 for
// input and output, not below 1 KiB rows. [8, 256, 3136] would take 448 columns
// (896-byte rows): it keeps its width and does not fetch. Log-softmax keeps no terms:
// it fetches only where its output streams.
TEST_F(Planner, SixteenBitSoftmaxPanelsFetchTheNextPanel) {
  const MachineInfo m = two_cores(2 << 20, 480 << 20);
  const auto columns_plan = [&](Op op, DType dtype, std::int64_t outer, std::int64_t length, std::int64_t inner,
                                Stores stores) {
    return detail::make_plan(op, dtype, outer * inner, length, inner, {.axis = 1, .stores = stores}, m);
  };
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(to_string(dtype));
    for (Stores stores : {Stores::cached, Stores::automatic}) {
      const detail::Plan fetching = columns_plan(Op::softmax, dtype, 32, 81, 8732, stores);
      EXPECT_EQ(fetching.algorithm, Algorithm::fused);
      EXPECT_EQ(fetching.stores, stores == Stores::cached ? Stores::cached : Stores::streaming) << "86 MiB moved";
      EXPECT_TRUE(fetching.fetch_next_panel);
      EXPECT_EQ(fetching.panel_width, 1472);
      EXPECT_LE(4 * 81 * fetching.panel_width * 2, m.l2_bytes / 2);
    }

    const detail::Plan short_rows = columns_plan(Op::softmax, dtype, 8, 256, 3136, Stores::automatic);
    EXPECT_EQ(short_rows.stores, Stores::cached) << "25 MiB moved";
    EXPECT_FALSE(short_rows.fetch_next_panel);
    EXPECT_EQ(short_rows.panel_width, 1568);

    EXPECT_FALSE(columns_plan(Op::log_softmax, dtype, 32, 81, 8732, Stores::cached).fetch_next_panel);
    EXPECT_TRUE(columns_plan(Op::log_softmax, dtype, 32, 81, 8732, Stores::automatic).fetch_next_panel);
  }
}

// dx streams beyond a sixth of the L3, counting at most 48 MiB of it: 8 x 128256 f32
// (11.7 MiB moved) on the Intel Xeon VM (480 MiB reported: 8 MiB) and on the Zen 5 VM
// (32 MiB: 5.3 MiB); 8 x 128256 bf16 (5.9 MiB) only on the Zen 5 VM. Cross-entropy's
// gradient beyond the forward ops' threshold: 64 x 128256 f32 (62.6 MiB) on both, 16
// x 128256 (15.7 MiB) on neither.
TEST_F(Planner, TrainingOutputsStreamBeyondTheirThresholds) {
  const MachineInfo xeon = two_cores(2 << 20, 480 << 20);
  const MachineInfo zen5 = two_cores(1 << 20, 32 << 20);
  const std::int64_t f32_backward = 3 * 8 * 128256 * 4;
  const std::int64_t bf16_backward = 3 * 8 * 128256 * 2;
  const auto dx_streams = [](Stores stores, std::int64_t moved, const MachineInfo& m, std::int64_t row_bytes = 128256) {
    return detail::training_output_streams(stores, moved, detail::backward_streaming_threshold_bytes(m), row_bytes,
                                           detail::kShortestStreamedDxRowBytes);
  };
  EXPECT_TRUE(dx_streams(Stores::automatic, f32_backward, xeon));
  EXPECT_TRUE(dx_streams(Stores::automatic, f32_backward, zen5));
  EXPECT_FALSE(dx_streams(Stores::automatic, bf16_backward, xeon));
  EXPECT_TRUE(dx_streams(Stores::automatic, bf16_backward, zen5));
  EXPECT_FALSE(dx_streams(Stores::cached, f32_backward, xeon));
  EXPECT_TRUE(dx_streams(Stores::streaming, 64, xeon));
  // Short rows go through the cache under automatic, however large the call (f32
  // 1638400 x 100, 16384 x 200; 16384 x 256 streams), unless streaming is asked for.
  EXPECT_FALSE(dx_streams(Stores::automatic, 3 * 16384 * 100 * 4 * 100, zen5, 400));
  EXPECT_FALSE(dx_streams(Stores::automatic, 3 * 16384 * 200 * 4, zen5, 800));
  EXPECT_TRUE(dx_streams(Stores::automatic, 3 * 16384 * 256 * 4, zen5, 1024));
  EXPECT_TRUE(dx_streams(Stores::streaming, 3 * 16384 * 100 * 4, zen5, 400));
  for (const MachineInfo& m : {xeon, zen5}) {
    const auto grad_streams = [&](std::int64_t rows) {
      return detail::training_output_streams(Stores::automatic, 2 * rows * 128256 * 4,
                                             detail::streaming_threshold_bytes(m), 128256 * 4,
                                             detail::kShortestStreamedGradRowBytes);
    };
    EXPECT_TRUE(grad_streams(64));
    EXPECT_FALSE(grad_streams(16));
    // Rows of 1000 f32 classes keep their gradient in the cache, however many.
    EXPECT_FALSE(detail::training_output_streams(Stores::automatic, 2 * 65536 * 1000 * 4,
                                                 detail::streaming_threshold_bytes(m), 1000 * 4,
                                                 detail::kShortestStreamedGradRowBytes));
  }
}

TEST_F(Planner, RowsMuchLargerThanL2AreOnline) {
  // Four times L2 in f32 input alone, in a call beyond a quarter of L3 and beyond the
  // streaming threshold (a single such row in a call within the cache runs softmax
  // fused over chunks, above and below).
  const MachineInfo& m = machine();
  const std::array<std::int64_t, 2> shape{
      std::max(m.l3_bytes / detail::kFusedCallLlcDivisor / (m.l2_bytes * 8) + 1, rows_beyond_streaming(m.l2_bytes)),
      m.l2_bytes};
  for (Op op : kAllOps) {
    const PlanInfo p = plan(op, shape, DType::f32);
    EXPECT_EQ(p.algorithm, Algorithm::online) << to_string(op) << ": " << p.reason;
  }
  const std::array<std::int64_t, 1> row{m.l2_bytes};
  for (Op op : {Op::log_softmax, Op::logsumexp}) {
    EXPECT_EQ(plan(op, row, DType::f32).algorithm, Algorithm::online) << to_string(op);
  }
}

TEST_F(Planner, NeverReturnsAutomatic) {
  const std::vector<std::vector<std::int64_t>> shapes{
      {}, {1}, {7, 3}, {64, 1000}, {2, 20000}, {3, machine().l2_bytes / 4}, {0, 5}, {5, 0}};
  for (const auto& shape : shapes) {
    for (DType dtype : kAllDTypes) {
      for (Op op : kAllOps) {
        const PlanInfo p = plan(op, shape, dtype);
        EXPECT_NE(p.algorithm, Algorithm::automatic) << to_string(op) << " " << testing::PrintToString(shape);
        EXPECT_GE(p.threads, 1);
      }
    }
  }
}

TEST_F(Planner, TinyProblemsUseOneThread) {
  const std::array<std::int64_t, 2> shape{4, 8};
  Options many;
  many.threads = 64;
  EXPECT_EQ(plan(Op::softmax, shape, DType::f32).threads, 1);
  EXPECT_EQ(plan(Op::softmax, shape, DType::f32, many).threads, 1);
}

// A split row's chunks: an even count (but for one chunk), about kChunkLength each,
// equal lengths in whole multiples of 64 elements but the last, which is shorter and
// not empty; the same whatever the thread count.
TEST_F(Planner, SplitRowsTakeAnEvenCountOfEqualChunks) {
  for (std::int64_t n : {std::int64_t{1000}, std::int64_t{32768}, std::int64_t{32769}, std::int64_t{65537},
                         std::int64_t{100000}, std::int64_t{128256}, std::int64_t{151936}, std::int64_t{262144},
                         std::int64_t{300007}, std::int64_t{1} << 24}) {
    SCOPED_TRACE(n);
    const std::int64_t chunk = detail::chunk_length(n);
    const std::int64_t chunks = (n + chunk - 1) / chunk;
    EXPECT_EQ(chunk % 64, 0);
    EXPECT_GT(n - (chunks - 1) * chunk, 0);
    if (n <= detail::kChunkLength) {
      EXPECT_EQ(chunks, 1);
    } else {
      EXPECT_EQ(chunks % 2, 0);
      EXPECT_LE(chunk, detail::kChunkLength);
      EXPECT_GT(chunk, detail::kChunkLength / 2);
    }
  }
  EXPECT_EQ(detail::chunk_length(151936), 25344) << "six chunks, not five of 32768";
  const std::array<std::int64_t, 2> vocabulary{1, 151936};
  for (int threads : {1, 2, 3, 8}) {
    EXPECT_EQ(plan(Op::softmax, vocabulary, DType::f32, {.threads = threads}).chunk_length, 25344) << threads;
  }
}

TEST_F(Planner, ThreadsNeverExceedTheRowsOrTheRequest) {
  // Rows too short to split: at most one thread per row.
  const std::array<std::int64_t, 2> two_rows{2, 10000};
  Options many;
  many.threads = 16;
  EXPECT_LE(plan(Op::softmax, two_rows, DType::f32, many).threads, 2);
  // Long rows are split into chunks: at most one thread per chunk.
  const std::array<std::int64_t, 2> two_long_rows{2, 1 << 18};
  const PlanInfo split = plan(Op::softmax, two_long_rows, DType::f32, many);
  ASSERT_GT(split.chunk_length, 0);
  EXPECT_GT(split.threads, 2);
  EXPECT_LE(split.threads, (std::int64_t{1} << 18) / split.chunk_length);
  EXPECT_LE(split.threads, 16);
  Options one;
  one.threads = 1;
  const std::array<std::int64_t, 2> big{256, 4096};
  EXPECT_EQ(plan(Op::softmax, big, DType::f32, one).threads, 1);
}

TEST_F(Planner, HonoursAnExplicitAlgorithm) {
  const std::array<std::int64_t, 3> shape{6, 7, 8};
  for (Algorithm algorithm :
       {Algorithm::naive, Algorithm::safe, Algorithm::fused, Algorithm::tiled, Algorithm::online}) {
    for (PassOrder order : {PassOrder::reverse, PassOrder::forward}) {
      Options options;
      options.algorithm = algorithm;
      options.pass_order = order;
      options.axis = 1;
      const PlanInfo p = plan(Op::log_softmax, shape, DType::f64, options);
      EXPECT_EQ(p.algorithm, algorithm) << p.reason;
      EXPECT_EQ(p.pass_order, order);
      EXPECT_EQ(p.rows, 48);
      EXPECT_EQ(p.length, 7);
      if (algorithm == Algorithm::tiled) EXPECT_GT(p.block_length, 0);
      else EXPECT_EQ(p.block_length, 0);
    }
  }
}

TEST_F(Planner, EnumNamesRoundTrip) {
  for (Algorithm a : {Algorithm::automatic, Algorithm::naive, Algorithm::safe, Algorithm::fused, Algorithm::tiled,
                      Algorithm::online}) {
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  }
  EXPECT_EQ(to_string(Algorithm::automatic), "auto");
  EXPECT_FALSE(parse_algorithm("fast").has_value());
  for (AllMasked m : {AllMasked::nan, AllMasked::zero}) EXPECT_EQ(parse_all_masked(to_string(m)), m);
  EXPECT_FALSE(parse_all_masked("ignore").has_value());
  EXPECT_EQ(size_of(DType::f16), 2u);
  EXPECT_EQ(size_of(static_cast<DType>(9)), 0u);
  EXPECT_EQ(to_string(static_cast<DType>(9)), "invalid");
}

}  // namespace
}  // namespace smax::test
