// Output files are written whole or not at all: into a temporary file beside the target,
// then renamed over it. A failed run leaves nothing half-written.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace tt {

// Throws UsageError (naming `flag`) when `path` cannot be created: missing or read-only
// directory, or a directory in its place. Checked at start, before any work.
void check_writable(const std::string& path, const std::string& flag);

// Calls write(stream) on a temporary file and renames it to `path`. On any failure the
// temporary file is removed and Error is thrown.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace tt
