// The .npy reader and writer: round trips, the header forms NumPy writes, and a
// precise rejection of everything else.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "npy.hpp"
#include "npy_fixtures.hpp"
#include "process.hpp"
#include "smax/error.hpp"

namespace smax::cli_test {
namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// read() must throw smax::Error(io) whose message is "<path>: ..." and contains `needle`.
::testing::AssertionResult rejects(const std::filesystem::path& path, const std::string& needle) {
  try {
    npy::read(path);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.code() != Errc::io) return ::testing::AssertionFailure() << "code is not io: " << message;
    if (!message.starts_with(path.string() + ": ")) {
      return ::testing::AssertionFailure() << "message does not start with the path: " << message;
    }
    if (message.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "message '" << message << "' does not contain '" << needle << "'";
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "read accepted " << path;
}

class NpyTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::filesystem::path file(const std::string& name) const { return dir / name; }
};

TEST_F(NpyTest, RoundTripsEveryDtypeAndRankZeroToFive) {
  const std::vector<std::string> descrs{"<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8",
                                        "|u1", "<u2", "<u4", "<u8", "|b1"};
  const std::vector<std::vector<std::int64_t>> shapes{{}, {5}, {2, 3}, {2, 1, 4}, {3, 2, 2, 1}, {1, 2, 3, 2, 2}};
  std::mt19937 random(7);
  for (const std::string& descr : descrs) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(descr + " rank " + std::to_string(shape.size()));
      const std::size_t item = static_cast<std::size_t>(descr[2] - '0');
      std::int64_t count = 1;
      for (std::int64_t extent : shape) count *= extent;
      std::vector<std::byte> data(static_cast<std::size_t>(count) * item);
      for (std::byte& b : data) b = static_cast<std::byte>(descr == "|b1" ? random() % 2 : random() % 256);
      npy::write(file("a.npy"), descr, shape, data.data(), data.size());

      const std::string bytes = slurp(file("a.npy"));
      ASSERT_GE(bytes.size(), 64u);
      EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
      const std::size_t data_start = bytes.size() - data.size();
      EXPECT_EQ(data_start % 64, 0u) << "the data must start on a 64-byte boundary";
      EXPECT_EQ(bytes[data_start - 1], '\n');

      const npy::Array array = npy::read(file("a.npy"));
      EXPECT_EQ(array.descr, descr);
      EXPECT_EQ(array.shape, shape);
      EXPECT_FALSE(array.fortran_order);
      EXPECT_EQ(array.numel(), count);
      EXPECT_EQ(array.item_size(), item);
      EXPECT_EQ(array.data, data);
    }
  }
}

TEST_F(NpyTest, HeaderIsWhatNumPyWrites) {
  const float values[6] = {1, 2, 3, 4, 5, 6};
  const std::int64_t shape[] = {2, 3};
  npy::write(file("a.npy"), "<f4", shape, values, sizeof values);
  const std::string bytes = slurp(file("a.npy"));
  ASSERT_EQ(bytes.size(), 128u + sizeof values);
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(bytes[8] + 256 * bytes[9], 118) << "header length";

  const std::int64_t one[] = {5};
  npy::write(file("b.npy"), "<f4", one, values, 5 * sizeof(float));
  EXPECT_NE(slurp(file("b.npy")).find("'shape': (5,), }"), std::string::npos);
  npy::write(file("c.npy"), "<f4", {}, values, sizeof(float));
  EXPECT_NE(slurp(file("c.npy")).find("'shape': (), }"), std::string::npos);
}

TEST_F(NpyTest, DtypeAndTypeNames) {
  npy::Array a{"<f4", {2}, false, {}};
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(a.type_name(), "float32");
  a.descr = "<f8";
  EXPECT_EQ(a.dtype(), DType::f64);
  a.descr = "<f2";
  EXPECT_EQ(a.dtype(), DType::f16);
  EXPECT_EQ(a.type_name(), "float16");
  a.descr = "<i8";
  EXPECT_EQ(a.dtype(), std::nullopt);
  EXPECT_EQ(a.type_name(), "int64");
  a.descr = "|b1";
  EXPECT_EQ(a.type_name(), "bool");
  EXPECT_EQ(npy::descr_of(DType::f16), "<f2");
  EXPECT_THROW(npy::descr_of(DType::bf16), Error);
}

TEST_F(NpyTest, StridesFollowTheMemoryOrder) {
  npy::Array a{"<f4", {2, 3, 4}, false, {}};
  EXPECT_EQ(a.strides(), (std::vector<std::int64_t>{12, 4, 1}));
  a.fortran_order = true;
  EXPECT_EQ(a.strides(), (std::vector<std::int64_t>{1, 2, 6}));
  a.shape = {};
  EXPECT_TRUE(a.strides().empty());
  EXPECT_EQ(a.numel(), 1);
}

TEST_F(NpyTest, ReadsVersionTwoHeaders) {
  const double values[6] = {1.5, -2, 3, 4, 5, 6};
  write_raw(file("v2.npy"), 2, header_for("<f8", false, "(3, 2)", 2),
            std::string_view(reinterpret_cast<const char*>(values), sizeof values));
  const npy::Array array = npy::read(file("v2.npy"));
  EXPECT_EQ(array.descr, "<f8");
  EXPECT_EQ(array.shape, (std::vector<std::int64_t>{3, 2}));
  ASSERT_EQ(array.data.size(), sizeof values);
  EXPECT_EQ(std::memcmp(array.data.data(), values, sizeof values), 0);
}

TEST_F(NpyTest, ReadsFortranOrder) {
  const float values[6] = {0, 1, 2, 3, 4, 5};  // memory order of a 2x3 array in Fortran order
  write_raw(file("f.npy"), 1, header_for("<f4", true, "(2, 3)"),
            std::string_view(reinterpret_cast<const char*>(values), sizeof values));
  const npy::Array array = npy::read(file("f.npy"));
  EXPECT_TRUE(array.fortran_order);
  EXPECT_EQ(array.strides(), (std::vector<std::int64_t>{1, 2}));
  const test::TestTensor tensor = to_tensor(array);
  // Element (1, 2) is at memory position 1 + 2 * 2 = 5.
  EXPECT_EQ(tensor.at(5), 5.0L);
  EXPECT_EQ(tensor.at(1), 2.0L);  // element (0, 1)
}

TEST_F(NpyTest, AcceptsHeaderVariations) {
  const std::string four_floats(16, '\0');
  const std::vector<std::string> headers{
      "{'shape': (4,), 'fortran_order': False, 'descr': '<f4'}",
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (4,)}   \n",
      "{'descr':'<f4','fortran_order':False,'shape':(4,),}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4L,), }\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2,), }\n",
  };
  for (const std::string& header : headers) {
    SCOPED_TRACE(header);
    write_raw(file("h.npy"), 1, header, four_floats);
    const npy::Array array = npy::read(file("h.npy"));
    EXPECT_EQ(array.numel(), 4);
  }
  write_raw(file("r0.npy"), 1, "{'descr': '<f8', 'fortran_order': False, 'shape': ()}", std::string(8, '\0'));
  EXPECT_TRUE(npy::read(file("r0.npy")).shape.empty());
}

TEST_F(NpyTest, RejectsWithAPreciseMessage) {
  struct Bad {
    std::string name;
    int major;
    std::string header;
    std::string data;
    std::string message;
  };
  const std::string f4x24(96, '\0');
  const std::vector<Bad> cases{
      {"big_endian", 1, header_for(">f4", false, "(24,)"), f4x24,
       "big-endian data ('>f4') is not supported; use little-endian"},
      {"object", 1, header_for("|O", false, "(2,)"), std::string(16, '\0'), "object arrays ('|O') are not supported"},
      {"complex", 1, header_for("<c8", false, "(1,)"), std::string(8, '\0'), "complex data ('<c8') is not supported"},
      {"string", 1, header_for("<U3", false, "(1,)"), std::string(12, '\0'), "string data ('<U3') is not supported"},
      {"long_double", 1, header_for("<f16", false, "(1,)"), std::string(16, '\0'), "unsupported dtype ('<f16')"},
      {"pipe_f4", 1, header_for("|f4", false, "(1,)"), std::string(4, '\0'), "byte order '|' in ('|f4')"},
      {"structured", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'),
       "structured dtypes"},
      {"truncated", 1, header_for("<f4", false, "(24,)"), std::string(80, '\0'),
       "truncated: header says 24 elements (96 bytes) but 80 bytes follow"},
      {"trailing", 1, header_for("<f4", false, "(2,)"), std::string(9, '\0'),
       "header says 2 elements (8 bytes) but 9 bytes follow (trailing data)"},
      {"version3", 3, header_for("<f4", false, "(1,)"), std::string(4, '\0'),
       "format version 3.0 is not supported (use 1.0 or 2.0)"},
      {"rank9", 1, header_for("<f4", false, "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), std::string(4, '\0'),
       "rank exceeds the maximum of 8"},
      {"negative", 1, header_for("<f4", false, "(-3,)"), "", "negative extent -3"},
      {"not_a_tuple", 1, header_for("<f4", false, "(3)"), std::string(12, '\0'), "is not a tuple"},
      {"double_comma", 1, header_for("<f4", false, "(3,,)"), std::string(12, '\0'), "malformed header"},
      {"letters", 1, header_for("<f4", false, "(a,)"), "", "expected an integer in 'shape'"},
      {"huge_extent", 1, header_for("<f4", false, "(99999999999999999999,)"), "", "does not fit in 64 bits"},
      {"count_overflow", 1, header_for("<f4", false, "(4294967296, 4294967296)"), "",
       "has more elements than fit in 64 bits"},
      {"bytes_overflow", 1, header_for("<f8", false, "(4611686018427387904,)"), "",
       "needs more bytes than fit in 64 bits"},
      {"missing_key", 1, "{'descr': '<f4', 'shape': (1,)}", std::string(4, '\0'), "missing key 'fortran_order'"},
      {"unknown_key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", std::string(4, '\0'),
       "unexpected key 'x'"},
      {"duplicate_key", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
       std::string(4, '\0'), "key 'descr' appears twice"},
      {"bad_bool", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", std::string(4, '\0'),
       "'fortran_order' must be True or False"},
      {"not_a_dict", 1, "[1, 2]", "", "malformed header: expected '{'"},
      {"after_dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", std::string(4, '\0'),
       "unexpected text after the closing '}'"},
  };
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.name);
    const auto path = file(bad.name + ".npy");
    write_raw(path, bad.major, bad.header, bad.data);
    EXPECT_TRUE(rejects(path, bad.message));
  }
}

TEST_F(NpyTest, RejectsFilesThatAreNotNpy) {
  std::ofstream(file("text.npy")) << "hello, world";
  EXPECT_TRUE(rejects(file("text.npy"), "not a .npy file (bad magic)"));
  std::ofstream(file("empty.npy")).flush();
  EXPECT_TRUE(rejects(file("empty.npy"), "not a .npy file (bad magic)"));
  std::ofstream(file("short.npy")) << "\x93NUMPY\x01";
  EXPECT_TRUE(rejects(file("short.npy"), "truncated"));
  std::ofstream(file("long_header.npy")) << std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 18);
  EXPECT_TRUE(rejects(file("long_header.npy"), "truncated: header length 255"));
  EXPECT_TRUE(rejects(file("missing.npy"), "cannot open: No such file or directory"));
  EXPECT_TRUE(rejects(dir.path(), "not a regular file"));
}

// Every prefix of a valid file, and random corruptions of its header, must be
// rejected (or read) cleanly, never crash.
TEST_F(NpyTest, SurvivesTruncationAndGarbage) {
  const float values[12] = {};
  const std::int64_t shape[] = {3, 4};
  npy::write(file("good.npy"), "<f4", shape, values, sizeof values);
  const std::string good = slurp(file("good.npy"));
  for (std::size_t length = 0; length < good.size(); ++length) {
    std::ofstream(file("cut.npy"), std::ios::binary) << good.substr(0, length);
    EXPECT_THROW(npy::read(file("cut.npy")), Error) << "prefix of " << length << " bytes";
  }
  std::mt19937 random(11);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[8 + random() % 120] = static_cast<char>(random() % 256);
    std::ofstream(file("bad.npy"), std::ios::binary) << bad;
    try {
      const npy::Array array = npy::read(file("bad.npy"));
      EXPECT_EQ(static_cast<std::size_t>(array.numel()) * array.item_size(), array.data.size());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::io);
    }
  }
}

TEST_F(NpyTest, WriteRejectsMismatchedArguments) {
  const float values[4] = {};
  const std::int64_t shape[] = {2, 3};
  EXPECT_THROW(npy::write(file("a.npy"), "<f4", shape, values, sizeof values), Error);
  EXPECT_THROW(npy::write(file("a.npy"), ">f4", std::span<const std::int64_t>(shape, 1), values, 8), Error);
  const std::int64_t negative[] = {-1};
  EXPECT_THROW(npy::write(file("a.npy"), "<f4", negative, values, 0), Error);
  EXPECT_TRUE(dir.list().empty()) << "a rejected write creates no file";
}

TEST_F(NpyTest, WriteIsAtomic) {
  const float values[2] = {1, 2};
  const std::int64_t shape[] = {2};
  // A missing directory: the error names the path and the system's reason.
  try {
    npy::write(file("no/such/dir/a.npy"), "<f4", shape, values, sizeof values);
    FAIL() << "write into a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find(file("no/such/dir/a.npy").string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
  // The destination is a directory: the rename fails after the data was written;
  // the temporary file must be gone.
  std::filesystem::create_directory(file("taken.npy"));
  EXPECT_THROW(npy::write(file("taken.npy"), "<f4", shape, values, sizeof values), Error);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"taken.npy"});

  // Replacing a file leaves exactly the new one, with the old one's permissions.
  npy::write(file("out.npy"), "<f4", shape, values, sizeof values);
  ::chmod(file("out.npy").c_str(), 0640);
  const float other[3] = {3, 4, 5};
  const std::int64_t other_shape[] = {3};
  npy::write(file("out.npy"), "<f4", other_shape, other, sizeof other);
  EXPECT_EQ(npy::read(file("out.npy")).shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(dir.list(), (std::vector<std::string>{"out.npy", "taken.npy"}));
  struct stat info {};
  ASSERT_EQ(::stat(file("out.npy").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
}

}  // namespace
}  // namespace smax::cli_test
