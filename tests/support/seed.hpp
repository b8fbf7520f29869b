// Reproducible randomness for the tests: one fixed default seed, overridable with
// the environment variable SMAX_TEST_SEED, and printed with every failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace smax::test {

// SMAX_TEST_SEED if set (decimal or 0x-prefixed hex), otherwise a fixed default.
std::uint64_t test_seed();

// "SMAX_TEST_SEED=<seed>": what to set to reproduce a failure.
std::string seed_description();

using Rng = std::mt19937_64;

// A generator for one test: the global seed mixed with the test's full name, so that
// tests do not share a stream and adding a test does not change the others.
Rng rng_for_current_test();

// Base fixture: every failure inside the test prints the seed, and rng() is ready.
class SeededTest : public ::testing::Test {
 protected:
  Rng& rng() { return rng_; }

 private:
  ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, seed_description()};
  Rng rng_ = rng_for_current_test();
};

}  // namespace smax::test
