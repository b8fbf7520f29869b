#include "npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "smax/error.hpp"
#include "smax/tensor.hpp"

namespace smax::npy {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kAlignment = 64;  // NumPy pads the header so the data starts here

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw Error(Errc::io, file + ": " + what); }

std::string errno_text(int error) { return std::strerror(error); }

// ---- Element types -------------------------------------------------------------

struct ElementType {
  char kind;  // 'f', 'i', 'u' or 'b'
  std::size_t size;
};

// Checks a descr against what this reader supports and explains a rejection.
ElementType parse_descr(const std::string& file, std::string_view descr) {
  const std::string quoted = "('" + std::string(descr) + "')";
  if (descr.size() < 2) fail(file, "unsupported dtype descr '" + std::string(descr) + "'");
  const char order = descr[0];
  const char kind = descr[1];
  switch (kind) {
    case 'O': fail(file, "object arrays " + quoted + " are not supported");
    case 'c': fail(file, "complex data " + quoted + " is not supported");
    case 'S':
    case 'U':
    case 'a': fail(file, "string data " + quoted + " is not supported");
    case 'V': fail(file, "structured or void data " + quoted + " is not supported");
    case 'M':
    case 'm': fail(file, "datetime data " + quoted + " is not supported");
    default: break;
  }
  const std::string_view digits = descr.substr(2);
  std::size_t size = 0;
  const bool known_size = digits == "1" || digits == "2" || digits == "4" || digits == "8";
  if (known_size) size = static_cast<std::size_t>(digits[0] - '0');
  const bool supported = known_size && ((kind == 'f' && size >= 2) || kind == 'i' || kind == 'u' ||
                                        (kind == 'b' && size == 1));
  if (!supported || std::string_view("<>|=").find(order) == std::string_view::npos) {
    fail(file, "unsupported dtype " + quoted +
                   " (supported: float16/32/64, int8/16/32/64, uint8/16/32/64 and bool, little-endian)");
  }
  // Byte order only matters for multi-byte types.
  if (size > 1 && order == '>') fail(file, "big-endian data " + quoted + " is not supported; use little-endian");
  if (size > 1 && order != '<') {
    fail(file, "byte order '" + std::string(1, order) + "' in " + quoted + " is not supported; use '<'");
  }
  return {kind, size};
}

std::string type_name_of(const ElementType& type) {
  const std::string bits = std::to_string(type.size * 8);
  switch (type.kind) {
    case 'f': return "float" + bits;
    case 'i': return "int" + bits;
    case 'u': return "uint" + bits;
    default: return "bool";
  }
}

// ---- Header ----------------------------------------------------------------------

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// The header is a Python dict literal as NumPy writes it, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Keys may come in any order; the three keys are required and no others are allowed.
class HeaderParser {
 public:
  HeaderParser(std::string file, std::string_view text) : file_(std::move(file)), text_(text) {}

  Header parse() {
    Header header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        reject_duplicate(seen_descr, key);
        if (peek() == '[') fail(file_, "structured dtypes (a list of fields in 'descr') are not supported");
        header.descr = parse_string();
      } else if (key == "fortran_order") {
        reject_duplicate(seen_order, key);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        reject_duplicate(seen_shape, key);
        header.shape = parse_shape();
      } else {
        fail(file_, "malformed header: unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') malformed("expected ',' or '}'");
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) malformed("unexpected text after the closing '}'");
    if (!seen_descr || !seen_order || !seen_shape) {
      fail(file_, std::string("malformed header: missing key '") +
                      (!seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape") + "'");
    }
    return header;
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    fail(file_, "malformed header: " + what + " at offset " + std::to_string(pos_));
  }
  void reject_duplicate(bool& seen, const std::string& key) const {
    if (seen) fail(file_, "malformed header: key '" + key + "' appears twice");
    seen = true;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) malformed(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool starts_with(std::string_view word) const { return text_.substr(pos_).starts_with(word); }

  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) malformed("unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }

  bool parse_bool() {
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (starts_with(word)) {
        pos_ += std::string_view(word).size();
        return value;
      }
    }
    malformed("'fortran_order' must be True or False");
  }

  // "()", "(5,)", "(3, 4)", "(3, 4,)"; Python 2 files may write "3L".
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    bool trailing_comma = false;
    expect('(');
    skip_space();
    while (peek() != ')') {
      if (shape.size() == static_cast<std::size_t>(kMaxRank)) {
        fail(file_, "rank exceeds the maximum of " + std::to_string(kMaxRank));
      }
      shape.push_back(parse_extent());
      if (peek() == 'L') ++pos_;
      skip_space();
      trailing_comma = peek() == ',';
      if (trailing_comma) {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        malformed("expected ',' or ')' in 'shape'");
      }
    }
    ++pos_;
    if (shape.size() == 1 && !trailing_comma) malformed("'shape' (n) is not a tuple; a 1-element tuple is (n,)");
    return shape;
  }

  std::int64_t parse_extent() {
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!std::isdigit(static_cast<unsigned char>(peek()))) malformed("expected an integer in 'shape'");
    std::int64_t value = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, peek() - '0', &value)) {
        fail(file_, "extent in 'shape' does not fit in 64 bits");
      }
      ++pos_;
    }
    if (negative) fail(file_, "negative extent -" + std::to_string(value) + " in 'shape'");
    return value;
  }

  std::string file_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

std::string format_shape(std::span<const std::int64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Element count and byte size of a shape; throws if either overflows.
std::pair<std::int64_t, std::size_t> checked_size(const std::string& file, std::span<const std::int64_t> shape,
                                                  std::size_t item_size) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) {
    if (__builtin_mul_overflow(count, extent, &count)) {
      fail(file, "shape " + format_shape(shape) + " has more elements than fit in 64 bits");
    }
  }
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(count), item_size, &bytes)) {
    fail(file, "shape " + format_shape(shape) + " needs more bytes than fit in 64 bits");
  }
  return {count, bytes};
}

// ---- Files -----------------------------------------------------------------------

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, so that a failing close (delayed write errors) can be reported.
  int close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

// Reads up to `size` bytes; fewer only at the end of the file.
std::size_t read_fully(const std::string& file, int fd, void* buffer, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, static_cast<char*>(buffer) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(file, "read failed: " + errno_text(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// Writes all of `size` bytes; false with errno set on failure.
bool write_fully(int fd, const void* buffer, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, static_cast<const char*>(buffer) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::uint32_t little_endian(const unsigned char* bytes, std::size_t count) {
  std::uint32_t value = 0;
  for (std::size_t i = count; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

// The mode a new file gets from open(2): 0666 minus the umask. umask can only be
// read by setting it, so it is set back at once.
mode_t default_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// ".NAME.tmp.XXXXXX": hidden, recognisable, and the pattern mkstemp fills in.
std::string hidden_temp_name(const std::filesystem::path& destination) {
  std::string name = ".";
  name += destination.filename().string();
  name += ".tmp.XXXXXX";
  return name;
}

// A temporary file next to the destination, so that the final rename stays within
// one file system. It is removed unless commit() renamed it into place.
class TempFile {
 public:
  TempFile(const std::string& file, const std::filesystem::path& destination)
      : file_(file),
        directory_(destination.has_parent_path() ? destination.parent_path() : std::filesystem::path(".")),
        name_((directory_ / hidden_temp_name(destination)).string()),
        fd_(::mkstemp(name_.data())) {
    if (fd_.get() < 0) {
      fail(file_, "cannot create a temporary file in '" + directory_.string() + "': " + errno_text(errno));
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!committed_) ::unlink(name_.c_str());
  }

  void append(const void* data, std::size_t size) {
    if (!write_fully(fd_.get(), data, size)) fail(file_, "cannot write: " + errno_text(errno));
  }

  void commit(const std::filesystem::path& destination, mode_t mode) {
    if (::fchmod(fd_.get(), mode) != 0) fail(file_, "cannot set permissions: " + errno_text(errno));
    if (fd_.close() != 0) fail(file_, "cannot write: " + errno_text(errno));
    if (::rename(name_.c_str(), destination.c_str()) != 0) fail(file_, "cannot replace: " + errno_text(errno));
    committed_ = true;
  }

 private:
  std::string file_;
  std::filesystem::path directory_;
  std::string name_;
  FileDescriptor fd_;
  bool committed_ = false;
};

}  // namespace

// ---- Array -----------------------------------------------------------------------

std::optional<DType> Array::dtype() const {
  if (descr == "<f4") return DType::f32;
  if (descr == "<f8") return DType::f64;
  if (descr == "<f2") return DType::f16;
  return std::nullopt;
}

std::string Array::type_name() const { return type_name_of(parse_descr("array", descr)); }

std::size_t Array::item_size() const { return parse_descr("array", descr).size; }

std::int64_t Array::numel() const { return checked_size("array", shape, 1).first; }

std::vector<std::int64_t> Array::strides() const {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::size_t i = fortran_order ? k : shape.size() - 1 - k;
    strides[i] = step;
    step *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::bf16: break;
  }
  throw Error(Errc::io, "dtype " + std::string(to_string(dtype)) + " has no .npy equivalent");
}

// ---- Reading ---------------------------------------------------------------------

Array read(const std::filesystem::path& path) {
  const std::string file = path.string();
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(file, "cannot open: " + errno_text(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) fail(file, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(info.st_mode)) fail(file, "not a regular file");
  const auto file_size = static_cast<std::size_t>(info.st_size);

  std::array<unsigned char, 12> prefix{};
  const std::size_t got = read_fully(file, fd.get(), prefix.data(), 8);
  if (got < kMagic.size() || std::memcmp(prefix.data(), kMagic.data(), kMagic.size()) != 0) {
    fail(file, "not a .npy file (bad magic)");
  }
  if (got < 8) fail(file, "truncated: the file ends inside the format version");
  const int major = prefix[6];
  const int minor = prefix[7];
  if ((major != 1 && major != 2) || minor != 0) {
    fail(file, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported (use 1.0 or 2.0)");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (read_fully(file, fd.get(), prefix.data() + 8, length_bytes) < length_bytes) {
    fail(file, "truncated: the file ends inside the header length");
  }
  const std::size_t header_length = little_endian(prefix.data() + 8, length_bytes);
  const std::size_t header_start = 8 + length_bytes;
  if (header_length > file_size - header_start) {
    fail(file, "truncated: header length " + std::to_string(header_length) + " but only " +
                   std::to_string(file_size - header_start) + " bytes follow");
  }
  std::string header_text(header_length, '\0');
  if (read_fully(file, fd.get(), header_text.data(), header_length) < header_length) {
    fail(file, "truncated: the file ends inside the header");
  }

  Header header = HeaderParser(file, header_text).parse();
  const ElementType type = parse_descr(file, header.descr);
  const auto [count, bytes] = checked_size(file, header.shape, type.size);
  const std::size_t available = file_size - header_start - header_length;
  if (available != bytes) {
    const std::string said = "header says " + std::to_string(count) + " elements (" + std::to_string(bytes) +
                             " bytes) but " + std::to_string(available) + " bytes follow";
    fail(file, available < bytes ? "truncated: " + said : said + " (trailing data)");
  }

  Array array{std::move(header.descr), std::move(header.shape), header.fortran_order, {}};
  array.data.resize(bytes);
  if (read_fully(file, fd.get(), array.data.data(), bytes) < bytes) fail(file, "truncated: the file shrank while reading");
  return array;
}

// ---- Writing ---------------------------------------------------------------------

void write(const std::filesystem::path& path, std::string_view descr, std::span<const std::int64_t> shape,
           const void* data, std::size_t bytes) {
  const std::string file = path.string();
  const ElementType type = parse_descr(file, descr);
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
    fail(file, "rank " + std::to_string(shape.size()) + " exceeds the maximum of " + std::to_string(kMaxRank));
  }
  for (std::int64_t extent : shape) {
    if (extent < 0) fail(file, "negative extent " + std::to_string(extent) + " in shape " + format_shape(shape));
  }
  const auto [count, expected_bytes] = checked_size(file, shape, type.size);
  if (bytes != expected_bytes) {
    fail(file, "shape " + format_shape(shape) + " of " + type_name_of(type) + " needs " +
                   std::to_string(expected_bytes) + " bytes, got " + std::to_string(bytes));
  }

  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                       format_shape(shape) + ", }";
  // Version 1.0 stores the header length in 16 bits; longer headers need 2.0.
  const bool version1 = header.size() + 1 + 10 <= 65535;
  const std::size_t prefix_size = version1 ? 10 : 12;
  const std::size_t unpadded = prefix_size + header.size() + 1;
  header.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
  header.push_back('\n');
  std::string prefix(kMagic);
  prefix.push_back(static_cast<char>(version1 ? 1 : 2));
  prefix.push_back('\0');
  for (std::size_t i = 0; i < prefix_size - 8; ++i) prefix.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));

  // Keep the mode of a file being replaced; a new file gets the usual umask mode.
  struct stat existing {};
  const mode_t mode = ::stat(path.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : default_file_mode();
  TempFile temp(file, path);
  temp.append(prefix.data(), prefix.size());
  temp.append(header.data(), header.size());
  temp.append(data, bytes);
  temp.commit(path, mode);
}

}  // namespace smax::npy
