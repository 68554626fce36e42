#include "parallel/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "core/error.h"

namespace tt {

namespace {

using Clock = std::chrono::steady_clock;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// The built-in launcher's socket, inherited (kRank0Listener), -1 without one: it must listen on
// `port`; it is closed on exec from here on.
int inherited_listener(int port) {
  const char* value = std::getenv(kRank0Listener);
  if (!value) return -1;
  ::unsetenv(kRank0Listener);
  const std::string text = value;
  const bool digits = !text.empty() && text.size() < 9 && text.find_first_not_of("0123456789") == std::string::npos;
  const int fd = digits ? std::stoi(text) : -1;
  int listening = 0;
  socklen_t size = sizeof listening;
  sockaddr_in6 a{};
  socklen_t len = sizeof a;
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || !listening ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin6_family != AF_INET6 ||
      ntohs(a.sin6_port) != port)
    usage_fail(std::string(kRank0Listener) + "='" + text + "' is not a socket listening on MASTER_PORT " +
               std::to_string(port) + " (the built-in launcher sets it for rank 0; unset it)");
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

// Connects to host:port, trying again until the deadline while nobody listens there yet (rank 0
// may start after the others). `where` re-reads the address for each try (a file may change).
int connect_to(const std::function<std::pair<std::string, int>()>& where, Clock::time_point deadline, int timeout_s) {
  std::string last = "nothing to connect to yet";
  while (true) {
    const auto [host, port] = where();
    if (!host.empty()) {
      addrinfo hints{}, *found = nullptr;
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      if (rc != 0)
        usage_fail("the master address '" + host + "' does not resolve (" + ::gai_strerror(rc) +
                   "): set MASTER_ADDR to rank 0's host name or IP address");
      for (addrinfo* ai = found; ai; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          const int on = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          return fd;
        }
        last = host + ":" + std::to_string(port) + ": " + std::strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    if (Clock::now() > deadline)
      usage_fail("rank 0 was not reachable within " + std::to_string(timeout_s) + " s (" + last +
                 "): check MASTER_ADDR and MASTER_PORT, or --dist-timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw std::runtime_error(std::strerror(errno));
    p += k, n -= size_t(k);
  }
}

// Reads n bytes, waiting until `deadline` at most (Clock::time_point::max(): no limit).
bool read_all(int fd, void* data, size_t n, Clock::time_point deadline = Clock::time_point::max()) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (deadline != Clock::time_point::max()) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd pf{fd, POLLIN, 0};
      if (ms <= 0 || ::poll(&pf, 1, int(std::min<int64_t>(ms, INT32_MAX))) <= 0) return false;
    }
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= size_t(k);
  }
  return true;
}

// write_all, where a lost connection fails naming `peer`.
void write_to(int fd, const void* data, size_t n, const char* peer) {
  try {
    write_all(fd, data, n);
  } catch (const std::runtime_error& e) {
    fail(std::string("rendezvous: lost the connection to ") + peer + ": " + e.what());
  }
}

// `bytes` as the rendezvous and torchrun's store frame them: a 64-bit length, then the bytes.
void send_message(int fd, const std::string& bytes, const char* peer) {
  const uint64_t n = bytes.size();
  write_to(fd, &n, sizeof n, peer);
  write_to(fd, bytes.data(), bytes.size(), peer);
}

// torchrun's agent store (PyTorch's TCPStore server, on MASTER_PORT): under torchrun rank 0
// listens on a port the kernel picks and sets it there under a key of the run; the others wait
// for the key and read it. Its wire format: after connecting, the query VALIDATE and its magic
// number; SET, a key and a value; WAIT, a count of keys and the keys, answered by one byte when
// they are all set; GET, a key, answered by its value. Keys and values go as a 64-bit length and
// the bytes.
class AgentStore {
 public:
  AgentStore(const std::string& host, int port, Clock::time_point deadline, int timeout_s)
      : fd_(connect_to([&] { return std::pair{host, port}; }, deadline, timeout_s)) {
    query(kValidate);
    const uint32_t magic = 0x3C85F7CE;
    put(&magic, sizeof magic);
  }
  ~AgentStore() { ::close(fd_); }
  AgentStore(const AgentStore&) = delete;
  AgentStore& operator=(const AgentStore&) = delete;

  void set(const std::string& key, const std::string& value) {
    query(kSet);
    send_message(fd_, key, kPeer);
    send_message(fd_, value, kPeer);
  }
  // The value of `key` once some rank has set it; "" if it is not set by the deadline.
  std::string wait_get(const std::string& key, Clock::time_point deadline) {
    query(kWait);
    const uint64_t one = 1;
    put(&one, sizeof one);
    send_message(fd_, key, kPeer);
    uint8_t done = 1;
    if (!read_all(fd_, &done, 1, deadline) || done != 0) return "";
    query(kGet);
    send_message(fd_, key, kPeer);
    uint64_t n = 0;
    std::string value;
    if (!read_all(fd_, &n, sizeof n, deadline) || n > 4096) return "";
    value.resize(size_t(n));
    return read_all(fd_, value.data(), value.size(), deadline) ? value : "";
  }

 private:
  enum Query : uint8_t { kValidate = 0, kSet = 1, kGet = 3, kWait = 6 };
  static constexpr const char* kPeer = "torchrun's store";
  void put(const void* data, size_t n) { write_to(fd_, data, n, kPeer); }  // unframed: a query, its fixed fields
  void query(Query q) { put(&q, 1); }
  int fd_;
};

// The key of rank 0's port in the agent store: one for each run and restart of the workers.
std::string agent_store_key() {
  const char* run = std::getenv("TORCHELASTIC_RUN_ID");
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return std::string("tiny_llama/rank0_port/") + (run ? run : "") + "/" + (restart ? restart : "0");
}

}  // namespace

int listen_for_ranks(int port, int* bound_port, const std::string& what) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("rendezvous: socket: " + std::string(std::strerror(errno)));
  const int on = 1, off = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // IPv4 clients too
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  a.sin6_port = htons(uint16_t(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 256) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    usage_fail("rank 0 cannot listen on " + what + " (port " + std::to_string(port) + "): " + why);
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *bound_port = ntohs(a.sin6_port);
  return fd;
}

void Rendezvous::send(int fd, const std::string& bytes) { send_message(fd, bytes, "another rank"); }

std::string Rendezvous::receive(int fd, int from_rank, Clock::time_point deadline) {
  uint64_t n = 0;
  std::string bytes;
  const std::string who = "rank " + std::to_string(from_rank);
  bool ok = read_all(fd, &n, sizeof n, deadline);
  if (ok && n > kMaxMessageBytes)
    fail(who + " announced a message of " + std::to_string(n) + " bytes (the rendezvous carries at most " +
         std::to_string(kMaxMessageBytes) + "): not one of this job's ranks?");
  if (ok) {
    bytes.resize(size_t(n));
    ok = read_all(fd, bytes.data(), bytes.size(), deadline);
  }
  if (!ok && Clock::now() >= deadline)
    usage_fail(who + " sent nothing within " +
               (deadline == deadline_ ? "the " + std::to_string(timeout_s_) + " s of --dist-timeout" : "its time") +
               " while the ranks met");
  if (!ok)
    fail(who + " of " + std::to_string(world_.size) + " was lost (its process ended or its connection closed)");
  return bytes;
}

Rendezvous::Rendezvous(const World& world, const std::string& init, int timeout_s)
    : world_(world), timeout_s_(timeout_s), deadline_(Clock::now() + std::chrono::seconds(timeout_s)) {
  const auto deadline = deadline_;
  if (init != "env" && init != "mpi" && init.rfind("file:", 0) != 0)
    usage_fail("--dist-init: env, mpi or file:PATH (got '" + init + "')");
  if (init == "env" && world_.master_addr.empty())
    usage_fail("the ranks need rank 0's address: set MASTER_ADDR and MASTER_PORT, or use --dist-init file:PATH");
  if (init == "file:") usage_fail("--dist-init file:PATH needs a path");
  // Under torchrun the agent's store listens on MASTER_PORT: rank 0 listens on a free port and
  // tells the others through the store.
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent_store = init == "env" && agent && (std::string(agent) == "True" || std::string(agent) == "1");

  if (world_.rank == 0) {
    int port = 0;
    int listener = inherited_listener(world_.master_port);  // the built-in launcher's, on MASTER_PORT
    if (listener >= 0 && (init != "env" || agent_store)) ::close(listener), listener = -1;
    if (listener >= 0) port = world_.master_port;
    else if (init == "env" && !agent_store) listener = listen_for_ranks(world_.master_port, &port, "MASTER_PORT");
    else listener = listen_for_ranks(0, &port, "a free port");
    std::unique_ptr<AgentStore> store;  // open until the ranks have met
    if (agent_store) {
      store = std::make_unique<AgentStore>(world_.master_addr, world_.master_port, deadline, timeout_s);
      store->set(agent_store_key(), std::to_string(port));
    }
    const std::string address = host_name() + " " + std::to_string(port);
    if (init == "mpi") mpi_broadcast_from_rank0(world_, address);
    if (init.rfind("file:", 0) == 0) {
      const std::string path = init.substr(5), tmp = path + ".tmp." + std::to_string(::getpid());
      {
        std::ofstream out(tmp);
        out << address << "\n";
        out.close();
        if (!out) {
          std::remove(tmp.c_str());
          usage_fail("--dist-init: cannot write " + tmp);
        }
      }
      if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        usage_fail("--dist-init: cannot write " + path);
      }
      file_.path = path;
    }
    control_.assign(size_t(world_.size), -1);
    liveness_.assign(size_t(world_.size), -1);
    meet_ranks(listener, deadline);
  } else {
    std::function<std::pair<std::string, int>()> where;
    if (agent_store) {
      AgentStore store(world_.master_addr, world_.master_port, deadline, timeout_s);
      const std::string port = store.wait_get(agent_store_key(), deadline);
      if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(port) < 1 || std::stoi(port) > 65535)
        usage_fail("rank 0 did not say where it listens within " + std::to_string(timeout_s) +
                   " s (torchrun's store on MASTER_ADDR:MASTER_PORT): check --dist-timeout");
      where = [this, p = std::stoi(port)] { return std::pair{world_.master_addr, p}; };
    } else if (init == "env") {
      where = [&] { return std::pair{world_.master_addr, world_.master_port}; };
    } else if (init == "mpi") {
      std::istringstream in(mpi_broadcast_from_rank0(world_, ""));
      std::string host;
      int port = 0;
      in >> host >> port;
      where = [host, port] { return std::pair{host, port}; };
    } else {
      const std::string path = init.substr(5);
      where = [path] {
        std::ifstream in(path);
        std::string host;
        int port = 0;
        in >> host >> port;
        return std::pair{in ? host : std::string(), port};
      };
    }
    for (int kind = 0; kind < 2; ++kind) {
      const int fd = connect_to(where, deadline, timeout_s);
      (kind == 0 ? control_ : liveness_).assign(1, fd);
      send(fd, std::string(kHello) + " " + std::to_string(world_.rank) + " " + std::to_string(world_.size) + " " +
                   std::to_string(kind));
    }
  }
}

// Rank 0 accepts connections and reads their hellos side by side, each connection with
// kHelloSeconds to say which rank it is: a stray client (a port scanner, a health check, a process
// of another job) is dropped with one line and costs the ranks none of their time, whether it says
// nothing, closes, or sends what is not a hello. A hello of another world's size, or a rank that
// two processes claim, ends the rendezvous: the job is misconfigured.
void Rendezvous::meet_ranks(int listener, Clock::time_point deadline) {
  struct Pending {
    int fd;
    Clock::time_point deadline;
    std::string bytes;  // the length (8 bytes) and the hello, as they arrive
  };
  std::vector<Pending> pending;
  const auto drop = [&](size_t i, const std::string& why) {
    std::cerr << "tiny_llama: rank 0 dropped a connection that is not one of its ranks: it " << why << std::endl;
    ::close(pending[i].fd);
    pending.erase(pending.begin() + int64_t(i));
  };
  const auto give_up = [&](const std::string& why) {
    for (const Pending& p : pending) ::close(p.fd);
    ::close(listener);
    usage_fail(why);
  };
  for (int accepted = 0; accepted < 2 * (world_.size - 1);) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      for (int r = 1; r < world_.size; ++r)
        if (control_[size_t(r)] < 0 || liveness_[size_t(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      give_up("rank(s) " + missing + " did not join within " + std::to_string(timeout_s_) + " s (" +
              std::to_string(world_.size) + " processes expected: check the launcher's world size)");
    }
    Clock::time_point wake = deadline;
    std::vector<pollfd> fds = {{listener, POLLIN, 0}};
    for (const Pending& p : pending) fds.push_back({p.fd, POLLIN, 0}), wake = std::min(wake, p.deadline);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    if (::poll(fds.data(), fds.size(), int(std::min<int64_t>(ms, INT32_MAX))) < 0 && errno != EINTR)
      give_up("rank 0 cannot wait for its ranks: " + std::string(std::strerror(errno)));
    for (size_t i = pending.size(); i-- > 0;) {  // the newest last, so that erasing keeps the rest in place
      Pending& p = pending[i];
      if (!fds[i + 1].revents) {
        if (Clock::now() >= p.deadline) drop(i, "said nothing within " + std::to_string(kHelloSeconds) + " s");
        continue;
      }
      uint64_t n = 0;
      if (p.bytes.size() >= sizeof n) std::memcpy(&n, p.bytes.data(), sizeof n);
      const size_t want = p.bytes.size() < sizeof n ? sizeof n - p.bytes.size() : sizeof n + n - p.bytes.size();
      char buf[64];
      const ssize_t k = ::recv(p.fd, buf, std::min(want, sizeof buf), MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (k <= 0) {
        drop(i, "closed before it said which rank it is");
        continue;
      }
      p.bytes.append(buf, size_t(k));
      if (p.bytes.size() < sizeof n) continue;
      std::memcpy(&n, p.bytes.data(), sizeof n);
      if (n > kMaxHelloBytes) {
        drop(i, "announced " + std::to_string(n) + " bytes, where a rank's hello is a few");
        continue;
      }
      if (p.bytes.size() < sizeof n + n) continue;
      // The hello: "tt-hello RANK SIZE KIND" (kind 0: control, 1: liveness), nothing else.
      std::istringstream hello(p.bytes.substr(sizeof n));
      std::string word;
      int r = -1, size = -1, kind = -1;
      const bool parsed = hello >> word >> r >> size >> kind && (hello >> std::ws).eof() && word == kHello;
      if (!parsed || kind < 0 || kind > 1) {
        drop(i, "sent something that is not a rank's hello");
        continue;
      }
      if (size != world_.size)
        give_up("a process of a world of " + std::to_string(size) + " joined rank 0's world of " +
                std::to_string(world_.size) + ": every rank must be given the same world size");
      std::vector<int>& slot = kind == 0 ? control_ : liveness_;
      if (r < 1 || r >= world_.size || slot[size_t(r)] >= 0)
        give_up("two processes say they are rank " + std::to_string(r) + " of " + std::to_string(world_.size) +
                " (or a process gave a rank outside the world)");
      slot[size_t(r)] = p.fd;
      pending.erase(pending.begin() + int64_t(i));
      ++accepted;
    }
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      if (pending.size() >= kMaxPending) {
        std::cerr << "tiny_llama: rank 0 dropped a connection: " << kMaxPending << " others have not said who they are yet"
                  << std::endl;
        ::close(fd);
        continue;
      }
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      pending.push_back({fd, std::min(deadline, Clock::now() + std::chrono::seconds(kHelloSeconds)), {}});
    }
  }
  for (const Pending& p : pending) ::close(p.fd);  // every rank is here: the others go unheard
  ::close(listener);
}

Rendezvous::RemovedAtEnd::~RemovedAtEnd() {
  if (!path.empty()) std::remove(path.c_str());
}

Rendezvous::~Rendezvous() {
  watching_ = false;
  if (thread_.joinable()) thread_.join();
  for (int fd : control_)
    if (fd >= 0) ::close(fd);
  for (int fd : liveness_)
    if (fd >= 0) ::close(fd);

}

std::string Rendezvous::broadcast(const std::string& bytes) {
  if (world_.rank != 0) return receive(control_[0], 0);
  for (int r = 1; r < world_.size; ++r) send(control_[size_t(r)], bytes);
  return bytes;
}

std::vector<std::string> Rendezvous::gather(const std::string& bytes) {
  if (world_.rank != 0) {
    send(control_[0], bytes);
    return {};
  }
  std::vector<std::string> all = {bytes};
  for (int r = 1; r < world_.size; ++r) all.push_back(receive(control_[size_t(r)], r));
  return all;
}

void Rendezvous::watch(std::function<std::string()> check, std::function<void(const std::string&)> stop) {
  deadline_ = Clock::time_point::max();  // the ranks have met: from now on the watchdog looks after them
  check_ = std::move(check);
  stop_ = std::move(stop);
  watching_ = true;
  thread_ = std::thread([this] { watchdog(); });
}

void Rendezvous::watchdog() {
  const std::string of = " of " + std::to_string(world_.size);
  while (watching_) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (size_t r = 0; r < liveness_.size(); ++r)
      if (liveness_[r] >= 0) {
        fds.push_back({liveness_[r], POLLIN | POLLRDHUP, 0});
        ranks.push_back(world_.rank == 0 ? int(r) : 0);
      }
    ::poll(fds.data(), fds.size(), 100);
    if (!watching_) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int lost = ranks[i];
      if (world_.rank != 0 && (fds[i].revents & POLLIN)) {  // rank 0 names the rank it lost
        uint64_t n = 0;
        int32_t named = 0;
        if (read_all(fds[i].fd, &n, sizeof n) && n == sizeof named && read_all(fds[i].fd, &named, sizeof named)) lost = named;
      }
      if (world_.rank == 0) {  // tell the others which one
        const uint64_t n = sizeof(int32_t);
        const int32_t named = lost;
        for (int fd : liveness_)
          if (fd >= 0 && fd != fds[i].fd) {
            try {
              write_all(fd, &n, sizeof n);
              write_all(fd, &named, sizeof named);
            } catch (const std::runtime_error&) {
            }
          }
      }
      watching_ = false;
      stop_("rank " + std::to_string(lost) + of + " was lost (its process ended or its connection closed): rank " +
            std::to_string(world_.rank) + " stops too");
      return;
    }
    const std::string error = check_ ? check_() : std::string();
    if (!error.empty()) {
      watching_ = false;
      stop_(error);
      return;
    }
  }
}

void Rendezvous::finish() {
  watching_ = false;
  if (thread_.joinable()) thread_.join();
  gather("done");
  broadcast("bye");
}

#ifndef TT_HAVE_MPI
std::string mpi_broadcast_from_rank0(const World&, const std::string&) {
  usage_fail("--dist-init mpi: this build has no MPI; set MASTER_ADDR and MASTER_PORT, or use --dist-init file:PATH");
}
#endif

}  // namespace tt
