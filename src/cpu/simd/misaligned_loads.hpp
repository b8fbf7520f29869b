// Whether the float row kernels read vectors of a row that is not aligned to them by
// joining two aligned loads (walk-inl.h's ShiftedLoads) or by unaligned loads: the same
// bits either way, a matter of speed only. Chosen at first use by the CPU's vendor
// (MachineInfo::vendor: joins except on AMD cores); tests set it to run both ways.
#pragma once

namespace smax::cpu::simd {

bool joins_misaligned_loads();
void set_joins_misaligned_loads(bool joins);

}  // namespace smax::cpu::simd
