// Output files are written whole or not at all: into a temporary file beside the target,
// synced, then renamed over it (and the directory synced). A failed run leaves nothing
// half-written. A symbolic link is followed to the file it names; a directory, device, FIFO or
// socket is never replaced.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tt {

// Throws UsageError (naming `flag`) when `path` cannot be created: missing or read-only
// directory, or a directory in its place. Checked at start, before any work.
void check_writable(const std::string& path, const std::string& flag);

// Throws UsageError (naming `flag`) when `dir` cannot take new files: a file in its place, or
// (for a directory still to be made) the nearest existing directory above it refusing them.
void check_writable_directory(const std::string& dir, const std::string& flag);

// Throws UsageError when an output is the same file as an input or another output (after
// symbolic links, by path or by inode): (flag, path) pairs, empty paths ignored.
void check_distinct_paths(const std::vector<std::pair<std::string, std::string>>& outputs,
                          const std::vector<std::pair<std::string, std::string>>& inputs);

// The whole of an input file the program reads at once (a config.json, an index, a prompts
// file): UsageError naming `what` when it is not a regular file (a FIFO would block the read, a
// device never end) or holds more than max_bytes; checked before it is opened.
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes);

// Calls write(stream) on a temporary file and renames it to `path`. On any failure the
// temporary file is removed and Error is thrown.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

// All n bytes to `fd`, at `offset` (appended at the file's position when negative). Error naming
// `path` and the reason when they cannot be written: "disk full" (ENOSPC, EDQUOT), "over the
// file-size limit" (EFBIG), else the system's words.
void write_whole(int fd, const void* data, size_t n, const std::string& path, int64_t offset = -1);

// What runs that died left in `dir`: entries named BASE.tmp.PID or BASE.old.PID, BASE accepted by
// `is_base`, whose process PID no longer runs (a write's temporary file, an export's staging or
// replaced directory, tokenize's encoded tokens), removed whole.
void remove_stale_temporaries(const std::string& dir, const std::function<bool(const std::string&)>& is_base);

}  // namespace tt
