// TensorBoard's event files: CRC-32C against the published check values, the TFRecord framing
// byte by byte, and a run and its resume (two files in one directory) decoded by the protobuf
// library against TensorBoard's schema, and by TensorBoard's own reader where it is installed
// (tests/cpu/tensorboard_check.py).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_outputs.h"
#include "train/tensorboard.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

// The Python that has the protobuf library (Debian's python3-protobuf is /usr/bin/python3's, which
// another python3 on the PATH may hide), with protoc beside it; "" for none.
std::string protobuf_python() {
  if (std::system("command -v protoc >/dev/null 2>&1") != 0) return "";
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(python) + " -c 'import google.protobuf' >/dev/null 2>&1").c_str()) == 0) return python;
  return "";
}

// CRC-32C's check value ("123456789") and RFC 3720's vectors (32 bytes of 0x00, of 0xff), and
// the mask: rotated right by 15 bits, plus 0xa282ead8.
TEST(TensorBoard, Crc32cIsCastagnolis) {
  EXPECT_EQ(crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t c = 0xe3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

// A record: the length as 8 bytes little-endian, its masked CRC, the payload, the payload's.
TEST(TensorBoard, RecordFraming) {
  const std::string r = tfrecord("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(r.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  uint32_t length_crc = 0, payload_crc = 0;
  std::memcpy(&length_crc, r.data() + 8, 4);
  std::memcpy(&payload_crc, r.data() + 15, 4);
  EXPECT_EQ(length_crc, masked_crc32c(r.substr(0, 8)));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(payload_crc, masked_crc32c("abc"));
}

// A run that logs steps 10, 20 and 25 and stops, and its resume from step 20 logging 30: two
// files in the directory, which TensorBoard reads in the order of their names as one run.
TEST(TensorBoard, RunAndResumeDecodeWithTheProtobufLibrary) {
  const ScratchDir scratch("tensorboard");
  const std::string dir = (scratch.path() / "logs").string();
  {
    TensorBoardWriter first(dir, "--tensorboard");
    first.write(10, {{"loss", 5.5}, {"lr", 3e-4}});
    first.write(20, {{"loss", 4.25}, {"validation_loss", 4.5}});
    first.write(25, {{"loss", 4.0}});
  }
  TensorBoardWriter resumed(dir, "--tensorboard");
  resumed.write(30, {{"loss", 3.75}, {"tokens_per_sec", 123456.5}, {"task_acc_norm", 0.3125}});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[1], fs::path(resumed.path()).filename().string()) << "the resumed run's file sorts last";
  EXPECT_EQ(names[0].rfind("events.out.tfevents.", 0), 0u) << names[0];

  const std::string python = protobuf_python();
  if (python.empty()) GTEST_SKIP() << "protoc and the protobuf library for Python are not installed here "
                                      "(Debian: protobuf-compiler, python3-protobuf)";
  const nlohmann::json expected = {
      {"files", 2},
      {"events", {{10, {{"loss", 5.5}, {"lr", 3e-4}}}, {20, {{"loss", 4.25}, {"validation_loss", 4.5}}},
                  {25, {{"loss", 4.0}}},
                  {30, {{"loss", 3.75}, {"tokens_per_sec", 123456.5}, {"task_acc_norm", 0.3125}}}}}};
  std::ofstream(scratch.path() / "expected.json") << expected.dump();
  const fs::path log = scratch.path() / "check.log";
  const std::string cmd = python + " " + TT_TESTS_DIR + "/cpu/tensorboard_check.py " + dir + " " +
                          (scratch.path() / "expected.json").string() + " >" + log.string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read_text(log);
  std::cout << read_text(log);
}

// A --metrics line's numbers by their names; the step is the x axis, a null (no validation at this
// step, no MFU on the CPU) no value.
TEST(TensorBoard, MetricsLinesAsScalars) {
  const nlohmann::json line = {{"step", 20}, {"loss", 4.5}, {"lr", 3e-4}, {"mfu", nullptr}, {"validation_loss", 4.75}};
  const Scalars s = metrics_scalars(line);
  EXPECT_EQ(s, (Scalars{{"loss", 4.5}, {"lr", 3e-4}, {"validation_loss", 4.75}}));
}

TEST(TensorBoard, AFileInTheDirectorysPlaceIsRefused) {
  const ScratchDir scratch("tensorboard");
  std::ofstream(scratch.path() / "file") << "x";
  const std::string message = refusal([&] { TensorBoardWriter w(scratch.file("file"), "--tensorboard"); });
  EXPECT_EQ(message.rfind("--tensorboard: ", 0), 0u) << message;
  EXPECT_EQ(refusal([&] { check_tensorboard_dir("", "--tensorboard"); }), "--tensorboard: empty path");
}

}  // namespace
}  // namespace tt::test
