#include "help.hpp"

namespace smax::cli {
namespace {

constexpr std::string_view kGeneral = R"(smax: exact, fast softmax kernels on .npy files

Usage:
  smax softmax      IN.npy OUT.npy [options]   softmax along one axis
  smax log-softmax  IN.npy OUT.npy [options]   log-softmax along one axis
  smax logsumexp    IN.npy OUT.npy [options]   log(sum(exp(x))) over one axis
  smax info [options]                          the machine, and the plan for a shape
  smax demo                                    the variants side by side: accuracy and speed
  smax help [COMMAND]                          this text, or a command's
  smax --version                               print the version

Run 'smax COMMAND --help' for a command's options.

Exit status:
  0  success
  1  the run failed: a file could not be read or written, its data is not
     supported, or the library rejected an option for this input (axis out of
     range, temperature <= 0, fused with a too-long row, ...)
  2  the command line is malformed: unknown command or option, missing or extra
     arguments, a value that is not a number or not a known name
Errors are printed as 'smax: error: MESSAGE' on stderr. When a run fails, the
output file is not created or changed.
)";

constexpr std::string_view kSoftmax = R"(Usage: smax softmax IN.npy OUT.npy [options]
       smax log-softmax IN.npy OUT.npy [options]

Computes y = softmax(x / T) (or its log) along one axis of the array in IN.npy and
writes y, with the input's shape and dtype, to OUT.npy.

IN.npy holds float32, float64 or float16 data, little-endian, in C or Fortran order
(.npy format 1.0 or 2.0). OUT.npy is written in C order, atomically: it is replaced
only when the result is complete. IN.npy and OUT.npy may be the same file.

Options:
  --axis A            the axis to normalise; negative counts from the end (default -1)
  --temperature T     divide x by T first; finite and > 0 (default 1)
  --algorithm NAME    auto, naive, safe, fused, tiled or online (default auto: the
                      planner chooses from the shape and the caches; see 'smax info').
                      naive skips the max subtraction and overflows on purpose; fused
                      holds rows of at most 16384 elements
  --pass-order ORDER  reverse or forward: the order of the second pass of tiled and
                      online (default reverse, which starts where the cache is warm)
  --threads N         threads to use; 0 means all cores (default 0). The result does
                      not depend on N
  --all-masked MODE   what a row whose every element is -inf gives: nan (0/0, as
                      PyTorch and ONNX do) or zero (softmax 0, log-softmax -inf)
                      (default nan)
  -h, --help          show this text

Special values: a NaN anywhere in a row makes the whole row NaN; +inf in a row
gives NaN (inf - inf); -inf elements give 0 (log-softmax: -inf) unless the whole
row is -inf (see --all-masked). A zero-length axis gives an empty output.
Options take their value as '--axis 1' or '--axis=1'.
)";

constexpr std::string_view kLogsumexp = R"(Usage: smax logsumexp IN.npy OUT.npy [options]

Computes y = log(sum(exp(x / T))) over one axis of the array in IN.npy and writes
it to OUT.npy, with the axis removed from the shape (kept as 1 with --keepdims) and
the input's dtype. Input and output rules are those of 'smax softmax --help'.

Options:
  --axis A            the axis to reduce; negative counts from the end (default -1)
  --keepdims          keep the reduced axis with extent 1
  --temperature T     divide x by T first; finite and > 0 (default 1)
  --algorithm NAME    auto, naive, safe, fused, tiled or online (default auto)
  --pass-order ORDER  reverse or forward: the order of tiled and online's sum pass
                      (default reverse)
  --threads N         threads to use; 0 means all cores (default 0)
  -h, --help          show this text

Special values: NaN in a row gives NaN; +inf gives +inf; a row of only -inf, and
an empty axis (extent 0), give -inf.
)";

constexpr std::string_view kInfo = R"(Usage: smax info [options]

Prints the smax version and what the library read about this machine: CPU model,
architecture, features, cache sizes (a size the OS does not report is a default,
marked 'assumed') and the thread count. With --shape, also prints the plan the
library would run for a C-order tensor of that shape: algorithm, pass order,
rows, row length, tiled block, threads and the reason for the choice.

Options:
  --shape SHAPE       extents joined by 'x', e.g. 64x128256, 8 or 2x3x4; 'scalar'
                      or '' for rank 0
  --axis A            the axis of the operation (default -1)
  --dtype TYPE        f32, f64, f16 or bf16 (default f32)
  --op OP             softmax, log-softmax or logsumexp (default softmax)
  --algorithm NAME    auto, naive, safe, fused, tiled or online (default auto)
  --pass-order ORDER  reverse or forward (default reverse)
  --threads N         threads to plan for; 0 means all cores (default 0)
  -h, --help          show this text
)";

constexpr std::string_view kDemo = R"(Usage: smax demo

1. The tutorial's example x = [1, 100, 100000] in float32, through every variant:
   naive overflows (exp(100000) is inf, and inf / inf is NaN); the others
   subtract the maximum first and give [0, 0, 1].
2. A random float32 row of 2^20 elements and a 64 x 4096 tensor (normal(0, 3),
   fixed seed): for each variant, the median time of 5 runs after a warm-up, the
   bandwidth counting input and output bytes, and the largest relative error
   against the long double reference (over outputs >= 1e-30).

Options:
  -h, --help          show this text
)";

constexpr std::string_view kHelp = R"(Usage: smax help [COMMAND]

Prints the overview, or the help of COMMAND (same as 'smax COMMAND --help').
)";

}  // namespace

std::string_view general_help() { return kGeneral; }

std::optional<std::string_view> command_help(std::string_view command) {
  if (command == "softmax" || command == "log-softmax") return kSoftmax;
  if (command == "logsumexp") return kLogsumexp;
  if (command == "info") return kInfo;
  if (command == "demo") return kDemo;
  if (command == "help") return kHelp;
  return std::nullopt;
}

}  // namespace smax::cli
