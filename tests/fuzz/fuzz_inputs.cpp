#include "fuzz_inputs.h"

#include <fstream>

#include "core/error.h"
#include "data/safetensors.h"
#include "data/token_file.h"
#include "train/checkpoint.h"
#include "train/data.h"

namespace tt::fuzz {

void run_case(const uint8_t* data, size_t size, const std::string& path) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const SafetensorsFile f = read_safetensors(path, "--fuzz");
    for (const SafetensorInfo& t : f.tensors)
      if (t.numel() <= (1 << 20)) read_tensor_f32(f, t);
  } catch (const UsageError&) {
  }
  try {
    read_checkpoint_info(path);
  } catch (const UsageError&) {
  }
  try {
    const TokenFile t(path, 50304, "--fuzz");
    int32_t token = 0;
    for (int64_t i = 0; i < t.size(); i += 97) t.read(i, 1, &token);
  } catch (const UsageError&) {
  }
  try {  // as a text corpus (or a token file, when it starts with their magic)
    auto d = make_data_source(path, is_token_file(path) ? 50304 : 256, 2, 7, 1);
    Batch b;
    for (int i = 0; i < 3; ++i) d->next_batch(b);
    for (int i = 0; i < d->validation_batches(); ++i) d->validation_batch(i, b);
  } catch (const UsageError&) {
  }
}

}  // namespace tt::fuzz
