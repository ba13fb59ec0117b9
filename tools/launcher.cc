// launcher: `zpp run`, a torchrun-compatible launcher for one node's ranks.
//
//   launcher --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]
//            [--socket-ifname IF] [--malloc system|jemalloc] [--bind-cores none|auto|LIST]
//            -- PROGRAM ARGS...
//
// Starts N processes with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT (and OMP_NUM_THREADS=1 and TORCH_CPP_LOG_LEVEL=FATAL unless set; GLOO_SOCKET_IFNAME
// with --socket-ifname), prefixes every output line with "[rank K] ",
// and when any rank dies (non-zero exit or signal) stops the others (SIGTERM, then SIGKILL after
// 5 s) and exits non-zero with one line naming the rank and how it died; with --max-restarts K
// it starts all local ranks again instead, up to K times (torchrun's semantics; the ranks see
// TORCHELASTIC_RESTART_COUNT, and a training job resumes from its latest checkpoint). Each rank runs in its own
// process group and dies with the launcher (PR_SET_PDEATHSIG), so no process is left behind.
// --malloc jemalloc (or ZEROPP_MALLOC=jemalloc) preloads Debian's libjemalloc2 into every rank,
// for programs without the Trainer's host block cache (zeropp/host_allocator.h) or to compare
// with it: on the 4-rank zeropp-vs-3d ZeRO-3 layout anonymous RSS grows 79-106 MB under glibc alone
// for 39 MB of live heap, 49 MB with the block cache, 44 MB with jemalloc.
// --bind-cores auto (or a CPU list such as 0-7,16; or ZEROPP_BIND_CORES) pins every local rank to
// its share of those CPUs (auto: the launcher's own CPU set), in order: with N ranks on C CPUs,
// local rank l gets CPUs [l*C/N, (l+1)*C/N) when N <= C (DeepSpeed's --bind_cores_to_rank), and
// CPU floor(l*C/N) when N > C, so consecutive ranks (a tensor-parallel group, the innermost)
// share one CPU. OMP_NUM_THREADS stays 1 unless set. On the 2-core box, 4 ranks unpinned, the
// pipeline layouts' TP pairs spent 1.27x tp2 x dp2's CPU per collective, 1.08x with each pair on
// one core (benchmarks/results/tp-wait-pinning-2026-12-07.txt, a taskset wrapper then).
// Whole steps, though, ran longer pinned when N > C (noted on stderr; see RankCpus).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "zpp run: %s\n", msg.c_str());
  std::exit(2);
}

int ParseInt(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    Die(flag + ": got '" + v + "', expected an integer in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "]");
  }
  return static_cast<int>(x);
}

struct Args {
  int nproc = -1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = -1;
  int max_restarts = 0;
  std::string socket_ifname;  // --socket-ifname: GLOO_SOCKET_IFNAME for every rank
  std::string malloc_lib;     // --malloc jemalloc: the library every rank preloads ("" = glibc's)
  std::string bind_flag;      // the flag (or variable) --bind-cores came from, for its error lines
  std::string bind_value;     // none (or ""), auto, or a CPU list
  std::vector<std::vector<int>> rank_cpus;  // per local rank, the CPUs it is pinned to (empty: not pinned)
  std::vector<std::string> program;
};

// Debian's libjemalloc2, where multiarch puts it (or ZEROPP_JEMALLOC). "" when absent.
std::string FindJemalloc() {
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("ZEROPP_JEMALLOC")) candidates.push_back(e);
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    candidates.push_back(std::string(dir) + "/libjemalloc.so.2");
  }
  for (const auto& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return "";
}

std::string MallocLibrary(const std::string& flag, const std::string& v) {
  if (v == "system" || v.empty()) return "";
  if (v != "jemalloc") Die(flag + ": got '" + v + "', expected system or jemalloc");
  const std::string lib = FindJemalloc();
  if (lib.empty()) {
    Die(flag + ": got 'jemalloc', but libjemalloc.so.2 is not installed (apt-get install libjemalloc2, or set "
        "ZEROPP_JEMALLOC to its path)");
  }
  return lib;
}

// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) Die(std::string("sched_getaffinity: ") + strerror(errno));
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return s;
}

// --bind-cores: each local rank's CPUs, in the order the list gives them (see the file comment).
std::vector<std::vector<int>> RankCpus(const std::string& flag, const std::string& v, int nproc) {
  if (v.empty() || v == "none") return {};
  const std::vector<int> allowed = AllowedCpus();
  std::vector<int> cpus;
  if (v == "auto") {
    cpus = allowed;
  } else {
    std::set<int> seen;
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = v.find(',', start);
      if (end == std::string::npos) end = v.size();
      const std::string item = v.substr(start, end - start);
      const size_t dash = item.find('-');
      const std::string lo_s = item.substr(0, dash), hi_s = dash == std::string::npos ? lo_s : item.substr(dash + 1);
      const bool digits = !lo_s.empty() && !hi_s.empty() && lo_s.size() <= 6 && hi_s.size() <= 6 &&
                          lo_s.find_first_not_of("0123456789") == std::string::npos &&
                          hi_s.find_first_not_of("0123456789") == std::string::npos;
      const int lo = digits ? std::stoi(lo_s) : -1, hi = digits ? std::stoi(hi_s) : -1;
      if (!digits || lo > hi) {
        Die(flag + ": got '" + v + "', expected none, auto, or a CPU list such as 0-3,8 ('" + item +
            "' is not a CPU or an ascending range; this launcher may use " + CpuList(allowed) + ")");
      }
      for (int c = lo; c <= hi; ++c) {
        if (!seen.insert(c).second) Die(flag + ": got '" + v + "': CPU " + std::to_string(c) + " is listed twice");
        if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
          Die(flag + ": got '" + v + "': CPU " + std::to_string(c) + " is not one this launcher may use (" +
              CpuList(allowed) + ")");
        }
        cpus.push_back(c);
      }
      start = end + 1;
    }
  }
  const int n = static_cast<int>(cpus.size());
  if (nproc > n) {
    // Measured on a 2-core box: pinned, 4-rank jobs' steps ran 1.10-1.33x as long as unpinned (the
    // 3D ones the longest), 2 ranks on 2 CPUs 0.82x: benchmarks/results/planner-local-pinning-2026-12-07.txt.
    std::fprintf(stderr,
                 "launcher: note: %s %s: %d ranks on %d CPUs, so consecutive ranks share a CPU and none may run on "
                 "another's idle one; on a 2-core box such pinned steps ran 1.10-1.33x as long as unpinned: pin only "
                 "where each rank has its own CPUs\n",
                 flag.c_str(), v.c_str(), nproc, n);
  }
  std::vector<std::vector<int>> out(nproc);
  for (int l = 0; l < nproc; ++l) {
    if (nproc <= n) {
      out[l].assign(cpus.begin() + static_cast<long>(l) * n / nproc, cpus.begin() + static_cast<long>(l + 1) * n / nproc);
    } else {
      out[l] = {cpus[static_cast<long>(l) * n / nproc]};
    }
  }
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  if (const char* m = std::getenv("ZEROPP_MALLOC")) a.malloc_lib = MallocLibrary("ZEROPP_MALLOC", m);
  if (const char* b = std::getenv("ZEROPP_BIND_CORES")) {
    a.bind_flag = "ZEROPP_BIND_CORES";
    a.bind_value = b;
  }
  int i = 1;
  auto value = [&](const std::string& flag) -> std::string {
    if (i + 1 >= argc) Die(flag + ": missing value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--") {
      ++i;
      break;
    }
    if (f == "--nproc-per-node" || f == "--nproc_per_node") {
      a.nproc = ParseInt(f, value(f), 1, 1024);
    } else if (f == "--nnodes") {
      a.nnodes = ParseInt(f, value(f), 1, 1 << 16);
    } else if (f == "--node-rank" || f == "--node_rank") {
      a.node_rank = ParseInt(f, value(f), 0, (1 << 16) - 1);
    } else if (f == "--master-addr" || f == "--master_addr") {
      a.master_addr = value(f);
    } else if (f == "--master-port" || f == "--master_port") {
      a.master_port = ParseInt(f, value(f), 1, 65535);
    } else if (f == "--socket-ifname" || f == "--socket_ifname") {
      a.socket_ifname = value(f);
      if (a.socket_ifname.empty()) Die("--socket-ifname: got '', expected a network interface name (see `ip addr`)");
    } else if (f == "--max-restarts" || f == "--max_restarts") {
      a.max_restarts = ParseInt(f, value(f), 0, 1000);
    } else if (f == "--malloc") {
      a.malloc_lib = MallocLibrary(f, value(f));
    } else if (f == "--bind-cores" || f == "--bind_cores") {
      a.bind_flag = "--bind-cores";
      a.bind_value = value(f);
    } else if (f == "-h" || f == "--help") {
      std::printf(
          "usage: zpp run --nproc-per-node N [--nnodes M --node-rank R --master-addr A "
          "--master-port P] [--socket-ifname IF] [--max-restarts K] [--malloc system|jemalloc] "
          "[--bind-cores none|auto|LIST] -- PROGRAM ARGS...\n");
      std::exit(0);
    } else {
      Die("unknown flag '" + f + "' (expected --nproc-per-node, --nnodes, --node-rank, "
          "--master-addr, --master-port, --socket-ifname, --max-restarts, --malloc, --bind-cores, then -- PROGRAM "
          "ARGS)");
    }
  }
  for (; i < argc; ++i) a.program.push_back(argv[i]);
  if (a.nproc < 0) Die("--nproc-per-node is required (an integer >= 1)");
  if (a.node_rank >= a.nnodes) {
    Die("--node-rank: got " + std::to_string(a.node_rank) + ", expected < --nnodes (" +
        std::to_string(a.nnodes) + ")");
  }
  if (a.program.empty()) Die("no program given (expected: -- PROGRAM ARGS...)");
  if (a.max_restarts > 0 && a.nnodes > 1) {
    Die("--max-restarts: got " + std::to_string(a.max_restarts) + " with --nnodes " + std::to_string(a.nnodes) +
        ", expected --nnodes 1 (restarts across nodes need a rendezvous this launcher does not have)");
  }
  a.rank_cpus = RankCpus(a.bind_flag, a.bind_value, a.nproc);
  return a;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string ResolveProgram(const std::string& prog) {
  if (prog.find('/') != std::string::npos) {
    if (!IsExecutableFile(prog)) Die("program '" + prog + "' does not exist or is not executable");
    return prog;
  }
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + prog;
    if (IsExecutableFile(cand)) return cand;
    start = end + 1;
  }
  Die("program '" + prog + "' not found on PATH");
}

// Binds addr:port (port 0 = any); returns the bound port, or -1 with errno set.
int TryBind(const std::string& addr, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
      close(fd);
      Die("--master-addr: cannot resolve '" + addr + "'");
    }
    sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 1) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

// A free port for rank 0's store, chosen below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range). A port bound at 0 comes from that range, the one every outgoing
// connection and every Gloo listener also draws from, so between this check and rank 0's listen
// another job's connection could take it (a checkpoint test on 4 ranks failed so, with EADDRINUSE,
// beside a parallel test). Below the range only an explicit listener can; the window between
// this check and rank 0's listen remains for those. Handing rank 0 this socket itself
// (c10d::TCPStoreOptions::masterListenFd) would close it, at the price of keeping one listener
// alive across restarts; not done. Falls back to port 0 where the range leaves no room below it.
int PickPort(const std::string& addr) {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  const int first = 10000, last = low - 1;
  if (last - first >= 1000) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(first, last);
    for (int i = 0; i < 200; ++i) {
      const int port = TryBind(addr, pick(rng));
      if (port > 0) return port;
    }
  }
  return TryBind(addr, 0);
}

struct Rank {
  int local = 0;
  int global = 0;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out_buf, err_buf;
  bool exited = false;
  int status = 0;
};

volatile sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

void EmitLines(Rank& r, std::string& buf, FILE* to, bool flush_all) {
  size_t pos;
  while ((pos = buf.find('\n')) != std::string::npos) {
    std::fprintf(to, "[rank %d] %.*s\n", r.global, static_cast<int>(pos), buf.data());
    buf.erase(0, pos + 1);
  }
  if (flush_all && !buf.empty()) {
    std::fprintf(to, "[rank %d] %s\n", r.global, buf.c_str());
    buf.clear();
  }
  std::fflush(to);
}

std::string Describe(const Rank& r) {
  std::string who = "rank " + std::to_string(r.global) + " (pid " + std::to_string(r.pid) + ")";
  if (WIFSIGNALED(r.status)) {
    int sig = WTERMSIG(r.status);
    const char* abbrev = sigabbrev_np(sig);
    return who + " was killed by signal " + std::to_string(sig) + " (SIG" + (abbrev ? abbrev : "?") +
           ")";
  }
  return who + " exited with code " + std::to_string(WEXITSTATUS(r.status));
}

bool Failed(const Rank& r) {
  return r.exited && (WIFSIGNALED(r.status) || WEXITSTATUS(r.status) != 0);
}

// How one start of all local ranks ended.
struct Outcome {
  int code = 0;               // the launcher's exit code for it
  std::string failure;        // "" or the first failed rank, described
  int signal = 0;             // the launcher itself was interrupted
};

// Starts every local rank and supervises them until all have exited (attempt = restart count).
Outcome RunOnce(const Args& args, const std::string& program, int attempt);

}  // namespace

int main(int argc, char** argv) {
  Args args = Parse(argc, argv);
  std::string program = ResolveProgram(args.program[0]);
  const bool pick_port = args.master_port < 0 && args.nnodes == 1;
  if (args.master_port < 0) {
    if (args.nnodes == 1) {
      args.master_port = PickPort(args.master_addr);
      if (args.master_port < 0) Die("cannot find a free port on " + args.master_addr + ": " + strerror(errno));
    } else {
      args.master_port = 29500;
    }
  } else if (args.node_rank == 0 && TryBind(args.master_addr, args.master_port) < 0) {
    Die("--master-port " + std::to_string(args.master_port) + " is in use on " + args.master_addr +
        " (" + strerror(errno) + "); choose another port");
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // torchrun's semantics: when a rank fails, every local rank is stopped and all are started
  // again, up to --max-restarts times (TORCHELASTIC_RESTART_COUNT tells them which start this is;
  // a training program resumes from its latest checkpoint).
  for (int attempt = 0;; ++attempt) {
    Outcome o = RunOnce(args, program, attempt);
    if (o.failure.empty() || o.signal != 0 || attempt >= args.max_restarts) {
      if (!o.failure.empty()) std::fprintf(stderr, "zpp run: %s\n", o.failure.c_str());
      if (o.signal != 0) std::fprintf(stderr, "zpp run: interrupted by signal %d; stopped all ranks\n", o.signal);
      return o.code;
    }
    std::fprintf(stderr, "zpp run: %s; restarting all %d local ranks (restart %d of %d)\n", o.failure.c_str(),
                 args.nproc, attempt + 1, args.max_restarts);
    if (pick_port) {
      args.master_port = PickPort(args.master_addr);
      if (args.master_port < 0) Die("cannot find a free port on " + args.master_addr + ": " + strerror(errno));
    }
  }
}

namespace {

Outcome RunOnce(const Args& args, const std::string& program, int attempt) {
  const int world = args.nnodes * args.nproc;
  std::vector<Rank> ranks(args.nproc);
  const pid_t launcher_pid = getpid();
  for (int l = 0; l < args.nproc; ++l) {
    Rank& r = ranks[l];
    r.local = l;
    r.global = args.node_rank * args.nproc + l;
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) Die(std::string("pipe: ") + strerror(errno));
    pid_t pid = fork();
    if (pid < 0) Die(std::string("fork: ") + strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher_pid) _exit(1);
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]);
      close(out[1]);
      close(err[0]);
      close(err[1]);
      setenv("ZEROPP_LAUNCHER", "1", 1);
      setenv("RANK", std::to_string(r.global).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(l).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(args.nproc).c_str(), 1);
      setenv("GROUP_RANK", std::to_string(args.node_rank).c_str(), 1);
      setenv("MASTER_ADDR", args.master_addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(args.master_port).c_str(), 1);
      setenv("OMP_NUM_THREADS", "1", 0);
      // LibTorch's own log lines (a TCPStore connect retry prints a whole backtrace) stay off the
      // terminal; the rank's own error line says what failed. Set TORCH_CPP_LOG_LEVEL=WARNING to see them.
      setenv("TORCH_CPP_LOG_LEVEL", "FATAL", 0);
      if (!args.socket_ifname.empty()) setenv("GLOO_SOCKET_IFNAME", args.socket_ifname.c_str(), 1);
      if (!args.malloc_lib.empty()) {
        const char* pre = std::getenv("LD_PRELOAD");
        const std::string v = args.malloc_lib + (pre && *pre ? std::string(":") + pre : std::string());
        setenv("LD_PRELOAD", v.c_str(), 1);
      }
      if (!args.rank_cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int c : args.rank_cpus[l]) CPU_SET(c, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
          std::fprintf(stderr, "--bind-cores: cannot pin local rank %d to CPUs %s: %s\n", l,
                       CpuList(args.rank_cpus[l]).c_str(), strerror(errno));
          _exit(127);
        }
      }
      setenv("TORCHELASTIC_RESTART_COUNT", std::to_string(attempt).c_str(), 1);
      setenv("TORCHELASTIC_MAX_RESTARTS", std::to_string(args.max_restarts).c_str(), 1);
      std::vector<char*> av;
      for (auto& s : args.program) av.push_back(const_cast<char*>(s.c_str()));
      av.push_back(nullptr);
      execv(program.c_str(), av.data());
      std::fprintf(stderr, "exec %s: %s\n", program.c_str(), strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    r.pid = pid;
    r.out_fd = out[0];
    r.err_fd = err[0];
  }

  const Rank* first_failure = nullptr;
  int stop_signal = 0;
  bool stopping = false;
  Clock::time_point kill_deadline;
  auto stop_all = [&](int sig) {
    for (auto& r : ranks) {
      if (!r.exited) kill(-r.pid, sig);
    }
  };

  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, bool>> owners;  // (rank, is_stdout)
    for (auto& r : ranks) {
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.push_back({&r, true});
      }
      if (r.err_fd >= 0) {
        fds.push_back({r.err_fd, POLLIN, 0});
        owners.push_back({&r, false});
      }
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 100);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Rank& r = *owners[k].first;
      bool is_out = owners[k].second;
      char buf[65536];
      ssize_t n = read(fds[k].fd, buf, sizeof(buf));
      std::string& acc = is_out ? r.out_buf : r.err_buf;
      FILE* to = is_out ? stdout : stderr;
      if (n > 0) {
        acc.append(buf, n);
        EmitLines(r, acc, to, false);
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        EmitLines(r, acc, to, true);
        close(fds[k].fd);
        (is_out ? r.out_fd : r.err_fd) = -1;
      }
    }
    // Reap.
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& r : ranks) {
        if (r.pid != pid) continue;
        r.exited = true;
        r.status = status;
        if (Failed(r) && first_failure == nullptr && !stopping) {
          first_failure = &r;
          stopping = true;
          stop_all(SIGTERM);
          kill_deadline = Clock::now() + std::chrono::seconds(5);
        }
      }
    }
    if (g_signal != 0 && !stopping) {
      stop_signal = g_signal;
      stopping = true;
      stop_all(SIGTERM);
      kill_deadline = Clock::now() + std::chrono::seconds(5);
    }
    if (stopping && Clock::now() > kill_deadline) {
      stop_all(SIGKILL);
      kill_deadline = Clock::now() + std::chrono::hours(1);
    }
    bool all_exited = true;
    for (auto& r : ranks) all_exited = all_exited && r.exited;
    if (all_exited) {
      // Grandchildren may hold the pipes; their process groups are killed, then drained.
      for (auto& r : ranks) kill(-r.pid, SIGKILL);
      bool open = false;
      for (auto& r : ranks) open = open || r.out_fd >= 0 || r.err_fd >= 0;
      if (!open) break;
    }
  }

  Outcome o;
  if (stop_signal != 0) {
    o.signal = stop_signal;
    o.code = 128 + stop_signal;
  }
  if (first_failure != nullptr) {
    int others = 0;
    for (auto& r : ranks) others += (&r != first_failure) ? 1 : 0;
    o.failure = Describe(*first_failure) + "; stopped the other " + std::to_string(others) + " local rank(s)";
    o.code = WIFSIGNALED(first_failure->status) ? 128 + WTERMSIG(first_failure->status)
                                                : WEXITSTATUS(first_failure->status);
  }
  return o;
}

}  // namespace
