// smax: exact, fast softmax kernels. Include this one header.
#pragma once

#include "smax/dtype.hpp"
#include "smax/error.hpp"
#include "smax/info.hpp"
#include "smax/ops.hpp"
#include "smax/options.hpp"
#include "smax/tensor.hpp"
#include "smax/training.hpp"
#include "smax/version.hpp"
