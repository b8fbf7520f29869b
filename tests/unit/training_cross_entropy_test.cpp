// cross_entropy: random configurations (dtype, class axis, layouts, index or
// probability targets, weights, ignore_index, label smoothing, reduction) against a
// long double reference written from PyTorch's formulas; the gradient against long
// double finite differences; edge values and shapes; 256K classes; threads; errors.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "accuracy.hpp"
#include "plan/planner.hpp"
#include "random_data.hpp"
#include "seed.hpp"
#include "simd_exp_check.hpp"
#include "smax/error.hpp"
#include "smax/training.hpp"
#include "training_reference.hpp"

namespace smax::test {
namespace {

constexpr long double kInf = std::numeric_limits<long double>::infinity();
constexpr long double kNaN = std::numeric_limits<long double>::quiet_NaN();
constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

enum class Targets { i64, i32, probabilities };

std::string to_string(Targets t) {
  return t == Targets::i64 ? "i64" : t == Targets::i32 ? "i32" : "probabilities";
}

// Integer targets in a buffer of their own, contiguous or every other element.
struct IndexTensor {
  IndexType type = IndexType::i64;
  std::vector<std::int64_t> shape;
  std::int64_t step = 1;
  std::vector<std::int64_t> i64;
  std::vector<std::int32_t> i32;

  IndexTensor(IndexType t, std::vector<std::int64_t> s, std::int64_t element_step, const std::vector<std::int64_t>& values)
      : type(t), shape(std::move(s)), step(element_step) {
    const std::size_t n = values.size() * static_cast<std::size_t>(step) + 1;
    if (type == IndexType::i64) i64.assign(n, 0x7777);
    else i32.assign(n, 0x7777);
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (type == IndexType::i64) i64[k * static_cast<std::size_t>(step)] = values[k];
      else i32[k * static_cast<std::size_t>(step)] = static_cast<std::int32_t>(values[k]);
    }
  }
  IndexView view() const {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t s = step;
    for (std::size_t i = shape.size(); i-- > 0;) {
      strides[i] = s;
      s *= std::max<std::int64_t>(shape[i], 1);
    }
    const void* data = type == IndexType::i64 ? static_cast<const void*>(i64.data()) : static_cast<const void*>(i32.data());
    return IndexView(data, type, shape, strides);
  }
};

std::vector<std::int64_t> without(const std::vector<std::int64_t>& shape, int axis) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (static_cast<int>(i) != axis) out.push_back(shape[i]);
  }
  return out;
}

std::int64_t product(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{1}, std::multiplies<>());
}

std::vector<long double> values_of(const TestTensor& t) {
  std::vector<long double> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = t.at(i);
  return v;
}

// The gradient's cancellation allowance: contiguous f32 rows sum their exps with the
// vectorised float exp (1.01 ulp), so where S * p and a cancel, p carries float
// precision; every other path computes in double.
long double grad_eps(DType dtype) { return dtype == DType::f32 ? 0x1p-22L : 0x1p-50L; }

// One configured call: its tensors, the reference case and the checks.
struct Call {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  int axis = 1;  // as passed
  Layout layout = Layout::contiguous;
  Targets targets = Targets::i64;
  bool weighted = false;
  std::optional<std::int64_t> ignore_index;
  double smoothing = 0;
  Reduction reduction = Reduction::mean;
  bool want_grad = true;
  bool want_log_prob = true;
  int threads = 0;
  Stores stores = Stores::automatic;

  int class_axis() const { return axis < 0 ? axis + static_cast<int>(shape.size()) : axis; }
  std::string describe() const {
    std::string s = to_string(dtype).data();
    s += " shape " + ::testing::PrintToString(shape) + " axis " + std::to_string(axis) + " " +
         test::to_string(layout) + " targets " + to_string(targets) + (weighted ? " weighted" : "") +
         (ignore_index ? " ignore " + std::to_string(*ignore_index) : "") + " smoothing " +
         std::to_string(smoothing) + " reduction " + std::string(smax::to_string(reduction));
    return s;
  }
};

struct Prepared {
  TestTensor logits;
  std::optional<IndexTensor> indices;
  std::optional<TestTensor> probabilities;
  std::optional<TestTensor> weight;
  CrossEntropyCase reference_case;
};

Prepared prepare(const Call& c, Rng& rng, long double spread = 3) {
  Prepared p{TestTensor(c.dtype, c.shape, c.layout), {}, {}, {}, {}};
  fill_normal(p.logits, rng, Distribution{0, static_cast<double>(spread)});
  CrossEntropyCase& r = p.reference_case;
  r.shape = c.shape;
  r.axis = c.class_axis();
  r.logits = values_of(p.logits);
  r.ignore_index = c.ignore_index;
  r.label_smoothing = round_to(DType::f64, c.smoothing);
  r.reduction = c.reduction;
  const std::int64_t classes = c.shape[static_cast<std::size_t>(r.axis)];
  const std::vector<std::int64_t> batch = without(c.shape, r.axis);
  if (c.targets == Targets::probabilities) {
    r.index_targets = false;
    p.probabilities.emplace(c.dtype, c.shape, c.layout == Layout::broadcast ? Layout::contiguous : c.layout);
    std::uniform_real_distribution<double> u(0, 1);
    for (std::int64_t i = 0; i < p.probabilities->numel(); ++i) p.probabilities->set_at(i, u(rng) < 0.3 ? 0 : u(rng));
    r.probabilities = values_of(*p.probabilities);
  } else {
    std::vector<std::int64_t> values(static_cast<std::size_t>(product(batch)));
    for (auto& v : values) {
      v = classes > 0 ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(classes)) : 0;
      if (c.ignore_index && (rng() % 4 == 0 || classes == 0)) v = *c.ignore_index;
    }
    p.indices.emplace(c.targets == Targets::i64 ? IndexType::i64 : IndexType::i32, batch, 1 + static_cast<std::int64_t>(rng() % 2),
                      values);
    r.indices = values;
  }
  if (c.weighted) {
    p.weight.emplace(c.dtype, std::vector<std::int64_t>{classes}, rng() % 2 ? Layout::strided : Layout::contiguous);
    std::uniform_real_distribution<double> u(0.1, 2);
    for (std::int64_t i = 0; i < classes; ++i) p.weight->set_at(i, u(rng));
    r.weight = values_of(*p.weight);
  }
  return p;
}

struct Outputs {
  TestTensor loss;
  TestTensor grad;
  TestTensor log_prob;
};

Outputs make_outputs(const Call& c) {
  const Layout out_layout = c.layout == Layout::broadcast ? Layout::contiguous : c.layout;
  std::vector<std::int64_t> loss_shape;
  if (c.reduction == Reduction::none) loss_shape = without(c.shape, c.class_axis());
  return Outputs{TestTensor(c.dtype, loss_shape, out_layout), TestTensor(c.dtype, c.shape, out_layout),
                 TestTensor(c.dtype, c.shape, out_layout)};
}

// Every byte of both calls' outputs (guards included) equal: the same bits.
void expect_same_bytes(const Outputs& a, const Outputs& b) {
  EXPECT_EQ(a.loss.bytes(), b.loss.bytes());
  EXPECT_EQ(a.grad.bytes(), b.grad.bytes());
  EXPECT_EQ(a.log_prob.bytes(), b.log_prob.bytes());
}

CrossEntropyOptions options_of(const Call& c, const Prepared& p) {
  CrossEntropyOptions o;
  o.axis = c.axis;
  o.reduction = c.reduction;
  o.ignore_index = c.ignore_index;
  o.label_smoothing = c.smoothing;
  o.threads = c.threads;
  o.stores = c.stores;
  if (p.weight) o.weight = p.weight->view();
  return o;
}

void run(const Call& c, const Prepared& p, Outputs& out) {
  CrossEntropyOutputs extra;
  if (c.want_grad) extra.grad = out.grad.mutable_view();
  if (c.want_log_prob) extra.log_prob = out.log_prob.mutable_view();
  if (p.indices) cross_entropy(p.logits.view(), p.indices->view(), out.loss.mutable_view(), options_of(c, p), extra);
  else cross_entropy(p.logits.view(), p.probabilities->view(), out.loss.mutable_view(), options_of(c, p), extra);
}

void check(const Call& c, const Prepared& p, const Outputs& out) {
  const CrossEntropyReference ref = cross_entropy_reference(p.reference_case);
  EXPECT_TRUE(meets_training_bar("loss", out.loss, ref.loss, {}, 0));
  if (c.want_grad) {
    EXPECT_TRUE(meets_training_bar("grad", out.grad, ref.grad.values, ref.grad.cancelled, grad_eps(c.dtype)));
  }
  if (c.want_log_prob) {
    EXPECT_TRUE(matches_reference(Op::log_softmax, out.log_prob, Expected{c.shape, ref.log_prob}));
  }
  EXPECT_TRUE(out.loss.untouched_outside_view());
  EXPECT_TRUE(out.grad.untouched_outside_view());
  EXPECT_TRUE(out.log_prob.untouched_outside_view());
}

class CrossEntropy : public SeededTest {};

TEST_F(CrossEntropy, RandomConfigurationsMeetTheBar) {
  constexpr Reduction kReductions[] = {Reduction::none, Reduction::sum, Reduction::mean};
  constexpr Targets kTargets[] = {Targets::i64, Targets::i32, Targets::probabilities};
  for (int trial = 0; trial < 240; ++trial) {
    Call c;
    c.dtype = kDTypes[trial % 4];
    const int rank = 1 + static_cast<int>(rng()() % 4);
    constexpr std::int64_t kMaxExtent[] = {0, 60, 20, 8, 5};
    c.shape = random_shape(rng(), rank, kMaxExtent[rank]);
    const int pick = static_cast<int>(rng()() % 3);
    c.axis = rank == 1 ? 0 : pick == 0 ? 1 : pick == 1 ? -1 : static_cast<int>(rng()() % static_cast<unsigned>(rank));
    c.layout = kAllLayouts[rng()() % std::size(kAllLayouts)];
    c.targets = kTargets[(trial / 4) % 3];
    c.weighted = rng()() % 2;
    c.reduction = kReductions[(trial / 12) % 3];
    if (c.targets != Targets::probabilities && rng()() % 3 != 0) {
      const std::int64_t choices[] = {-100, 0, 1, -1, 1000};
      c.ignore_index = choices[rng()() % 5];
    }
    c.smoothing = rng()() % 3 == 0 ? 0.0 : (rng()() % 2 ? 0.1 : 1.0);
    SCOPED_TRACE(c.describe());
    Prepared p = prepare(c, rng());
    Outputs out = make_outputs(c);
    run(c, p, out);
    check(c, p, out);
  }
}

// The reference's gradient formula against the derivative of its own loss: central
// differences in long double, on every kind of call.
TEST_F(CrossEntropy, GradientMatchesLongDoubleFiniteDifferences) {
  for (Targets targets : {Targets::i64, Targets::probabilities}) {
    for (Reduction reduction : {Reduction::none, Reduction::sum, Reduction::mean}) {
      for (double smoothing : {0.0, 0.2}) {
        for (bool weighted : {false, true}) {
          Call c;
          c.dtype = DType::f64;
          c.shape = {3, 5, 2};
          c.targets = targets;
          c.weighted = weighted;
          c.reduction = reduction;
          c.smoothing = smoothing;
          if (targets != Targets::probabilities) c.ignore_index = 1;
          SCOPED_TRACE(c.describe());
          Prepared p = prepare(c, rng());
          Outputs out = make_outputs(c);
          run(c, p, out);
          check(c, p, out);
          if (std::isnan(cross_entropy_objective(p.reference_case))) {
            // Every target ignored under mean: the loss is 0 / 0, so there is no
            // derivative to compare; ignored samples get a gradient of 0 (SEMANTICS.md).
            for (std::size_t i = 0; i < p.reference_case.logits.size(); ++i) {
              EXPECT_EQ(out.grad.at(static_cast<std::int64_t>(i)), 0.0L) << "element " << i;
            }
            continue;
          }
          const long double h = 1e-6L;
          for (std::size_t i = 0; i < p.reference_case.logits.size(); ++i) {
            CrossEntropyCase plus = p.reference_case, minus = p.reference_case;
            plus.logits[i] += h;
            minus.logits[i] -= h;
            const long double numeric = (cross_entropy_objective(plus) - cross_entropy_objective(minus)) / (2 * h);
            EXPECT_NEAR(static_cast<double>(out.grad.at(static_cast<std::int64_t>(i))), static_cast<double>(numeric), 1e-9)
                << "element " << i;
          }
        }
      }
    }
  }
}

// Known values: ONNX's and PyTorch's definitions on a hand-checkable case.
TEST_F(CrossEntropy, HandCheckedValues) {
  // logits [[0, ln 3]] with target 1: p = [1/4, 3/4], loss = -ln(3/4); grad = p - onehot.
  const double ln3 = std::log(3.0);
  const double logits[] = {0, ln3};
  const std::int64_t target[] = {1};
  double loss = 0, grad[2] = {}, log_prob[2] = {};
  cross_entropy(view(logits, {1, 2}), IndexView(target, {1}), MutableTensorView(&loss, DType::f64, {}), {},
                {.log_prob = view(log_prob, {1, 2}), .grad = view(grad, {1, 2})});
  EXPECT_NEAR(loss, -std::log(0.75), 1e-15);
  EXPECT_NEAR(grad[0], 0.25, 1e-15);
  EXPECT_NEAR(grad[1], -0.25, 1e-15);
  EXPECT_NEAR(log_prob[0], std::log(0.25), 1e-15);
  EXPECT_NEAR(log_prob[1], std::log(0.75), 1e-15);
}

TEST_F(CrossEntropy, IgnoredTargetsEverywhere) {
  for (DType dtype : kDTypes) {
    for (Reduction reduction : {Reduction::none, Reduction::sum, Reduction::mean}) {
      for (std::int64_t ignore : {-100, 0, 7, 1000}) {
        Call c;
        c.dtype = dtype;
        c.shape = {4, 7, 3};
        c.reduction = reduction;
        c.ignore_index = ignore;
        c.smoothing = 0.1;
        c.weighted = true;
        Prepared p = prepare(c, rng());
        for (auto& v : p.indices->i64) v = ignore;
        std::fill(p.reference_case.indices.begin(), p.reference_case.indices.end(), ignore);
        Outputs out = make_outputs(c);
        run(c, p, out);
        SCOPED_TRACE(c.describe());
        check(c, p, out);
        // PyTorch: the mean of nothing is NaN, the sum 0; the gradient is all 0.
        if (reduction == Reduction::mean) {
          EXPECT_TRUE(std::isnan(out.loss.at(0)));
        } else {
          for (std::int64_t i = 0; i < out.loss.numel(); ++i) EXPECT_EQ(static_cast<double>(out.loss.at(i)), 0.0);
        }
        for (std::int64_t i = 0; i < out.grad.numel(); ++i) ASSERT_EQ(static_cast<double>(out.grad.at(i)), 0.0);
      }
    }
  }
}

// Rows with NaN, +inf, all -inf, a -inf target, -inf elsewhere; an ignored row with
// NaN logits contributes nothing (its gradient is exactly 0).
TEST_F(CrossEntropy, NonFiniteLogits) {
  for (DType dtype : kDTypes) {
    for (double smoothing : {0.0, 0.1, 1.0}) {
      for (Reduction reduction : {Reduction::none, Reduction::sum}) {
        Call c;
        c.dtype = dtype;
        c.shape = {6, 4};
        c.reduction = reduction;
        c.ignore_index = -100;
        c.smoothing = smoothing;
        Prepared p = prepare(c, rng());
        const std::vector<std::vector<long double>> rows = {
            {1, kNaN, 0, 2}, {1, kInf, 0, 2}, {-kInf, -kInf, -kInf, -kInf}, {-kInf, 1, 2, 3}, {0, -kInf, 1, 2}, {kNaN, 1, 2, 3}};
        const std::vector<std::int64_t> targets = {0, 0, 1, 0, 2, -100};
        for (std::int64_t r = 0; r < 6; ++r) {
          for (std::int64_t k = 0; k < 4; ++k) {
            p.logits.set_at(r * 4 + k, rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(k)]);
          }
          p.indices->i64[static_cast<std::size_t>(r * p.indices->step)] = targets[static_cast<std::size_t>(r)];
        }
        p.reference_case.logits = values_of(p.logits);
        p.reference_case.indices = targets;
        Outputs out = make_outputs(c);
        run(c, p, out);
        SCOPED_TRACE(c.describe());
        check(c, p, out);
        if (reduction == Reduction::none) {
          EXPECT_TRUE(std::isnan(out.loss.at(0)));
          EXPECT_TRUE(std::isnan(out.loss.at(1)));
          EXPECT_TRUE(std::isnan(out.loss.at(2)));
          // The target's logit is -inf: (1 - s) nll is 0 * inf at s = 1, as in PyTorch.
          if (smoothing == 1) EXPECT_TRUE(std::isnan(out.loss.at(3)));
          else EXPECT_EQ(out.loss.at(3), kInf);
          EXPECT_EQ(out.loss.at(5), 0);
        }
        if (smoothing == 0) {
          EXPECT_EQ(static_cast<double>(out.grad.at(12)), -1.0);  // p_t - 1 with p_t = 0
        }
        for (std::int64_t k = 0; k < 4; ++k) EXPECT_EQ(static_cast<double>(out.grad.at(20 + k)), 0.0);
      }
    }
  }
}

// Rows of several blocks of the gradient pass's stored exps (4096 classes a block;
// 16-bit blocks find their max beside the exps of the block before): a NaN or +inf
// only in a later block, a block of -inf between finite ones, a max in the last
// (short) block.
TEST_F(CrossEntropy, NonFiniteLogitsInLaterBlocks) {
  constexpr std::int64_t kClasses = 3 * 4096 + 5;
  for (DType dtype : kDTypes) {
    for (std::int64_t target_cpu : simd_targets()) {
      SCOPED_TRACE(hwy::TargetName(target_cpu));
      with_target(target_cpu, [&] {
        Call c;
        c.dtype = dtype;
        c.shape = {4, kClasses};
        c.axis = -1;
        c.reduction = Reduction::none;
        SCOPED_TRACE(c.describe());
        Prepared p = prepare(c, rng());
        p.logits.set_at(0 * kClasses + 2 * 4096 + 3, kNaN);
        p.logits.set_at(1 * kClasses + 4096 + 7, kInf);
        for (std::int64_t k = 4096; k < 2 * 4096; ++k) p.logits.set_at(2 * kClasses + k, -kInf);
        p.logits.set_at(3 * kClasses + kClasses - 2, 30);
        std::vector<std::int64_t>& t = p.reference_case.indices;
        t[2] = t[2] % 4096;  // row 2's target keeps a finite logit
        p.indices->i64[static_cast<std::size_t>(2 * p.indices->step)] = t[2];
        p.reference_case.logits = values_of(p.logits);
        Outputs out = make_outputs(c);
        run(c, p, out);
        check(c, p, out);
        EXPECT_TRUE(std::isnan(out.loss.at(0)));
        EXPECT_TRUE(std::isnan(out.loss.at(1)));
        EXPECT_TRUE(std::isfinite(out.loss.at(2)));
        EXPECT_TRUE(std::isfinite(out.loss.at(3)));
        // In place over the logits (f32 then keeps its exps apart, as 16-bit logits
        // do): the same bits.
        TestTensor in_place = p.logits;
        TestTensor loss = out.loss;
        CrossEntropyOutputs extra;
        extra.grad = in_place.mutable_view();
        cross_entropy(in_place.view(), p.indices->view(), loss.mutable_view(), options_of(c, p), extra);
        EXPECT_EQ(in_place.bytes(), out.grad.bytes());
        EXPECT_EQ(loss.bytes(), out.loss.bytes());
      });
    }
  }
}

// The same rows at another address give the same bits, NaNs included (the kernels
// align their loops to the addresses, so an element meets a different lane and loop
// copy at each offset): the loss, the gradient and the log-probabilities of rows
// with a NaN, +inf, both infinities, a -inf target and none of these.
TEST_F(CrossEntropy, RowsGiveTheSameBitsWhereverTheyLie) {
  constexpr std::int64_t kRows = 5;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const std::size_t element = size_of(dtype);
    const std::int64_t offsets = static_cast<std::int64_t>(64 / element);
    for (std::int64_t classes : {13, 1000, 4097, 2 * 4096 + 5}) {
      Call c;
      c.dtype = dtype;
      c.shape = {kRows, classes};
      c.axis = -1;
      c.reduction = Reduction::none;
      c.smoothing = 0.1;
      SCOPED_TRACE(c.describe());
      Prepared p = prepare(c, rng());
      p.logits.set_at(0 * classes + classes / 3, kNaN);
      p.logits.set_at(1 * classes + classes - 1, kInf);
      p.logits.set_at(2 * classes + classes / 2, kInf);
      p.logits.set_at(2 * classes + classes / 5, -kInf);
      p.indices->i64[static_cast<std::size_t>(3 * p.indices->step)] = classes / 4;
      p.logits.set_at(3 * classes + classes / 4, -kInf);
      const std::size_t bytes = static_cast<std::size_t>(kRows * classes) * element;
      const std::vector<std::int64_t> padded = {kRows * classes + offsets};
      for (std::int64_t target_cpu : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target_cpu));
        with_target(target_cpu, [&] {
          std::vector<unsigned char> first_loss, first_grad, first_log_prob;
          for (std::int64_t offset = 0; offset < offsets; ++offset) {
            const std::size_t skip = static_cast<std::size_t>(offset) * element;
            TestTensor logits(dtype, padded), grad(dtype, padded), log_prob(dtype, padded), loss(dtype, {kRows});
            std::memcpy(static_cast<unsigned char*>(logits.data()) + skip, p.logits.data(), bytes);
            auto* grad_bytes = static_cast<unsigned char*>(grad.data()) + skip;
            auto* log_prob_bytes = static_cast<unsigned char*>(log_prob.data()) + skip;
            CrossEntropyOutputs extra;
            extra.grad = MutableTensorView(grad_bytes, dtype, c.shape);
            extra.log_prob = MutableTensorView(log_prob_bytes, dtype, c.shape);
            cross_entropy(TensorView(static_cast<const unsigned char*>(logits.data()) + skip, dtype, c.shape),
                          p.indices->view(), loss.mutable_view(), options_of(c, p), extra);
            const std::vector<unsigned char> got_grad(grad_bytes, grad_bytes + bytes);
            const std::vector<unsigned char> got_log_prob(log_prob_bytes, log_prob_bytes + bytes);
            if (offset == 0) {
              first_loss = loss.bytes();
              first_grad = got_grad;
              first_log_prob = got_log_prob;
            } else {
              ASSERT_EQ(loss.bytes(), first_loss) << "offset " << offset << " elements";
              ASSERT_EQ(got_grad, first_grad) << "offset " << offset << " elements";
              ASSERT_EQ(got_log_prob, first_log_prob) << "offset " << offset << " elements";
            }
          }
        });
      }
    }
  }
}

TEST_F(CrossEntropy, EdgeShapes) {
  for (DType dtype : kDTypes) {
    for (Reduction reduction : {Reduction::none, Reduction::sum, Reduction::mean}) {
      for (Targets targets : {Targets::i64, Targets::probabilities}) {
        for (const std::vector<std::int64_t>& shape :
             {std::vector<std::int64_t>{5, 1}, {1, 7}, {0, 4}, {3, 0, 2}, {7}, {2, 13, 1}, {3, 257}}) {
          Call c;
          c.dtype = dtype;
          c.shape = shape;
          c.axis = shape.size() == 1 ? 0 : 1;
          c.reduction = reduction;
          c.targets = targets;
          if (targets != Targets::probabilities) c.ignore_index = -1;  // C = 0 needs every target ignored
          SCOPED_TRACE(c.describe());
          Prepared p = prepare(c, rng());
          Outputs out = make_outputs(c);
          run(c, p, out);
          check(c, p, out);
        }
      }
    }
  }
}

// Contiguous rows of f32, f16 and bf16 with class-index targets take the vectorised
// gradient pass (training/simd/gradient_rows.hpp): every Highway target this machine
// supports, lengths around every vector width, smoothing (f32) and weights, logits
// spread so wide that some exps leave float's normal range (done in double), -inf
// logits, the gradient in place over the logits, and the gradient streamed
// (CrossEntropyOptions::stores): the same bits.
TEST_F(CrossEntropy, VectorisedRowsOnEveryTargetMeetTheBar) {
  constexpr std::int64_t kLengths[] = {1, 2, 3, 7, 15, 16, 17, 33, 65, 129, 1000, 4097};
  constexpr Reduction kReductions[] = {Reduction::none, Reduction::sum, Reduction::mean};
  int trial = 0;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (std::int64_t n : kLengths) {
          for (double smoothing : {0.0, 0.1}) {
            ++trial;
            Call c;
            c.dtype = dtype;
            c.shape = {3, n};
            c.axis = -1;
            c.layout = trial % 3 == 0 ? Layout::misaligned : Layout::contiguous;
            c.weighted = trial % 2 == 0;
            c.smoothing = smoothing;
            c.reduction = kReductions[trial % 3];
            c.want_log_prob = trial % 4 == 0;
            SCOPED_TRACE(c.describe() + " trial " + std::to_string(trial));
            Prepared p = prepare(c, rng(), trial % 5 == 0 ? 40 : 3);
            if (n > 4) {
              // A masked class that is nobody's target.
              const std::vector<std::int64_t>& t = p.reference_case.indices;
              const std::int64_t masked = (t[0] + 1) % n;
              if (masked != t[1] && masked != t[2]) {
                for (std::int64_t r = 0; r < 3; ++r) p.logits.set_at(r * n + masked, -kInf);
                p.reference_case.logits = values_of(p.logits);
              }
            }
            Outputs out = make_outputs(c);
            run(c, p, out);
            check(c, p, out);
            TestTensor in_place = p.logits;
            TestTensor loss = out.loss;
            CrossEntropyOutputs extra;
            extra.grad = in_place.mutable_view();
            cross_entropy(in_place.view(), p.indices->view(), loss.mutable_view(), options_of(c, p), extra);
            for (std::int64_t i = 0; i < in_place.numel(); ++i) {
              ASSERT_EQ(static_cast<double>(in_place.at(i)), static_cast<double>(out.grad.at(i))) << i;
            }
            EXPECT_EQ(loss.bytes(), out.loss.bytes());
            Outputs streamed = make_outputs(c);
            CrossEntropyOptions streaming = options_of(c, p);
            streaming.stores = Stores::streaming;
            CrossEntropyOutputs streamed_grad;
            streamed_grad.grad = streamed.grad.mutable_view();
            cross_entropy(p.logits.view(), p.indices->view(), streamed.loss.mutable_view(), streaming, streamed_grad);
            ASSERT_EQ(streamed.grad.bytes(), out.grad.bytes());
            EXPECT_TRUE(streamed.grad.untouched_outside_view());
            EXPECT_EQ(streamed.loss.bytes(), out.loss.bytes());
          }
        }
      }
    });
  }
}

// Short contiguous rows (up to 1024 classes) with a gradient go a batch of rows at a
// time (RowKernel::run_row_batch: the rows' passes as kernels over the batch, the
// per-row terms in double lanes across it): every Highway target,
// batches full and partial, every option drawn, logits around 30000, confident rows
// (every other logit 25 to 40 or 95 to 96 below the target's), a row with a NaN logit,
// one with +inf, one all -inf, one whose target's logit is -inf, a masked class; in
// place, streamed and on three threads the same bits.
TEST_F(CrossEntropy, RowBatchesOnEveryTargetMeetTheBar) {
  constexpr std::int64_t kClasses[] = {1, 2, 5, 17, 100, 1000, 1024};
  constexpr std::int64_t kRows[] = {3, 300};
  constexpr Reduction kReductions[] = {Reduction::none, Reduction::sum, Reduction::mean};
  int trial = 0;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (std::int64_t classes : kClasses) {
          for (std::int64_t rows : kRows) {
            ++trial;
            Call c;
            c.dtype = dtype;
            c.shape = {rows, classes};
            c.axis = trial % 2 ? -1 : 1;
            c.layout = trial % 3 == 0 ? Layout::misaligned : Layout::contiguous;
            c.targets = trial % 2 ? Targets::i64 : Targets::i32;
            c.weighted = trial % 4 < 2;
            c.smoothing = dtype == DType::f32 && trial % 5 >= 2 ? 0.1 : 0.0;
            c.reduction = kReductions[trial % 3];
            if (trial % 7 < 3) c.ignore_index = trial % 2 ? -100 : 0;
            c.want_log_prob = trial % 4 < 2;
            c.threads = 1;
            SCOPED_TRACE(c.describe() + " trial " + std::to_string(trial));
            Prepared p = prepare(c, rng(), trial % 5 == 0 ? 40 : 3);
            const std::vector<std::int64_t>& t = p.reference_case.indices;
            const auto ignored = [&](std::int64_t r) {
              return c.ignore_index && t[static_cast<std::size_t>(r)] == *c.ignore_index;
            };
            if (trial % 7 == 6) {
              for (std::int64_t i = 0; i < p.logits.numel(); ++i) p.logits.set_at(i, p.logits.at(i) + 30000);
            }
            if (classes >= 5 && rows >= 300) {
              p.logits.set_at(0 * classes + 2, kNaN);
              p.logits.set_at(1 * classes + classes - 1, kInf);
              for (std::int64_t k = 0; k < classes; ++k) p.logits.set_at(2 * classes + k, -kInf);
              if (!ignored(3)) p.logits.set_at(3 * classes + t[3], -kInf);
              const std::int64_t masked = classes / 2;
              for (std::int64_t r = 4; r < rows; ++r) {
                if (t[static_cast<std::size_t>(r)] != masked) p.logits.set_at(r * classes + masked, -kInf);
              }
              std::uniform_real_distribution<double> near(-40, -25), far(-96, -95);
              for (std::int64_t r = 10; r < 20; ++r) {
                if (ignored(r)) continue;
                const std::int64_t tr = t[static_cast<std::size_t>(r)];
                for (std::int64_t k = 0; k < classes; ++k) {
                  if (k != tr && k != masked) p.logits.set_at(r * classes + k, 2 + (r < 15 ? near(rng()) : far(rng())));
                }
                p.logits.set_at(r * classes + tr, 2);
              }
            }
            p.reference_case.logits = values_of(p.logits);
            Outputs out = make_outputs(c);
            run(c, p, out);
            check(c, p, out);
            TestTensor in_place = p.logits;
            TestTensor loss = out.loss;
            CrossEntropyOutputs extra;
            extra.grad = in_place.mutable_view();
            cross_entropy(in_place.view(), p.indices->view(), loss.mutable_view(), options_of(c, p), extra);
            for (std::int64_t i = 0; i < in_place.numel(); ++i) {
              const double a = static_cast<double>(in_place.at(i));
              const double b = static_cast<double>(out.grad.at(i));
              ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << i;
            }
            EXPECT_EQ(loss.bytes(), out.loss.bytes());
            c.threads = 3;
            c.stores = trial % 2 ? Stores::streaming : Stores::automatic;
            Outputs threaded = make_outputs(c);
            run(c, p, threaded);
            expect_same_bytes(out, threaded);
          }
        }
      }
    });
  }
}

// Samples of (N, C, d1, ...) along the class axis 1 lie across the vector lanes
// (training/simd/gradient_columns.hpp) for f32, f16 and bf16 with class-index targets:
// every Highway target, class counts from 1 to 300, widths around every vector width
// and above a thread's piece, every option drawn, logits around 30000, a column with a NaN logit,
// one with +inf, one all -inf, one whose target's logit is -inf, and a masked class;
// the gradient in place over the logits and on three threads gives the same bits.
TEST_F(CrossEntropy, ColumnsOnEveryTargetMeetTheBar) {
  constexpr std::int64_t kClasses[] = {1, 2, 5, 21, 300};
  constexpr std::int64_t kWidths[] = {2, 3, 17, 33, 600};
  constexpr Reduction kReductions[] = {Reduction::none, Reduction::sum, Reduction::mean};
  int trial = 0;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        for (std::int64_t classes : kClasses) {
          for (std::int64_t w : kWidths) {
            ++trial;
            Call c;
            c.dtype = dtype;
            c.shape = {2, classes, w};
            c.axis = 1;
            c.layout = trial % 3 == 0 ? Layout::misaligned : Layout::contiguous;
            c.targets = trial % 2 ? Targets::i64 : Targets::i32;
            c.weighted = trial % 4 < 2;
            c.smoothing = trial % 5 < 2 ? 0.0 : 0.1;
            c.reduction = kReductions[trial % 3];
            if (trial % 7 < 3) c.ignore_index = trial % 2 ? -100 : 0;
            c.want_grad = trial % 6 != 5;
            c.want_log_prob = trial % 4 != 1;
            c.threads = 1;
            SCOPED_TRACE(c.describe() + " trial " + std::to_string(trial));
            Prepared p = prepare(c, rng(), trial % 5 == 0 ? 40 : 3);
            if (trial % 7 == 6) {  // a max beyond the float exps' split (|m| <= 16384): double exps
              for (std::int64_t i = 0; i < p.logits.numel(); ++i) p.logits.set_at(i, p.logits.at(i) + 30000);
              p.reference_case.logits = values_of(p.logits);
            }
            std::vector<std::int64_t>& t = p.reference_case.indices;
            const std::int64_t plane = classes * w;
            const auto logit = [&](std::int64_t n, std::int64_t k, std::int64_t j) { return n * plane + k * w + j; };
            if (classes >= 5 && w >= 3) {
              p.logits.set_at(logit(0, 2, 0), kNaN);
              p.logits.set_at(logit(1, 1, w - 1), kInf);
              for (std::int64_t k = 0; k < classes; ++k) p.logits.set_at(logit(1, k, 1), -kInf);
              const std::int64_t tj = t[static_cast<std::size_t>(w + 2)];
              if (!(c.ignore_index && tj == *c.ignore_index)) p.logits.set_at(logit(1, tj, 2), -kInf);
              const std::int64_t masked = classes / 2;  // in columns 3 on, where not the target
              for (std::int64_t j = 3; j < w; ++j) {
                if (t[static_cast<std::size_t>(j)] != masked) p.logits.set_at(logit(0, masked, j), -kInf);
              }
              p.reference_case.logits = values_of(p.logits);
            }
            Outputs out = make_outputs(c);
            run(c, p, out);
            check(c, p, out);
            if (c.want_grad) {
              TestTensor in_place = p.logits;
              TestTensor loss = out.loss;
              CrossEntropyOutputs extra;
              extra.grad = in_place.mutable_view();
              cross_entropy(in_place.view(), p.indices->view(), loss.mutable_view(), options_of(c, p), extra);
              for (std::int64_t i = 0; i < in_place.numel(); ++i) {
                const double a = static_cast<double>(in_place.at(i));
                const double b = static_cast<double>(out.grad.at(i));
                ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << i;
              }
              EXPECT_EQ(loss.bytes(), out.loss.bytes());
            }
            c.threads = 3;
            Outputs threaded = make_outputs(c);
            run(c, p, threaded);
            expect_same_bytes(out, threaded);
          }
        }
      }
    });
  }
}

// A sample across the lanes gives the same loss and gradient in every column: each
// lane computes its own sample, in a block of vectors, a single vector or the tail,
// in whichever thread's piece. Every column of [1, C, 611] holds the same logits and
// target (reduction none, smoothing and weights on).
TEST_F(CrossEntropy, ColumnsGiveTheSameBitsInEveryLane) {
  constexpr std::int64_t kWidth = 611;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (std::int64_t classes : {3, 50}) {
      Call c;
      c.dtype = dtype;
      c.shape = {1, classes, kWidth};
      c.weighted = true;
      c.smoothing = 0.1;
      c.reduction = Reduction::none;
      c.threads = 2;
      Prepared p = prepare(c, rng());
      const std::int64_t target_class = p.reference_case.indices[0];
      for (std::int64_t k = 0; k < classes; ++k) {
        const long double v = p.logits.at(k * kWidth);
        for (std::int64_t j = 1; j < kWidth; ++j) p.logits.set_at(k * kWidth + j, v);
      }
      std::vector<std::int64_t> targets(kWidth, target_class);
      const IndexTensor same_targets(IndexType::i64, {1, kWidth}, 1, targets);
      SCOPED_TRACE(c.describe());
      for (std::int64_t target : simd_targets()) {
        SCOPED_TRACE(hwy::TargetName(target));
        with_target(target, [&] {
          Outputs out = make_outputs(c);
          CrossEntropyOutputs extra;
          extra.grad = out.grad.mutable_view();
          extra.log_prob = out.log_prob.mutable_view();
          cross_entropy(p.logits.view(), same_targets.view(), out.loss.mutable_view(), options_of(c, p), extra);
          for (std::int64_t j = 1; j < kWidth; ++j) {
            ASSERT_EQ(static_cast<double>(out.loss.at(j)), static_cast<double>(out.loss.at(0))) << "column " << j;
            for (std::int64_t k = 0; k < classes; ++k) {
              ASSERT_EQ(static_cast<double>(out.grad.at(k * kWidth + j)), static_cast<double>(out.grad.at(k * kWidth)))
                  << "class " << k << ", column " << j;
              ASSERT_EQ(static_cast<double>(out.log_prob.at(k * kWidth + j)),
                        static_cast<double>(out.log_prob.at(k * kWidth)))
                  << "class " << k << ", column " << j;
            }
          }
        });
      }
    }
  }
}

// Confident rows: the target at the max, every other logit 95 to 96 below it, so that
// each exp lies below float's normal range and the loss, log(1 + their sum), is their
// sum, itself near FLT_MIN: the pass with a gradient must sum those terms to the bar,
// not flush them or round each to a subnormal step, on every target.
TEST_F(CrossEntropy, ConfidentRowsKeepTheirTinyLoss) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::bf16}) {
        Call c;
        c.dtype = dtype;
        c.shape = {3, 4097};
        c.axis = -1;
        c.reduction = Reduction::none;
        SCOPED_TRACE(c.describe());
        Prepared p = prepare(c, rng(), 3);
        std::uniform_real_distribution<double> below(-96, -95);
        for (std::int64_t r = 0; r < 3; ++r) {
          for (std::int64_t k = 0; k < 4097; ++k) {
            const bool is_target = k == p.reference_case.indices[static_cast<std::size_t>(r)];
            p.logits.set_at(r * 4097 + k, is_target ? 2.0 : 2.0 + below(rng()));
          }
        }
        p.reference_case.logits = values_of(p.logits);
        Outputs out = make_outputs(c);
        run(c, p, out);
        check(c, p, out);
      }
    });
  }
}

// Confident samples across the lanes: the target at the max, every other logit 10 to
// 20 (or 95 to 96) below it: the loss, about d - 1, and the target's gradient, S * (p
// - 1), must keep their precision (d - 1 from the terms below the max, the gradient
// in its exact form).
TEST_F(CrossEntropy, ConfidentColumnsKeepTheirTinyLoss) {
  constexpr std::int64_t kWidth = 37;
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (DType dtype : {DType::f32, DType::bf16}) {
        for (std::int64_t classes : {5, 300}) {
          for (double gap : {10.0, 95.0}) {
            Call c;
            c.dtype = dtype;
            c.shape = {2, classes, kWidth};
            c.reduction = Reduction::none;
            SCOPED_TRACE(c.describe() + " gap " + std::to_string(gap));
            Prepared p = prepare(c, rng(), 3);
            std::uniform_real_distribution<double> below(-gap - (gap < 50 ? 10 : 1), -gap);
            for (std::int64_t n = 0; n < 2; ++n) {
              for (std::int64_t j = 0; j < kWidth; ++j) {
                const std::int64_t t = p.reference_case.indices[static_cast<std::size_t>(n * kWidth + j)];
                for (std::int64_t k = 0; k < classes; ++k) {
                  p.logits.set_at((n * classes + k) * kWidth + j, k == t ? 2.0 : 2.0 + below(rng()));
                }
              }
            }
            p.reference_case.logits = values_of(p.logits);
            Outputs out = make_outputs(c);
            run(c, p, out);
            check(c, p, out);
          }
        }
      }
    });
  }
}

// The same without a gradient, and short rows: the loss, about d - 1, is the sum of
// terms that the float exps flush (below FLT_MIN); the rows are summed in double exps.
TEST_F(CrossEntropy, ConfidentRowsKeepTheirTinyLossWithoutAGradient) {
  for (DType dtype : {DType::f32, DType::bf16}) {  // (f64's double exps flush below DBL_MIN: not yet)
    for (std::int64_t classes : {2, 5, 300}) {
      Call c;
      c.dtype = dtype;
      c.shape = {3, classes};
      c.axis = -1;
      c.reduction = Reduction::none;
      c.want_grad = false;
      c.want_log_prob = false;
      SCOPED_TRACE(c.describe());
      Prepared p = prepare(c, rng(), 3);
      std::uniform_real_distribution<double> below(-100, -88);
      for (std::int64_t r = 0; r < 3; ++r) {
        for (std::int64_t k = 0; k < classes; ++k) {
          const bool is_target = k == p.reference_case.indices[static_cast<std::size_t>(r)];
          p.logits.set_at(r * classes + k, is_target ? 0.5 : 0.5 + below(rng()));
        }
      }
      p.reference_case.logits = values_of(p.logits);
      Outputs out = make_outputs(c);
      run(c, p, out);
      check(c, p, out);
    }
  }
}

// Class weights so small that S / d falls below float's normal range (reduction sum):
// the vectorised passes, along rows and across the lanes (axis 1 of [2, 300, 37]), must
// not lose the gradient's relative precision there.
TEST_F(CrossEntropy, TinyWeightsKeepTheGradientsPrecision) {
  for (std::int64_t target : simd_targets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    with_target(target, [&] {
      for (const bool columns : {false, true}) {
        for (double smoothing : {0.0, 0.1}) {
          Call c;
          c.shape = columns ? std::vector<std::int64_t>{2, 300, 37} : std::vector<std::int64_t>{2, 300};
          c.axis = columns ? 1 : -1;
          c.weighted = true;
          c.smoothing = smoothing;
          c.reduction = Reduction::sum;
          c.want_log_prob = false;
          Prepared p = prepare(c, rng());
          for (std::int64_t i = 0; i < 300; ++i) p.weight->set_at(i, 1e-37 * (1 + static_cast<double>(i % 7)));
          p.reference_case.weight = values_of(*p.weight);
          Outputs out = make_outputs(c);
          run(c, p, out);
          SCOPED_TRACE(c.describe());
          check(c, p, out);
        }
      }
    });
  }
}

// f64 logits far below their row's max, with probability targets equal to the
// softmax itself, so that every gradient S * p - a cancels: p keeps double's
// precision although x - m rounds (by 2^-53 of |x - m|, up to 2^-47 of p here).
TEST_F(CrossEntropy, F64GradientsCancelWithinDoublesPrecision) {
  Call c;
  c.dtype = DType::f64;
  c.shape = {4, 257};
  c.axis = -1;
  c.targets = Targets::probabilities;
  c.reduction = Reduction::sum;
  c.want_log_prob = false;
  Prepared p = prepare(c, rng(), 20);
  const Expected softmax = reference_nd(Op::softmax, p.logits, Options{});
  for (std::int64_t i = 0; i < p.logits.numel(); ++i) p.probabilities->set_at(i, softmax.values[static_cast<std::size_t>(i)]);
  p.reference_case.probabilities = values_of(*p.probabilities);
  Outputs out = make_outputs(c);
  run(c, p, out);
  check(c, p, out);
}

// The gradient in place over the logits, and the log-probabilities in place (with a
// gradient beside them): the same loss, gradient and log-probabilities as separate
// outputs give. Strided rows, contiguous rows that fit in L2 with their exps (stored
// once), rows that do not in a call within the cache (stored too) and in one beyond
// it (each exp computed twice; f32 only, to keep the test short): different passes.
TEST_F(CrossEntropy, InPlaceOverTheLogits) {
  const std::int64_t long_row = machine().l2_bytes / 8 + 1;
  const std::int64_t rows_beyond_cache = machine().l3_bytes / detail::kFusedCallLlcDivisor / (8 * long_row) + 1;
  const std::vector<std::int64_t> shapes[] = {{4, 9, 3}, {3, 1000}, {2, long_row}, {rows_beyond_cache, long_row}};
  for (DType dtype : kDTypes) {
    for (Targets targets : {Targets::i32, Targets::probabilities}) {
     for (const std::vector<std::int64_t>& shape : shapes) {
      const bool long_rows = shape[1] > 1000;
      if (long_rows && dtype != DType::f32) continue;
      Call c;
      c.dtype = dtype;
      c.shape = shape;
      c.targets = targets;
      c.smoothing = 0.05;
      c.layout = shape.size() == 3 ? Layout::reversed : Layout::contiguous;
      c.want_log_prob = true;
      SCOPED_TRACE(c.describe());
      Prepared p = prepare(c, rng());
      Outputs out = make_outputs(c);
      run(c, p, out);
      TestTensor in_place = p.logits;
      TestTensor loss2 = out.loss;
      CrossEntropyOutputs extra;
      extra.grad = in_place.mutable_view();
      if (p.indices) cross_entropy(in_place.view(), p.indices->view(), loss2.mutable_view(), options_of(c, p), extra);
      else cross_entropy(in_place.view(), p.probabilities->view(), loss2.mutable_view(), options_of(c, p), extra);
      EXPECT_EQ(in_place.bytes().size(), out.grad.bytes().size());
      for (std::int64_t i = 0; i < in_place.numel(); ++i) {
        ASSERT_EQ(static_cast<double>(in_place.at(i)), static_cast<double>(out.grad.at(i))) << i;
      }
      EXPECT_EQ(static_cast<double>(loss2.at(0)), static_cast<double>(out.loss.at(0)));
      TestTensor lp_in_place = p.logits;
      TestTensor grad_beside = out.grad;
      TestTensor loss3 = out.loss;
      CrossEntropyOutputs lp;
      lp.log_prob = lp_in_place.mutable_view();
      lp.grad = grad_beside.mutable_view();
      if (p.indices) cross_entropy(lp_in_place.view(), p.indices->view(), loss3.mutable_view(), options_of(c, p), lp);
      else cross_entropy(lp_in_place.view(), p.probabilities->view(), loss3.mutable_view(), options_of(c, p), lp);
      for (std::int64_t i = 0; i < lp_in_place.numel(); ++i) {
        ASSERT_EQ(static_cast<double>(lp_in_place.at(i)), static_cast<double>(out.log_prob.at(i))) << i;
        ASSERT_EQ(static_cast<double>(grad_beside.at(i)), static_cast<double>(out.grad.at(i))) << i;
      }
      EXPECT_EQ(static_cast<double>(loss3.at(0)), static_cast<double>(out.loss.at(0)));
     }
    }
  }
}

TEST_F(CrossEntropy, ResultsDoNotDependOnTheThreadCount) {
  Call c;
  c.shape = {512, 300};
  c.axis = -1;
  c.smoothing = 0.1;
  c.ignore_index = 3;
  Prepared p = prepare(c, rng());
  c.threads = 1;
  Outputs one = make_outputs(c);
  run(c, p, one);
  c.threads = 3;
  Outputs many = make_outputs(c);
  run(c, p, many);
  expect_same_bytes(one, many);
}

// Random calls on larger logits than RandomConfigurationsMeetTheBar's, where the
// vectorised rows split into blocks, fetch the next row and stream the gradient:
// class counts at the kernels' boundaries or any up to 2^17, every option drawn,
// and the bits of one thread; logits of at most 2^19 elements (SMAX_RANDOM_ELEMENTS).
TEST_F(CrossEntropy, RandomLargeCallsMeetTheBar) {
  const std::int64_t kClassCounts[] = {1, 15, 16, 17, 255, 1000, 4095, 4096, 4097, 8193, 32000, 32769, 65537};
  const std::int64_t most = random_call_elements(std::int64_t{1} << 19);
  for (int trial = 0; trial < 24; ++trial) {
    Call c;
    c.dtype = kDTypes[rng()() % 4];
    const std::int64_t classes = std::min(most, rng()() % 2 ? kClassCounts[rng()() % std::size(kClassCounts)]
                                                            : 1 + static_cast<std::int64_t>(rng()() % 131072));
    const std::int64_t samples = 1 + static_cast<std::int64_t>(rng()() % static_cast<std::uint64_t>(
                                         std::max<std::int64_t>(1, most / classes)));
    const bool last_axis = rng()() % 3 != 0;
    if (last_axis || samples == 1) {
      c.shape = {samples, classes};
      c.axis = last_axis ? -1 : 1;
    } else {  // (N, C, d): the class axis strided
      const std::int64_t d = 1 + static_cast<std::int64_t>(rng()() % 16);
      c.shape = {std::max<std::int64_t>(1, samples / d), classes, d};
      c.axis = 1;
    }
    const Layout kLayouts[] = {Layout::contiguous, Layout::misaligned, Layout::strided};
    c.layout = kLayouts[rng()() % 3];
    c.targets = rng()() % 4 == 0 ? Targets::probabilities : rng()() % 2 ? Targets::i64 : Targets::i32;
    c.weighted = rng()() % 3 == 0;
    c.reduction = std::array{Reduction::none, Reduction::sum, Reduction::mean}[rng()() % 3];
    if (c.targets != Targets::probabilities && rng()() % 2) c.ignore_index = rng()() % 2 ? -100 : 0;
    c.smoothing = rng()() % 2 ? 0.0 : 0.1;
    c.want_log_prob = rng()() % 3 == 0;
    c.threads = static_cast<int>(rng()() % 4);
    c.stores = std::array{Stores::automatic, Stores::cached, Stores::streaming}[rng()() % 3];
    SCOPED_TRACE(c.describe() + " threads " + std::to_string(c.threads) + " stores " +
                 std::string(smax::to_string(c.stores)));
    Prepared p = prepare(c, rng(), rng()() % 2 ? 3 : 30);
    Outputs out = make_outputs(c);
    run(c, p, out);
    check(c, p, out);
    if (c.threads != 1) {
      c.threads = 1;
      Outputs one = make_outputs(c);
      run(c, p, one);
      expect_same_bytes(one, out);
    }
    if (HasFailure()) return;
  }
}

// An LLM vocabulary: 256K classes on the last axis, the target dominant or not, the
// loss and every gradient element at the bar.
TEST_F(CrossEntropy, VocabularyOf256KStaysExact) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (double smoothing : {0.0, 0.1}) {
      Call c;
      c.dtype = dtype;
      c.shape = {3, 262144};
      c.axis = -1;
      c.smoothing = smoothing;
      c.reduction = Reduction::none;
      SCOPED_TRACE(c.describe());
      Prepared p = prepare(c, rng(), 2);
      // Row 1: its target far above the rest, so the loss is log(1 + tiny).
      const std::int64_t t = p.reference_case.indices[1];
      p.logits.set_at(262144 + t, 40);
      p.reference_case.logits = values_of(p.logits);
      Outputs out = make_outputs(c);
      run(c, p, out);
      check(c, p, out);
    }
  }
}

// Every bad argument: smax::Error with the right code, a message naming it, nothing written.
class CrossEntropyErrors : public SeededTest {
 protected:
  void expect_error(const std::function<void()>& call, Errc code, const std::string& fragment) {
    const auto before_loss = out_.loss.bytes();
    const auto before_grad = out_.grad.bytes();
    const auto before_lp = out_.log_prob.bytes();
    try {
      call();
      ADD_FAILURE() << "no smax::Error thrown (expected: " << fragment << ")";
    } catch (const Error& e) {
      EXPECT_EQ(smax::to_string(e.code()), smax::to_string(code)) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what() << " lacks " << fragment;
      EXPECT_EQ(std::string(e.what()).rfind("cross_entropy: ", 0), 0u) << e.what();
    }
    EXPECT_EQ(out_.loss.bytes(), before_loss) << "loss written";
    EXPECT_EQ(out_.grad.bytes(), before_grad) << "grad written";
    EXPECT_EQ(out_.log_prob.bytes(), before_lp) << "log_prob written";
  }

  CrossEntropyOutputs all() { return {.log_prob = out_.log_prob.mutable_view(), .grad = out_.grad.mutable_view()}; }

  Call call_ = [] {
    Call c;
    c.shape = {3, 5, 2};
    c.reduction = Reduction::none;
    return c;
  }();
  Prepared p_ = prepare(call_, rng());
  Outputs out_ = make_outputs(call_);
};

TEST_F(CrossEntropyErrors, OutOfRangeTargetsNameTheirPositionAndValue) {
  for (std::int64_t bad : {5, -1, -100, 1 << 30}) {
    p_.indices->i64[static_cast<std::size_t>(3 * p_.indices->step)] = bad;  // position [1, 1]
    expect_error([&] { cross_entropy(p_.logits.view(), p_.indices->view(), out_.loss.mutable_view(), {.reduction = Reduction::none}, all()); },
                 Errc::option, "target [1, 1] is " + std::to_string(bad));
    // Ignored, it is fine.
    EXPECT_NO_THROW(cross_entropy(p_.logits.view(), p_.indices->view(), out_.loss.mutable_view(),
                                  {.reduction = Reduction::none, .ignore_index = bad}));
  }
}

TEST_F(CrossEntropyErrors, EveryBadArgumentIsNamed) {
  const IndexView targets = p_.indices->view();
  const TensorView logits = p_.logits.view();
  const MutableTensorView loss = out_.loss.mutable_view();
  auto with = [&](CrossEntropyOptions o) {
    o.reduction = Reduction::none;
    return o;
  };
  TestTensor w_short(DType::f32, {4}), w_f64(DType::f64, {5}), scalar(DType::f32, {}), wrong(DType::f32, {3, 5, 3});
  TestTensor probs(DType::f32, {3, 5, 2});
  expect_error([&] { cross_entropy(logits, targets, loss, with({.weight = w_short.view()}), all()); }, Errc::shape,
               "weight shape [4]");
  expect_error([&] { cross_entropy(logits, targets, loss, with({.weight = w_f64.view()}), all()); }, Errc::dtype,
               "weight dtype f64");
  expect_error([&] { cross_entropy(logits, targets, loss, with({.label_smoothing = -0.1}), all()); }, Errc::option,
               "label_smoothing");
  expect_error([&] { cross_entropy(logits, targets, loss, with({.label_smoothing = 1.5}), all()); }, Errc::option,
               "label_smoothing");
  expect_error([&] { cross_entropy(logits, targets, loss, with({.label_smoothing = std::nan("")}), all()); },
               Errc::option, "label_smoothing");
  expect_error([&] { cross_entropy(logits, targets, loss, with({.axis = 3}), all()); }, Errc::axis, "axis 3");
  expect_error([&] { cross_entropy(logits, targets, loss, with({.threads = -2}), all()); }, Errc::option, "threads");
  expect_error([&] { cross_entropy(logits, targets, scalar.mutable_view(), with({}), all()); }, Errc::shape,
               "loss shape []");
  expect_error([&] { cross_entropy(logits, targets, loss, {.reduction = Reduction::mean}, all()); }, Errc::shape,
               "loss shape [3, 2]");
  expect_error([&] { cross_entropy(logits, targets, loss, {.reduction = static_cast<Reduction>(7)}, all()); },
               Errc::option, "unknown reduction");
  expect_error([&] { cross_entropy(logits, IndexView(p_.indices->i64.data(), {3, 3}), loss, with({}), all()); },
               Errc::shape, "target shape [3, 3]");
  expect_error([&] { cross_entropy(logits, probs.view(), loss, with({.ignore_index = -100}), all()); }, Errc::option,
               "ignore_index");
  expect_error([&] { cross_entropy(logits, wrong.view(), loss, with({}), all()); }, Errc::shape, "target shape");
  expect_error([&] { cross_entropy(logits, targets, loss, with({}), {.grad = wrong.mutable_view()}); }, Errc::shape,
               "grad shape");
  expect_error([&] { cross_entropy(TensorView(nullptr, DType::f32, {3, 5, 2}), targets, loss, with({}), all()); },
               Errc::null_data, "logits data is null");
  expect_error([&] { cross_entropy(TensorView(p_.logits.data(), DType::f32, {}), IndexView(), loss, with({}), all()); },
               Errc::axis, "rank 0");
  // Overlaps: grad over the targets' bytes, grad and log_prob sharing memory, the
  // loss over the logits, grad partly over the logits.
  expect_error([&] { cross_entropy(logits, probs.view(), loss, with({}), {.grad = probs.mutable_view()}); },
               Errc::overlap, "grad");
  expect_error([&] {
    cross_entropy(logits, targets, loss, with({}), {.log_prob = out_.grad.mutable_view(), .grad = out_.grad.mutable_view()});
  }, Errc::overlap, "grad");
  expect_error([&] {
    cross_entropy(logits, targets, MutableTensorView(p_.logits.data(), DType::f32, {3, 2}), with({}), all());
  }, Errc::overlap, "loss");
  expect_error([&] {
    cross_entropy(logits, targets, loss, with({}),
                  {.grad = MutableTensorView(static_cast<float*>(p_.logits.data()) + 1, DType::f32, {3, 5, 2})});
  }, Errc::overlap, "grad");
}

}  // namespace
}  // namespace smax::test
