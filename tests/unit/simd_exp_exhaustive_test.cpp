// Every float in [-87.3, -0] (about 1.1e9 values) through the kernels' exp, on every
// Highway target this machine supports: at most 2 ulp from double std::exp.
#include "simd_exp_check.hpp"

namespace smax::test {
namespace {

TEST(SimdExpExhaustive, EveryFloatInTheSoftmaxDomainWithin2Ulp) { expect_exp_within_2_ulp(1); }

}  // namespace
}  // namespace smax::test
