// The CUDA stream type, declared without CUDA's headers so that the op headers can declare
// their CUDA launchers for code compiled without nvcc.
#pragma once

struct CUstream_st;

namespace tt {
using Stream = CUstream_st*;  // the same type as cudaStream_t
}
