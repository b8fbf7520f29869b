// Runs a plan: splits the rows over threads and calls the chosen variant per row.
#pragma once

#include "core/problem.hpp"
#include "plan/planner.hpp"

namespace smax::cpu {

void execute(const detail::Problem& problem, const detail::Plan& plan);

}  // namespace smax::cpu
