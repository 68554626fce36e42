// libFuzzer's entry point for longer runs than CI's (clang only):
//   cmake -S . -B build-fuzz -DTT_CUDA=OFF -DTT_LIBFUZZER=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang
//   cmake --build build-fuzz --target fuzz_libfuzzer && build-fuzz/tests/fuzz_libfuzzer -max_total_time=600
#include <unistd.h>

#include <string>

#include "fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/tt_libfuzzer_" + std::to_string(::getpid());
  tt::fuzz::run_case(data, size, path);
  return 0;
}
