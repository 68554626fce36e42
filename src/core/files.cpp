#include "core/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tt {

namespace fs = std::filesystem;

namespace {

// Where a write to `path` lands: a symbolic link's target (an existing file, or a new one in an
// existing directory), the path itself otherwise.
fs::path resolve(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  const fs::path r = fs::weakly_canonical(p, ec);
  return ec ? p : r;
}

void fsync_path(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void remove_stale_temporaries(const std::string& dir, const std::function<bool(const std::string&)>& is_base) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t dot = name.rfind('.');  // BASE.tmp.PID: the process id after the last dot
    if (dot == std::string::npos || dot < 4) continue;
    const std::string pid = name.substr(dot + 1), kind = name.substr(dot - 4, 5);
    if ((kind != ".tmp." && kind != ".old.") || !is_base(name.substr(0, dot - 4))) continue;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    std::error_code ignored;
    if (::kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ignored);
  }
}

void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty()) usage_fail(flag + ": empty path");
  const fs::path p = resolve(path);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st) && !fs::is_regular_file(st))
    usage_fail(flag + ": '" + path + "' is not a regular file (" +
               (fs::is_directory(st) ? "a directory" : "a device, FIFO or socket") + "): outputs replace regular files only");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) usage_fail(flag + ": directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0) usage_fail(flag + ": directory '" + dir.string() + "' is not writable");
  // The permission bits do not tell everything (root passes them; /proc and read-only mounts
  // refuse anyway): the temporary file the write will use is made and removed now.
  const fs::path probe = p.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EEXIST)
    usage_fail(flag + ": cannot create a file in directory '" + dir.string() + "' (" + std::strerror(errno) + ")");
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

void check_writable_directory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) usage_fail(flag + ": '" + dir + "' exists and is not a directory");
  fs::path existing = fs::absolute(dir, ec);
  while (!fs::is_directory(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  check_writable((existing / "probe").string(), flag);
}

void check_distinct_paths(const std::vector<std::pair<std::string, std::string>>& outputs,
                          const std::vector<std::pair<std::string, std::string>>& inputs) {
  auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (resolve(a) == resolve(b)) return true;
    return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, path] = outputs[i];
    if (path.empty()) continue;
    for (const auto& [in_flag, in_path] : inputs)
      if (!in_path.empty() && same(path, in_path))
        usage_fail(flag + ": '" + path + "' is the same file as " + in_flag + " '" + in_path + "': it would be overwritten");
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && same(path, outputs[j].second))
        usage_fail(flag + ": '" + path + "' is the same file as " + outputs[j].first + ": one output would replace the other");
  }
}

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) usage_fail(what + ": '" + path + "' does not exist or cannot be read");
  if (!S_ISREG(st.st_mode)) usage_fail(what + ": '" + path + "' is not a regular file");
  if (uint64_t(st.st_size) > max_bytes)
    usage_fail(what + ": '" + path + "' holds " + std::to_string(st.st_size) + " bytes, more than the " +
               std::to_string(max_bytes) + " this input may have");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size_t(st.st_size), '\0');
  if (!in || !in.read(bytes.data(), std::streamsize(bytes.size()))) usage_fail(what + ": '" + path + "' cannot be read");
  return bytes;
}

void write_whole(int fd, const void* data, size_t n, const std::string& path, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = offset < 0 ? ::write(fd, p, n) : ::pwrite(fd, p, n, off_t(offset));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      const int e = k < 0 ? errno : ENOSPC;  // a write of nothing: no room
      fail("error while writing '" + path + "': " +
           (e == ENOSPC || e == EDQUOT ? std::string("disk full")
            : e == EFBIG              ? std::string("over the file-size limit")
                                      : std::string(std::strerror(e))));
    }
    p += k, n -= size_t(k);
    if (offset >= 0) offset += k;
  }
}

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const fs::path target = resolve(path);  // through a symbolic link to the file it names
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) fail("'" + path + "' is not a regular file: not replaced");
  remove_stale_temporaries(target.has_parent_path() ? target.parent_path().string() : "",
                           [&](const std::string& base) { return base == target.filename().string(); });
  const std::string tmp = target.string() + ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) fail("cannot create '" + tmp + "'");
      write(out);
      out.flush();
      if (!out) fail("error while writing '" + tmp + "' (disk full, or over the file-size limit?)");
    }
    fsync_path(tmp, O_RDONLY);  // the data is on disk before the name points to it
    if (std::rename(tmp.c_str(), target.c_str()) != 0) fail("cannot rename '" + tmp + "' to '" + target.string() + "'");
    fsync_path(target.has_parent_path() ? target.parent_path() : fs::path("."), O_RDONLY | O_DIRECTORY);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace tt
