#include "parallel/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <algorithm>
#include <thread>

#include "core/error.h"
#include "parallel/rendezvous.h"

namespace tt {

namespace {

// The stop signals the launcher received: the last one, and how many. Each goes on to every rank:
// the first stops them after the same step, a second at once (src/core/signals.h).
volatile sig_atomic_t forwarded_signal = 0, signals_received = 0;
void remember_signal(int sig) { forwarded_signal = sig, signals_received = signals_received + 1; }

// A stop signal acts only in a rank that runs: one stopped (SIGSTOP, a terminal's SIGTSTP) held
// the others at their next collective, and the job never ended. So every rank gets SIGCONT after
// the signal, and ranks still there kStopGraceSeconds later (hung in a write, say) are killed,
// as torchrun's agent does after its 30 s.
constexpr int kStopGraceSeconds = 30;

// The processes below `root` (children, theirs, ...), from /proc: mpirun's ranks run in process
// groups of their own, so no group signal reaches them.
std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  for (const auto& e : std::filesystem::directory_iterator("/proc", std::filesystem::directory_options::skip_permission_denied)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t after_name = line.rfind(')');  // "pid (comm) state ppid ...": comm may hold spaces
    if (after_name == std::string::npos) continue;
    std::istringstream rest(line.substr(after_name + 1));
    char state = 0;
    pid_t ppid = 0;
    if (rest >> state >> ppid) parent_of.emplace_back(pid_t(std::stol(name)), ppid);
  }
  std::vector<pid_t> found = {root};
  for (size_t i = 0; i < found.size(); ++i)
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == found[i]) found.push_back(pid);
  found.erase(found.begin());
  return found;
}

void signal_all(const std::vector<pid_t>& pids, int sig) {
  for (pid_t p : pids)
    if (p > 0) ::kill(p, sig);
}

void say_killed(int nproc) {
  std::cerr << "tiny_llama: the " << nproc << " ranks had not stopped " << kStopGraceSeconds
            << " s after the signal: killed (their last checkpoint is the last one written)\n";
}

[[noreturn]] void exec_argv(std::vector<std::string> argv) {
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  ::execvp(c[0], c.data());
  std::cerr << "tiny_llama: cannot start " << argv[0] << ": " << std::strerror(errno) << "\n";
  ::_exit(127);
}

int launch_gpu_ranks(int nproc, const std::vector<std::string>& args) {
  // Rank 0's socket, listening before any rank starts: nothing can take the port in between, and
  // the ranks that connect before rank 0 accepts wait in its queue.
  int bound = 0;
  const int listener = listen_for_ranks(0, &bound, "a free port");
  const std::string port = std::to_string(bound);
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast, in every rank
  std::vector<pid_t> ranks;
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) usage_fail("--nproc-per-node: fork: " + std::string(std::strerror(errno)));
    if (pid == 0) {
      for (auto [name, value] : {std::pair{"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)},
                                 {"WORLD_SIZE", std::to_string(nproc)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
                                 {"MASTER_ADDR", std::string("127.0.0.1")}, {"MASTER_PORT", port},
                                 {"TT_LAUNCHER", std::string("built-in")}})
        ::setenv(name, value.c_str(), 1);
      if (r == 0) {  // rank 0 keeps the socket across exec; the others' copies close
        ::fcntl(listener, F_SETFD, 0);
        ::setenv(kRank0Listener, std::to_string(listener).c_str(), 1);
      }
      std::vector<std::string> argv = {self_path()};
      argv.insert(argv.end(), args.begin(), args.end());
      exec_argv(argv);
    }
    ranks.push_back(pid);
  }
  ::close(listener);
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  int code = 0, running = nproc;
  bool killed = false;
  int forwarded = 0;  // the signals passed on
  auto stop_ranks = [&](int sig) { signal_all(ranks, sig); };
  std::chrono::steady_clock::time_point kill_at{};
  while (running > 0) {
    if (signals_received > forwarded) {  // every rank gets it: they stop after the same step (a second: at once)
      stop_ranks(forwarded_signal);
      stop_ranks(SIGCONT);
      if (!forwarded) kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(kStopGraceSeconds);
      forwarded = signals_received;
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done <= 0) {
      if (kill_at != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() > kill_at && !killed) {
        if (forwarded) say_killed(nproc);
        stop_ranks(SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (ranks[r] != done) continue;
      ranks[r] = -1;
      --running;
      const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (rc != 0 && code == 0) {
        code = rc;
        if (!forwarded_signal) {
          std::cerr << "tiny_llama: rank " << r << " of " << nproc << " "
                    << (WIFEXITED(status) ? "exited with code " + std::to_string(rc)
                                          : "was killed by signal " + std::to_string(WTERMSIG(status)))
                    << ": stopping the other ranks\n";
          stop_ranks(SIGTERM);
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        }
      }
    }
  }
  return code;
}

int launch_cpu_ranks(int nproc, const std::vector<std::string>& args);

}  // namespace

std::string self_path() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) usage_fail("cannot find this program's path");
  self[n] = '\0';
  return self;
}

int launcher_ranks(const std::vector<std::string>& args) {
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc-per-node") value = i + 1 < args.size() ? args[i + 1] : "";
    if (args[i].rfind("--nproc-per-node=", 0) == 0) value = args[i].substr(17);
    if (args[i] == "--nproc-per-node" || args[i].rfind("--nproc-per-node=", 0) == 0) {
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 2 ||
          std::stoi(value) < 1 || std::stoi(value) > 64)
        usage_fail("--nproc-per-node: a count of 1 to 64 processes (got '" + value + "')");
      return std::stoi(value);
    }
  }
  return 0;
}

std::vector<std::string> without_launcher_flag(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc-per-node") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc-per-node=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int launch_local_ranks(int nproc, const std::vector<std::string>& args, bool cuda) {
  return cuda ? launch_gpu_ranks(nproc, args) : launch_cpu_ranks(nproc, args);
}

namespace {

// CPU ranks: under mpirun, which this process waits for. mpirun runs in a process group of its
// own, so that a Ctrl-C in the terminal reaches this process alone, and ends with it (a parent
// death signal). A SIGINT or SIGTERM here goes to the ranks as SIGUSR1 or SIGUSR2, which mpirun
// passes on as they are (src/core/signals.h): every rank stops after the same step and writes
// its checkpoint. mpirun's own handling of SIGINT and SIGTERM would send the ranks SIGTERM and,
// a second later, SIGKILL, cutting a checkpoint short. The job's exit code is then the signal's,
// 128 + its number, as for one process.
// Each rank gets its share of the cores for its OpenMP threads (OMP_NUM_THREADS, unless the user
// set it): all of them each, the ranks' threads would fight over every core.
int launch_cpu_ranks(int nproc, const std::vector<std::string>& args) {
  if (!std::getenv("OMP_NUM_THREADS")) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    ::setenv("OMP_NUM_THREADS", std::to_string(std::max(1, cores / nproc)).c_str(), 1);
  }
  ::setenv(kLaunchedRank, "cpu", 1);
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(nproc), "--oversubscribe", "--bind-to", "none",
                                   "-x", "OMP_NUM_THREADS", "-x", kLaunchedRank};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(self_path());
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t mpirun = ::fork();
  if (mpirun < 0) usage_fail("--nproc-per-node: fork: " + std::string(std::strerror(errno)));
  if (mpirun == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    exec_argv(argv);
  }
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  bool killed = false;
  int forwarded = 0;  // the signals passed on
  std::chrono::steady_clock::time_point kill_at{};
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(mpirun, &status, WNOHANG);
    if (done == mpirun) break;
    if (done < 0 && errno != EINTR) return 1;
    if (signals_received > forwarded) {  // mpirun passes them on (a second: the ranks stop at once)
      ::kill(mpirun, forwarded_signal == SIGINT ? SIGUSR1 : SIGUSR2);
      signal_all(descendants(mpirun), SIGCONT);
      if (!forwarded) kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(kStopGraceSeconds);
      forwarded = signals_received;
    }
    if (forwarded && !killed && std::chrono::steady_clock::now() > kill_at) {
      say_killed(nproc);
      signal_all(descendants(mpirun), SIGKILL);
      ::kill(mpirun, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (killed) return 128 + SIGKILL;
  if (forwarded_signal) return 128 + forwarded_signal;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

}  // namespace tt
