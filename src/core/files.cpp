#include "core/files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tt {

namespace fs = std::filesystem;

void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty()) usage_fail(flag + ": empty path");
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) usage_fail(flag + ": '" + path + "' is a directory");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    usage_fail(flag + ": directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    usage_fail(flag + ": directory '" + dir.string() + "' is not writable");
}

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) fail("cannot create '" + tmp + "'");
      write(out);
      out.flush();
      if (!out) fail("error while writing '" + tmp + "' (disk full?)");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename '" + tmp + "' to '" + path + "'");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace tt
