// Where `export --hf DIR` puts its directory, through the binary: through a symbolic link into
// the directory it names (the link was replaced by a directory, the old export left where the link
// pointed), never over the current directory (`--hf .` failed with a raw rename error), and the
// staging and replaced directories of a killed export (NAME.tmp.PID, NAME.old.PID) removed by the
// next one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

TEST(ExportDirectory, LinksTheCurrentDirectoryAndKilledRuns) {
  ScratchDir scratch("expdir");
  const fs::path dir = scratch.path();
  std::ofstream(dir / "text.txt") << std::string(400, 'a') + "the quick brown fox jumps over the lazy dog ";
  const std::string ckpt = (dir / "m.st").string();
  ASSERT_EQ(run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 --num-steps 1 "
                       "--data " + (dir / "text.txt").string() + " --save " + ckpt, dir).exit_code, 0);
  // Through a link: the directory it names gets the export; the link stays a link.
  ASSERT_EQ(run_binary("export " + ckpt + " --hf " + (dir / "real").string(), dir).exit_code, 0);
  const auto before = fs::last_write_time(dir / "real" / "config.json");
  fs::create_directory_symlink(dir / "real", dir / "link");
  Outcome r = run_binary("export " + ckpt + " --hf " + (dir / "link").string(), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_NE(fs::last_write_time(dir / "real" / "config.json"), before) << "the export went where the link points";
  // The current directory, or one holding it: refused before any work.
  fs::create_directories(dir / "sub" / "deeper");
  for (const std::string& hf : {std::string("."), std::string("./"), std::string(".."), (dir / "sub").string()}) {
    SCOPED_TRACE(hf);
    r = run_binary("export " + ckpt + " --hf " + hf, dir, "cd " + (dir / "sub" / "deeper").string() + " && ");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("is the current directory or holds it"), std::string::npos) << r.err;
  }
  // A killed export's staging and replaced directories go; a living process's stay.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  for (const std::string& name : {"out.tmp." + std::to_string(dead), "out.old." + std::to_string(dead),
                                  "out.tmp." + std::to_string(::getpid())})
    fs::create_directories(dir / name);
  ASSERT_EQ(run_binary("export " + ckpt + " --hf " + (dir / "out").string(), dir).exit_code, 0);
  EXPECT_FALSE(fs::exists(dir / ("out.tmp." + std::to_string(dead))));
  EXPECT_FALSE(fs::exists(dir / ("out.old." + std::to_string(dead))));
  EXPECT_TRUE(fs::exists(dir / ("out.tmp." + std::to_string(::getpid()))));
}

}  // namespace
}  // namespace tt::test
