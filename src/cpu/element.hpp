// How each storage type is loaded, computed in and stored.
#pragma once

#include "smax/dtype.hpp"

namespace smax::cpu {

// Compute: the arithmetic type of the row statistics and of the scalar passes. f32
// computes in double so that x - max and the exp argument carry no float rounding (an
// f32 argument of -69 is off by up to 4e-6 relative); the vectorised passes compute
// in float lanes and carry that rounding error explicitly (simd/argument-inl.h).
// f16 and bf16 compute in float and round once on store; f64 computes in f64.
// NaiveCompute: the naive variant computes in the storage precision (float for f32),
// so that it overflows where the textbook formula does (exp(x) > FLT_MAX at x > 88.7).
template <class T>
struct Element;

template <>
struct Element<float> {
  using Compute = double;
  using NaiveCompute = float;
  template <class C>
  static C load(float v) { return static_cast<C>(v); }
  template <class C>
  static float store(C v) { return static_cast<float>(v); }
};

template <>
struct Element<double> {
  using Compute = double;
  using NaiveCompute = double;
  template <class C>
  static C load(double v) { return v; }
  template <class C>
  static double store(C v) { return v; }
};

template <>
struct Element<half> {
  using Compute = float;
  using NaiveCompute = float;
  template <class C>
  static C load(half v) { return to_float(v); }
  template <class C>
  static half store(C v) { return to_half(static_cast<float>(v)); }
};

template <>
struct Element<bfloat16> {
  using Compute = float;
  using NaiveCompute = float;
  template <class C>
  static C load(bfloat16 v) { return to_float(v); }
  template <class C>
  static bfloat16 store(C v) { return to_bfloat16(static_cast<float>(v)); }
};

}  // namespace smax::cpu
