#include "parallel/world.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "core/error.h"

extern char** environ;

namespace tt {

namespace {

int number(const std::map<std::string, std::string>& env, const std::string& key, int lo, int hi) {
  const std::string& s = env.at(key);
  char* end = nullptr;
  errno = 0;
  const long v = s.empty() ? 0 : std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    usage_fail("the launcher's " + key + "='" + s + "' is not a number in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]");
  return int(v);
}

bool all_set(const std::map<std::string, std::string>& env, std::initializer_list<const char*> keys, const char* launcher) {
  int set = 0;
  std::string missing;
  for (const char* k : keys) {
    if (env.count(k)) ++set;
    else missing += std::string(missing.empty() ? "" : ", ") + k;
  }
  if (set > 0 && set < int(keys.size()))
    usage_fail(std::string(launcher) + "'s variables are set only in part: " + missing + " missing");
  return set == int(keys.size());
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  const size_t comma = nodelist.find(','), bracket = nodelist.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return nodelist.substr(0, comma);
  const size_t close = nodelist.find(']', bracket);
  if (close == std::string::npos) usage_fail("SLURM_JOB_NODELIST='" + nodelist + "' is not a node list");
  const std::string range = nodelist.substr(bracket + 1, close - bracket - 1);
  const std::string first = range.substr(0, range.find_first_of(",-"));
  return nodelist.substr(0, bracket) + first;
}

World detect_world(const std::map<std::string, std::string>& env) {
  World w;
  constexpr int kMax = 1 << 20;
  // torchrun's world is its four rank variables; MASTER_ADDR and MASTER_PORT alone are no world
  // (Slurm and mpirun jobs set them too), but a torchrun world needs them.
  if (all_set(env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}, "torchrun")) {
    for (const char* key : {"MASTER_ADDR", "MASTER_PORT"})
      if (!env.count(key)) usage_fail(std::string("torchrun's variables are set only in part: ") + key + " missing");
    // tiny_llama --nproc-per-node sets torchrun's variables, and says so.
    w.launcher = env.count("TT_LAUNCHER") && env.at("TT_LAUNCHER") == "built-in" ? "built-in" : "torchrun";
    w.size = number(env, "WORLD_SIZE", 1, kMax);
    w.rank = number(env, "RANK", 0, w.size - 1);
    w.local_size = number(env, "LOCAL_WORLD_SIZE", 1, w.size);
    w.local_rank = number(env, "LOCAL_RANK", 0, w.local_size - 1);
    w.master_addr = env.at("MASTER_ADDR");
    w.master_port = number(env, "MASTER_PORT", 1, 65535);
  } else if (all_set(env, {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}, "Slurm")) {
    w.launcher = "slurm";
    w.size = number(env, "SLURM_NTASKS", 1, kMax);
    w.rank = number(env, "SLURM_PROCID", 0, w.size - 1);
    const char* per_node = env.count("SLURM_NTASKS_PER_NODE") ? "SLURM_NTASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    if (env.count(per_node)) {  // "4" or "4(x2)": the tasks on each node
      std::map<std::string, std::string> one = {{per_node, env.at(per_node).substr(0, env.at(per_node).find('('))}};
      w.local_size = number(one, per_node, 1, w.size);
    } else {
      w.local_size = w.size;
    }
    w.local_rank = number(env, "SLURM_LOCALID", 0, w.local_size - 1);
    if (env.count("MASTER_ADDR")) w.master_addr = env.at("MASTER_ADDR");
    else if (env.count("SLURM_JOB_NODELIST")) w.master_addr = first_slurm_host(env.at("SLURM_JOB_NODELIST"));
    w.master_port = env.count("MASTER_PORT") ? number(env, "MASTER_PORT", 1, 65535) : 29500;
  } else if (all_set(env, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}, "Open MPI")) {
    w.launcher = "mpirun";
    w.size = number(env, "OMPI_COMM_WORLD_SIZE", 1, kMax);
    w.rank = number(env, "OMPI_COMM_WORLD_RANK", 0, w.size - 1);
    w.local_size = env.count("OMPI_COMM_WORLD_LOCAL_SIZE") ? number(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, w.size) : w.size;
    w.local_rank = number(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, w.local_size - 1);
    if (env.count("MASTER_ADDR")) w.master_addr = env.at("MASTER_ADDR");
    if (env.count("MASTER_PORT")) w.master_port = number(env, "MASTER_PORT", 1, 65535);
  }
  return w;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace tt
