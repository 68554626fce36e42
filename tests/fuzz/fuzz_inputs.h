// One fuzz case for the readers of untrusted files: the bytes are written to a file, which is
// then opened as a safetensors file, a checkpoint, a token file and a text corpus. Each reader
// must accept it or refuse it with UsageError; anything else (a crash, a sanitizer report,
// another exception, a hang) is a defect.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tt::fuzz {

// `path` is a scratch file the case may overwrite.
void run_case(const uint8_t* data, size_t size, const std::string& path);

}  // namespace tt::fuzz
