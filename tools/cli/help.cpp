#include "help.hpp"

#include "commands.hpp"

namespace smax::cli {
namespace {

constexpr std::string_view kGeneral = R"(smax: exact, fast softmax kernels on .npy files

Usage:
  smax softmax      IN.npy OUT.npy [options]   softmax along one axis
  smax log-softmax  IN.npy OUT.npy [options]   log-softmax along one axis
  smax logsumexp    IN.npy OUT.npy [options]   log(sum(exp(x))) over one axis
  smax cross-entropy LOGITS.npy TARGETS.npy OUT.npy [options]
                                               cross-entropy loss, its gradient
  smax softmax-backward Y.npy DY.npy DX.npy [options]
  smax log-softmax-backward LOG_Y.npy DY.npy DX.npy [options]
                                               the backward passes
  smax info [options]                          the machine, and the plan for a shape
  smax demo                                    the variants side by side: accuracy and speed
  smax bench [options]                         every variant, a copy and other libraries: GB/s
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
  --stores MODE       auto, cached or streaming: how the output is written,
                      through the cache or around it (non-temporal stores: less
                      memory traffic, but nothing left in cache). auto streams where
                      the call moves more than the last-level cache (at most
                      48 MiB; default auto); f64 always uses cached
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
architecture, vendor, features, cache sizes (a size the OS does not report is a
default, marked 'assumed') and the thread count. With --shape, also prints the
plan the library would run for a C-order tensor of that shape: algorithm, pass
order, rows, row length, tiled block, threads, stores and the reason for the
choice.

Options:
  --shape SHAPE       extents joined by 'x', e.g. 64x128256, 8 or 2x3x4; 'scalar'
                      or '' for rank 0
  --axis A            the axis of the operation (default -1)
  --dtype TYPE        f32, f64, f16 or bf16 (default f32)
  --op OP             softmax, log-softmax or logsumexp (default softmax)
  --algorithm NAME    auto, naive, safe, fused, tiled or online (default auto)
  --pass-order ORDER  reverse or forward (default reverse)
  --stores MODE       auto, cached or streaming (default auto)
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

constexpr std::string_view kBench = R"(Usage: smax bench [options]

Times every smax variant (auto, auto-cached, online, online-forward, tiled,
tiled-forward, safe, fused, naive) side by side with two plain copies of the same
bytes on as many threads (copy: memcpy; copy-nt: non-temporal stores, which do
not read the output's lines first; the faster of the two is the physical limit)
and the other libraries this build found (oneDNN, XNNPACK, PyTorch), on the same data, and
prints one table per workload: GB/s = (input + output bytes) / median time,
auto's fraction of the faster copy and its
ratio to the best other library, and the largest relative error of each
implementation against a long double reference. smax's kernels are
vectorised for every dtype (Highway, the best target of this CPU).

Workloads (--workload, comma-separated; 'all' for every one):
  sweep       f32 rows x columns, columns 128 to 2^20 doubling, and 1000, 3000,
              50257, 300000; rows chosen so each point moves --bytes
  vocab       1, 8 and 64 rows of 32000, 128256, 151936 and 262144 (LLM
              vocabularies)
  attention   [batch, 16, queries, keys], keys 128 to 8192, sized by --bytes
  classify    256 x 1000
  axis        [32, 81, 8732] axis 1, 4096 x 4096 axis 0, [8, 256, 56, 56] axis 1
              (not in the default set: oneDNN takes seconds per call there)
  long-row    single rows of 2^22 to 2^27 elements (not in the default set)
  half        bf16 and f16: 256 x 1000, 8 x 32000, 8 x 128256, three sweep
              points and [8, 256, 56, 56] axis 1 (not in the default set)
  training    softmax_backward, log_softmax_backward and cross-entropy with its
              gradient on 8 x 128256, 4096 x 32000 and 16384 x 100 (last axis) and
              [8, 21, 256, 256] along axis 1 (8x21x256x256:1), f32 and bf16,
              beside a plain kernel moving the same bytes (backward: 2 reads + 1 write;
              cross-entropy: a copy), with cached and with non-temporal
              stores; a table of its own, not in --json/--csv
              (not in the default set)
  cache       one core, rows that fit in cache: 256 x 1024, 64 x 1000,
              1 x 32000, 1 x 128256 (run with --threads 1 --memory 0)
  dram        16384 x 4096 from memory in f32, bf16 and f16
The default is sweep,vocab,attention,classify at 1 and all threads, with 16 MiB
per sized point: about 2 minutes on 2 cores. --bytes 256M gives the tutorial's
sizes, at several times the time. --shape times your own tensors instead (in a
table of their own, 'shape'; with --workload, after those workloads), e.g.
  smax bench --shape 4096x64,8x128256 --dtype f32,bf16 --threads 1
  smax bench --shape 8x256x56x56 --axis 1 --impl copy-nt,smax:auto,pytorch
  smax bench --shape 16384x10,4096x64 --op log-softmax --threads 1 --memory 0

Method: one warm-up run, then the median of --repeats runs (at least 3, and
fewer than --repeats only for calls over 0.5 s / --repeats). Inputs are fresh
normal(0, 3) values (never zero). Each point's input and output buffers are
copied into as many sets as fit in --memory, up to twice the last-level cache,
and runs take the sets in turn: where the sets exceed the cache, the point is
measured from DRAM ('dram' in the table), else from cache ('cache'). Outputs are
NaN-filled before every run and checked after it: every element finite and
>= 0 (<= 0 for log-softmax), and within the dtype's tolerance of the reference
on sampled rows. A failure is marked '!' and makes the exit status 1 (but
naive's: the textbook formula's plain float sum is off the reference on rows of
millions).

Options:
  --workload LIST    workloads to run (default sweep,vocab,attention,classify)
  --shape LIST       tensors to time, extents joined by 'x', comma-separated
                     (e.g. 4096x64,8x128256); every extent at least 1
  --axis A           the axis --shape's tensors normalise; negative counts from
                     the end (default -1)
  --dtype LIST       --shape's element types: f32, f64, f16, bf16, comma-separated
                     (default f32)
  --op LIST          --shape's operations: softmax, log-softmax, comma-separated
                     (default softmax; oneDNN and PyTorch run theirs, XNNPACK
                     has no log-softmax)
  --threads LIST     thread counts, e.g. 1,2 or 1,all (default 1,all)
  --bytes SIZE       bytes (input + output) per point of sweep, attention and
                     half's sweep points; K, M, G are binary units (default 16M)
  --repeats N        timed runs per measurement, after one warm-up (default 5)
  --memory SIZE      the most memory a point's rotated buffer copies may take
                     (default 1G); 0 keeps one set, so that points smaller
                     than the cache run from cache
  --offset BYTES     start every tensor this many bytes past a page, e.g. 16,
                     where NumPy and malloc put large blocks (default 0)
  --impl LIST        implementations to run: copy, copy-nt, smax (every variant),
                     smax:auto, smax:online, ..., onednn, xnnpack, pytorch
                     (default all)
  --seed N           seed of the random inputs (default 1)
  --json FILE        write every measurement and the machine as JSON
  --csv FILE         write every measurement as CSV
  --plot FILE        draw the sweep, GB/s against columns, to FILE (.svg, .png
                     or .pdf) with scripts/plot_bench.py (python3 and matplotlib;
                     if they are missing the run says so and carries on)
  --list             print the points and implementations, and run nothing
  -h, --help         show this text

The JSON holds {"machine": {...}, "settings": {...}, "results": [...],
"skipped": [...]}; each result has workload, shape, axis, dtype, threads, impl,
median_s, gbps and max_rel_err, among others. 'python -m smax.bench' writes the
same format for PyTorch, ONNX Runtime and SciPy; scripts/plot_bench.py plots
several such files together.
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
  if (command == "bench") return kBench;
  if (command == "help") return kHelp;
  if (auto text = training_help(command)) return text;
  return std::nullopt;
}

}  // namespace smax::cli
