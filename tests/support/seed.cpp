#include "seed.hpp"

#include <cstdlib>
#include <string_view>

namespace smax::test {
namespace {

constexpr std::uint64_t kDefaultSeed = 0x5eed'50f7'3a40'0001ULL;

// FNV-1a: a stable hash of the test name (std::hash may differ between builds).
std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* text = std::getenv("SMAX_TEST_SEED");
    if (text == nullptr || *text == '\0') return kDefaultSeed;
    return static_cast<std::uint64_t>(std::strtoull(text, nullptr, 0));
  }();
  return seed;
}

std::string seed_description() { return "SMAX_TEST_SEED=" + std::to_string(test_seed()); }

Rng rng_for_current_test() {
  std::string name = "(no test)";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name = std::string(info->test_suite_name()) + "." + info->name();
  }
  const std::uint64_t seed = test_seed();
  const std::uint64_t salt = stable_hash(name);
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                         static_cast<std::uint32_t>(salt), static_cast<std::uint32_t>(salt >> 32)};
  return Rng(sequence);
}

}  // namespace smax::test
