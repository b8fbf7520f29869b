// The machine, read once at run time: caches from sysfs (then sysconf), CPU vendor
// and features from the compiler's cpuid wrapper, threads from OpenMP.
#include <omp.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "smax/info.hpp"

namespace smax {
namespace {

// "48K", "2048K", "1M" -> bytes; 0 if unreadable.
std::int64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : '\0';
  if (unit == 'K') return value << 10;
  if (unit == 'M') return value << 20;
  if (unit == 'G') return value << 30;
  return value;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Data or unified cache of `level` for cpu0, from /sys/devices/system/cpu.
std::int64_t sysfs_cache_bytes(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string found_level = read_line(dir + "level");
    if (found_level.empty()) break;
    if (found_level != std::to_string(level) || read_line(dir + "type") == "Instruction") continue;
    return parse_size(read_line(dir + "size"));
  }
  return 0;
}

std::int64_t sysconf_cache_bytes(int level) {
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  const int name = level == 1 ? _SC_LEVEL1_DCACHE_SIZE : level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE;
  const long bytes = sysconf(name);
  return bytes > 0 ? bytes : 0;
#else
  (void)level;
  return 0;
#endif
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    // x86 says "model name", Arm "Model" or nothing useful; take the first that exists.
    for (const char* key : {"model name", "Model", "cpu model", "uarch"}) {
      if (line.rfind(key, 0) == 0) {
        const auto colon = line.find(':');
        if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
      }
    }
  }
  return "unknown";
}

std::string architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__riscv)
  return "riscv64";
#elif defined(__powerpc64__)
  return "ppc64";
#else
  return "unknown";
#endif
}

std::string cpu_vendor() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel")) return "intel";
  if (__builtin_cpu_is("amd")) return "amd";
#endif
  return "";
}

std::vector<std::string> cpu_features() {
  std::vector<std::string> found;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
#define SMAX_FEATURE(name) \
  if (__builtin_cpu_supports(name)) found.emplace_back(name);
  SMAX_FEATURE("sse4.2")
  SMAX_FEATURE("avx")
  SMAX_FEATURE("avx2")
  SMAX_FEATURE("fma")
  SMAX_FEATURE("f16c")
  SMAX_FEATURE("avx512f")
  SMAX_FEATURE("avx512bw")
  SMAX_FEATURE("avx512vl")
  SMAX_FEATURE("avx512bf16")
  SMAX_FEATURE("avx512fp16")
#undef SMAX_FEATURE
#endif
  return found;
}

MachineInfo read_machine() {
  MachineInfo m;
  m.cpu_model = cpu_model();
  m.architecture = architecture();
  m.vendor = cpu_vendor();
  m.features = cpu_features();
  // Defaults are deliberately small: a plan that assumes too little cache is slower,
  // one that assumes too much thrashes.
  const std::int64_t defaults[] = {32 << 10, 256 << 10, 4 << 20};
  const char* names[] = {"l1d_bytes", "l2_bytes", "l3_bytes"};
  std::int64_t* fields[] = {&m.l1d_bytes, &m.l2_bytes, &m.l3_bytes};
  for (int level = 1; level <= 3; ++level) {
    std::int64_t bytes = sysfs_cache_bytes(level);
    if (bytes == 0) bytes = sysconf_cache_bytes(level);
    if (bytes == 0) {
      bytes = defaults[level - 1];
      m.assumed.emplace_back(names[level - 1]);
    }
    *fields[level - 1] = bytes;
  }
  m.threads = omp_get_max_threads();
  return m;
}

}  // namespace

const MachineInfo& machine() {
  static const MachineInfo info = read_machine();
  return info;
}

}  // namespace smax
