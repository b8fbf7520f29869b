// How the kernels of cpu/simd/ walk a row: whole vectors (unrolled), single vectors,
// then one partial vector whose loads and stores never touch memory past the end.
// Written against Highway's portable ops, compiled once per target (the -inl.h
// convention: foreach_target.h includes this header again for every target).

// The passes call their per-vector steps through lambdas, which must be inlined: GCC
// otherwise keeps the larger ones (16-bit conversions, exps) out of line, and a
// lambda out of line reads what it captured by reference from memory again after
// every vector store (which may alias anything), and its lane constants as well.
#ifndef SMAX_INLINE_LAMBDA
#if defined(__GNUC__) || defined(__clang__)
#define SMAX_INLINE_LAMBDA __attribute__((always_inline))
#else
#define SMAX_INLINE_LAMBDA
#endif
#endif

#if defined(SMAX_CPU_SIMD_WALK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SMAX_CPU_SIMD_WALK_INL_H_
#undef SMAX_CPU_SIMD_WALK_INL_H_
#else
#define SMAX_CPU_SIMD_WALK_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <hwy/highway.h>

#include "core/cache_line.hpp"
#include "cpu/simd/misaligned_loads.hpp"

HWY_BEFORE_NAMESPACE();
namespace smax::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether MaskedLoad and BlendedStore of D's lanes leave the memory of masked-off
// lanes alone: AVX-512 (opmasks) always, AVX2 (vmaskmov) for 32- and 64-bit lanes.
// Elsewhere Highway emulates them with a whole-vector access, so the tail goes
// through a small buffer instead.
template <class D>
constexpr bool kMaskedMemoryIsSafe =
    HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || (HWY_TARGET <= HWY_AVX2 && sizeof(hn::TFromD<D>) >= 4));

// The largest vector of any target, in bytes, for the tail buffers.
inline constexpr std::size_t kMaxVectorBytes = 256;

// The `count` (< Lanes) elements at p, the other lanes set to `fill`.
template <class D, class T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> LoadTail(D d, const T* p, std::size_t count, hn::Vec<D> fill) {
  if constexpr (kMaskedMemoryIsSafe<D>) {
    const auto m = hn::FirstN(d, count);
    return hn::IfThenElse(m, hn::MaskedLoad(m, d, p), fill);
  } else {
    HWY_ALIGN T buf[kMaxVectorBytes / sizeof(T)];
    hn::Store(fill, d, buf);
    std::memcpy(buf, p, count * sizeof(T));
    return hn::Load(d, buf);
  }
}

// Stores the first `count` (< Lanes) lanes of v at p.
template <class D, class T = hn::TFromD<D>>
HWY_INLINE void StoreTail(D d, hn::Vec<D> v, T* p, std::size_t count) {
  if constexpr (kMaskedMemoryIsSafe<D>) {
    hn::BlendedStore(v, hn::FirstN(d, count), d, p);
  } else {
    HWY_ALIGN T buf[kMaxVectorBytes / sizeof(T)];
    hn::Store(v, d, buf);
    std::memcpy(p, buf, count * sizeof(T));
  }
}

// Visits [0, n) as groups of `kUnroll` vectors of Lanes(d), then single vectors, then
// one partial vector, from the start or (backward) from the end: full(i) handles
// [i, i + kUnroll * Lanes), one(i) [i, i + Lanes), tail(i, count) [i, i + count).
template <std::size_t kUnroll, class D, class Full, class One, class Tail>
HWY_INLINE void Walk(D d, std::size_t n, bool backward, Full&& full, One&& one, Tail&& tail) {
  const std::size_t N = hn::Lanes(d);
  const std::size_t U = kUnroll * N;
  if (!backward) {
    std::size_t i = 0;
    for (; i + U <= n; i += U) full(i);
    for (; i + N <= n; i += N) one(i);
    if (i < n) tail(i, n - i);
  } else {
    std::size_t i = n;
    for (; i >= U; i -= U) full(i - U);
    for (; i >= N; i -= N) one(i - N);
    if (i > 0) tail(0, i);
  }
}

// The elements of y before its first address aligned to a vector of Lanes(d) T (at
// most n; 0 where y is not aligned to its element).
template <class D, class T>
HWY_INLINE std::size_t AlignmentHead(D d, const T* y, std::size_t n) {
  const std::size_t bytes = hn::Lanes(d) * sizeof(T);
  const std::size_t misalignment = reinterpret_cast<std::uintptr_t>(y) % bytes;
  if (misalignment % sizeof(T) != 0) return 0;
  return std::min(n, (bytes - misalignment) % bytes / sizeof(T));
}

// The vectors of a float row x where x is not aligned to them, half of them joined
// from two aligned loads by one two-table permute (AVX-512's vpermt2ps), the other
// half loaded unaligned: the lanes hold what an unaligned load at x + i gives either
// way (sums keep their order, and their bits, at any address). Loads that cross a
// cache line cost load-port cycles, joins a cycle of the shuffle port that the exp's
// table lookups share. On Intel cores half and half ran f32 rows 16 or 32 bytes off
// their alignment 3-5% faster in cache than either alone (Xeon VM, A/B tool, 64 x 1008
// to 16 x 16384, one thread; from DRAM no difference); on Zen 4 plain unaligned loads
// ran 1.03-1.08x as fast as the joins 32 bytes off and 1.01-1.11x 16 bytes off
// (thirty-eighth and thirty-ninth sessions), so AMD cores take those
// (misaligned_loads.hpp). Active where x is aligned to its element but not to the
// vector, for float rows on AVX-512 targets only: elsewhere the join takes three
// operations (and Highway 1.0 has no portable one), and 16-bit rows' loads are half as
// wide, so fewer of them cross a line. Inactive, covers4 is false.
template <class T>
class ShiftedLoads {
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  static constexpr bool kJoins = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && std::is_same_v<T, float>;

 public:
  ShiftedLoads(D d, const T* x, std::size_t n) : n_(n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (kJoins) {
      const std::size_t bytes = hn::Lanes(d) * sizeof(float);
      const std::size_t misalignment = reinterpret_cast<std::uintptr_t>(x) % bytes;
      if (misalignment == 0 || misalignment % sizeof(float) != 0 || !joins_misaligned_loads()) return;
      shift_ = misalignment / sizeof(float);
      base_ = x - shift_;
      const hn::RebindToSigned<D> di;
      join_ = hn::BitCast(hn::RebindToUnsigned<D>(), hn::Iota(di, static_cast<std::int32_t>(shift_)));
    }
#endif
    (void)d;
    (void)x;
  }

  // Whether Load4 may take [i, i + 4 Lanes): i is a multiple of Lanes (a backward
  // walk's are not), and its loads, aligned from base_ + i to base_ + i + 4 Lanes and
  // unaligned up to x + i + 4 Lanes, stay within the row.
  HWY_INLINE bool covers4(D d, std::size_t i) const {
    if constexpr (!kJoins) return false;
    const std::size_t N = hn::Lanes(d);
    return base_ != nullptr && i % N == 0 && i >= shift_ && i + 4 * N <= n_;
  }

  // The four vectors at x + i: the first and third joined, the others loaded unaligned.
  HWY_INLINE void Load4(D d, std::size_t i, V (&v)[4]) const {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    if constexpr (kJoins) {
      const std::size_t N = hn::Lanes(d);
      const float* p = base_ + i;
      v[0] = V{_mm512_permutex2var_ps(hn::Load(d, p).raw, join_.raw, hn::Load(d, p + N).raw)};
      v[1] = hn::LoadU(d, p + shift_ + N);
      v[2] = V{_mm512_permutex2var_ps(hn::Load(d, p + 2 * N).raw, join_.raw, hn::Load(d, p + 3 * N).raw)};
      v[3] = hn::LoadU(d, p + shift_ + 3 * N);
    }
#endif
    (void)d;
    (void)i;
    (void)v;
  }

 private:
  const T* base_ = nullptr;  // x's last aligned address below it; null if inactive
  std::size_t shift_ = 0;    // lanes from base_ to x
  std::size_t n_;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  hn::Vec<hn::RebindToUnsigned<D>> join_;  // lane k takes lane shift_ + k of (lo, hi)
#endif
};

// Streaming stores write whole cache lines where they can (core/cache_line.hpp).
using smax::detail::kCacheLineBytes;

// Fetches the cache lines that start in [p, p + count) for reading (into L1, or with
// kIntoL2 into L2 only) or, with kForWriting, for writing (owned before the stores
// come, so that they need not read each line first). A pass that fetches a row
// piece by piece so fetches each of its lines once, the last too where the row ends
// inside a line (its first line, where it starts inside one, is the previous row's
// last). A hint only: never faults.
template <bool kForWriting, bool kIntoL2 = false, class T>
HWY_INLINE void FetchLines(const T* p, std::size_t count) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  const auto* first =
      reinterpret_cast<const char*>(p) + (kCacheLineBytes - address % kCacheLineBytes) % kCacheLineBytes;
  for (std::size_t b = 0; b < count * sizeof(T); b += kCacheLineBytes) {
    __builtin_prefetch(first + b, kForWriting ? 1 : 0, kIntoL2 ? 2 : 3);
  }
}

// The elements of T in a cache line, at least a vector (so a multiple of Lanes).
template <class D, class T>
HWY_INLINE std::size_t LineLanes(D d, const T* /*y*/) {
  return std::max<std::size_t>(hn::Lanes(d), kCacheLineBytes / sizeof(T));
}

// The elements of T between the start of p's cache line and p (aligned to sizeof(T)).
template <class T>
HWY_INLINE std::size_t PastLineStart(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kCacheLineBytes / sizeof(T);
}

// The elements of a row at y (aligned to sizeof(T)) before its first whole cache
// line, at most n.
template <class T>
HWY_INLINE std::size_t LineHead(const T* y, std::size_t n) {
  const std::size_t past = PastLineStart(y);
  return std::min(n, past == 0 ? 0 : kCacheLineBytes / sizeof(T) - past);
}

// Fetches for writing the lines at the ends of the row [y, y + n) that it covers only
// in part (n >= 1), which streaming stores leave to stores through the cache.
template <class T>
HWY_INLINE void FetchPartLinesForWriting(const T* y, std::size_t n) {
  const auto address = reinterpret_cast<std::uintptr_t>(y);
  if (address % kCacheLineBytes != 0) __builtin_prefetch(y, 1, 3);
  if ((address + n * sizeof(T)) % kCacheLineBytes != 0) __builtin_prefetch(y + n - 1, 1, 3);
}

// Visits [0, n) for streaming stores to y (the row written; aligned to sizeof(T)):
// whole vectors that cover whole cache lines of y go to whole(i) ([i, i + Lanes);
// forward, or backward from the end), and after them the pieces before the first
// whole line and after the last to part(i, count <= Lanes), a vector at a time. The
// pieces' lines, stored through the cache, are fetched for writing first, so that
// their reads overlap the streaming stores instead of stalling them. bf16 rows (whose
// vectors are half a line on AVX-512) 48 bytes past a line ran 1.23-1.47x as fast so
// as with whole vectors from the vector's alignment, pieces first (a line streamed in
// part, then stored in part through the cache); 16 bytes past 1.00-1.02x, f32 rows
// the same (docs/PERFORMANCE.md, twenty-third session).
template <class D, class T, class Whole, class Part>
HWY_INLINE void WalkAligned(D d, const T* y, std::size_t n, bool backward, Whole&& whole, Part&& part) {
  const std::size_t N = hn::Lanes(d);
  const std::size_t head = LineHead(y, n);
  const std::size_t body_end = head + (n - head) / LineLanes(d, y) * LineLanes(d, y);
  if (n > 0) FetchPartLinesForWriting(y, n);
  if (!backward) {
    for (std::size_t i = head; i < body_end; i += N) whole(i);
  } else {
    for (std::size_t i = body_end; i > head; i -= N) whole(i - N);
  }
  for (std::size_t i = 0; i < head; i += N) part(i, std::min(N, head - i));
  for (std::size_t i = body_end; i < n; i += N) part(i, std::min(N, n - i));
}

// WalkAligned forward without the fetches, its whole vectors in groups of kUnroll
// (group(i) handles [i, i + kUnroll * Lanes)) and then single ones, the pieces
// first: for passes whose step is one long dependency chain (an exp). The column
// panels' output pass (f32_columns.cpp): with half-line bf16 vectors streamed from
// the vector's alignment, [32, 81, 8732] along axis 1 ran 0.86-0.90x as fast as
// cached, with whole lines 1.16-1.17x.
template <std::size_t kUnroll, class D, class T, class Group, class Whole, class Part>
HWY_INLINE void WalkLineGroups(D d, const T* y, std::size_t n, Group&& group, Whole&& whole, Part&& part) {
  const std::size_t N = hn::Lanes(d);
  const std::size_t head = LineHead(y, n);
  const std::size_t body_end = head + (n - head) / LineLanes(d, y) * LineLanes(d, y);
  for (std::size_t i = 0; i < head; i += N) part(i, std::min(N, head - i));
  std::size_t i = head;
  for (; i + kUnroll * N <= body_end; i += kUnroll * N) group(i);
  for (; i < body_end; i += N) whole(i);
  for (i = body_end; i < n; i += N) part(i, std::min(N, n - i));
}

}  // namespace smax::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SMAX_CPU_SIMD_WALK_INL_H_
