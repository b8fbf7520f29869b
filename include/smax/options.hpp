// The options every operation takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace smax {

// The tutorial's variants; see docs/SEMANTICS.md and the README for what each does.
enum class Algorithm : std::uint8_t {
  automatic,  // the planner chooses from the shape, the dtype and the machine's caches
  naive,      // exp(x) / sum(exp(x)) with no max subtraction: overflows on purpose
  safe,       // three passes: max; sum of exp(x - max); normalise
  fused,      // the row is loaded once into an on-chip buffer (rows <= kFusedMaxLength)
  tiled,      // the three passes over blocks of the row
  online,     // one pass of running (max, sum), then one output pass
};

// Order of the second pass of `tiled` and `online`. Reverse starts on the blocks the
// previous pass touched last, which are still in cache.
enum class PassOrder : std::uint8_t { reverse, forward };

// What softmax gives for a row whose every element is -inf.
enum class AllMasked : std::uint8_t {
  nan,   // 0/0 = NaN, as PyTorch and ONNX do (the default)
  zero,  // softmax 0 and log_softmax -inf, as attention code wants
};

// How softmax and log_softmax write their output. Streaming (non-temporal) stores go
// around the cache: no read for ownership of each line, so a memory-bound call moves a
// third fewer bytes, but the output is then not in cache for whatever reads it next.
// Rows and column panels of f32, f16 and bf16 stream (f64, logsumexp, naive
// and the rest store through the cache; docs/SEMANTICS.md).
enum class Stores : std::uint8_t {
  automatic,  // streaming where the call moves more than the last-level cache (at most 48 MiB)
  cached,     // through the cache
  streaming,  // around the cache
};

// The longest row the fused variant holds in its buffer.
inline constexpr std::int64_t kFusedMaxLength = 16384;

struct Options {
  int axis = -1;                          // negative axes count from the end
  double temperature = 1.0;               // computes softmax(x / T); finite and > 0
  Algorithm algorithm = Algorithm::automatic;
  PassOrder pass_order = PassOrder::reverse;  // tiled and online only
  int threads = 0;                        // 0 = all cores
  AllMasked all_masked = AllMasked::nan;
  bool keepdims = false;                  // logsumexp only: keep the reduced axis as 1
  Stores stores = Stores::automatic;      // softmax, log_softmax's output: through the cache or around it
};

std::string_view to_string(Algorithm algorithm) noexcept;   // "auto", "naive", ...
std::string_view to_string(PassOrder order) noexcept;       // "reverse", "forward"
std::string_view to_string(AllMasked policy) noexcept;      // "nan", "zero"
std::string_view to_string(Stores stores) noexcept;         // "auto", "cached", "streaming"
std::optional<Algorithm> parse_algorithm(std::string_view name) noexcept;
std::optional<PassOrder> parse_pass_order(std::string_view name) noexcept;
std::optional<AllMasked> parse_all_masked(std::string_view name) noexcept;
std::optional<Stores> parse_stores(std::string_view name) noexcept;

}  // namespace smax
