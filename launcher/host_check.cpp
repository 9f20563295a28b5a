// Host resolution, ssh-port probes and the --check table.
#include "host_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <future>
#include <iostream>
#include <set>

#include "core/error.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

// This machine's own addresses (every interface) and host name.
struct LocalIdentity {
  std::set<std::string> addresses;
  std::string hostname;
};

LocalIdentity local_identity() {
  LocalIdentity id;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next)
      if (a->ifa_addr && (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
        id.addresses.insert(address_text(a->ifa_addr));
    freeifaddrs(list);
  }
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) id.hostname = name;
  return id;
}

bool loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  return false;
}

// Connects to addr:port and waits for the ssh server's banner ("SSH-2.0-..."),
// all within timeout_s. A banner, not just a connection: some networks accept
// every TCP connection and only the server's first words show one is there.
// Empty string: an ssh server answered.
std::string probe_ssh(const sockaddr* addr, socklen_t len, int port, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto ms_left = [&] {
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  };
  sockaddr_storage target{};
  std::memcpy(&target, addr, len);
  if (target.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&target)->sin_port = htons(static_cast<uint16_t>(port));
  else
    reinterpret_cast<sockaddr_in6*>(&target)->sin6_port = htons(static_cast<uint16_t>(port));
  const int fd = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fmt::format("cannot open a socket ({})", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  int err = connect(fd, reinterpret_cast<sockaddr*>(&target), len) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, ms_left()) <= 0)
      return fmt::format("no answer on ssh port {} within {:g} s (host down, unreachable or filtered)", port,
                         timeout_s);
    socklen_t elen = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
  }
  if (err == ECONNREFUSED) return fmt::format("connection refused on ssh port {} (no ssh server listening?)", port);
  if (err != 0) return fmt::format("cannot reach ssh port {} ({})", port, std::strerror(err));
  std::string banner;
  while (banner.size() < 4) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms_left()) <= 0)
      return fmt::format("port {} accepted a connection but no ssh server answered within {:g} s", port, timeout_s);
    char buf[256];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return fmt::format("port {} closed the connection without an ssh greeting", port);
    banner.append(buf, static_cast<size_t>(n));
  }
  if (banner.rfind("SSH-", 0) != 0) return fmt::format("port {} answers, but not as an ssh server", port);
  return "";
}

HostStatus probe_one(const Host& host, const LocalIdentity& me, int port, double timeout_s) {
  HostStatus s{host.name, "", false, ""};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.name.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    s.problem = fmt::format("does not resolve ({})", gai_strerror(rc));
    return s;
  }
  s.address = address_text(res->ai_addr);
  s.local = host.name == "localhost" || host.name == me.hostname;
  for (addrinfo* a = res; a && !s.local; a = a->ai_next)
    s.local = loopback(a->ai_addr) || me.addresses.count(address_text(a->ai_addr)) > 0;
  if (!s.local) s.problem = probe_ssh(res->ai_addr, res->ai_addrlen, port, timeout_s);
  freeaddrinfo(res);
  return s;
}

// The last non-empty line of a command's output: what went wrong, usually.
std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (const size_t nl = text.rfind('\n'); nl != std::string::npos) text = text.substr(nl + 1);
  return text.empty() ? "no output" : text;
}

std::vector<Host> or_this_host(const std::vector<Host>& hosts) {
  if (!hosts.empty()) return hosts;
  return {Host{"localhost", 1, "this host"}};
}

}  // namespace

std::vector<HostStatus> probe_hosts(const std::vector<Host>& hosts, int ssh_port, double timeout_s) {
  const LocalIdentity me = local_identity();
  const int port = ssh_port > 0 ? ssh_port : 22;
  std::vector<std::future<HostStatus>> pending;
  for (const Host& h : hosts)
    pending.push_back(std::async(std::launch::async, [&, h] { return probe_one(h, me, port, timeout_s); }));
  std::vector<HostStatus> out;
  for (auto& f : pending) out.push_back(f.get());
  return out;
}

void require_reachable(const std::vector<Host>& hosts, const std::vector<HostStatus>& status) {
  int bad = 0;
  size_t first = 0;
  for (size_t i = status.size(); i-- > 0;)
    if (!status[i].problem.empty()) {
      ++bad;
      first = i;
    }
  if (bad == 0) return;
  const HostStatus& s = status[first];
  LS_INPUT_ERROR("host '{}' ({}{}): {}{}", s.name, hosts[first].origin, s.address.empty() || s.address == s.name ? "" : ", " + s.address,
                 s.problem, bad > 1 ? fmt::format(" (and {} more host{} with problems; see --check)", bad - 1,
                                                  bad == 2 ? "" : "s")
                                    : "");
}

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s) {
  CommandResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.output = fmt::format("cannot create a pipe ({})", std::strerror(errno));
    return r;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    r.output = fmt::format("cannot fork ({})", std::strerror(errno));
    return r;
  }
  if (pid == 0) {  // child: own process group (so a timeout kills everything it started), no stdin
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    const std::string msg = fmt::format("cannot run {}: {}\n", argv[0], std::strerror(errno));
    (void)!write(1, msg.data(), msg.size());
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;  // the deadline check above ends the loop
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // every writer closed: the command (and what it started) is done
    if (r.output.size() < (1 << 20)) r.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (r.timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!r.timed_out && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

bool check_hosts(const LaunchConfig& config, const std::vector<Host>& given, const std::string& trainer) {
  const std::vector<Host> hosts = or_this_host(given);
  constexpr double kProbeSeconds = 3;
  static constexpr double kCommandSeconds = 30;
  const std::vector<HostStatus> status = probe_hosts(hosts, config.ssh_port, kProbeSeconds);

  // The trainer's own words: "lockstep 0.1.0 build 1a2b...".
  auto version_of = [](const CommandResult& r) -> std::pair<std::string, std::string> {  // build, problem
    if (r.timed_out) return {"", fmt::format("trainer --version did not finish within {:g} s", kCommandSeconds)};
    const size_t at = r.output.find("lockstep ");
    if (r.exit_code == 0 && at != std::string::npos) {
      const size_t end = r.output.find('\n', at);
      return {r.output.substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9), ""};
    }
    return {"", fmt::format("exit {}: {}", r.exit_code, last_line(r.output))};
  };
  const auto local = version_of(run_command({trainer, "--version"}, kCommandSeconds));

  std::vector<std::future<std::pair<std::string, std::string>>> pending;
  for (size_t i = 0; i < hosts.size(); ++i) {
    pending.push_back(std::async(std::launch::async, [&, i]() -> std::pair<std::string, std::string> {
      const HostStatus& s = status[i];
      if (!s.problem.empty()) return {"", s.problem};
      if (s.local) return local;
      std::vector<std::string> argv{"ssh"};
      for (auto& o : ssh_options(config)) argv.push_back(o);
      argv.push_back(hosts[i].name);
      argv.push_back(shell_join({trainer, "--version"}));
      const CommandResult r = run_command(argv, kCommandSeconds);
      if (r.exit_code == 255) return {"", "ssh failed: " + last_line(r.output)};
      return version_of(r);
    }));
  }
  struct Row {
    std::string host, address, ssh, build, status;
  };
  std::vector<Row> rows;
  bool all_ok = true;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const auto [build, problem] = pending[i].get();
    Row row{hosts[i].name, status[i].address.empty() ? "-" : status[i].address,
            status[i].local ? "local" : (status[i].problem.empty() ? "ok" : "FAILED"), build.empty() ? "-" : build, ""};
    if (!problem.empty())
      row.status = problem;
    else if (!local.second.empty())
      row.status = "this host's trainer failed: " + local.second;
    else if (build != local.first)
      row.status = "DIFFERENT BUILD (this host: " + local.first + ")";
    else
      row.status = "ok";
    if (row.status != "ok") all_ok = false;
    if (row.ssh == "ok" && !problem.empty() && problem.rfind("ssh failed", 0) == 0) row.ssh = "FAILED";
    rows.push_back(row);
  }
  size_t w[4] = {4, 7, 3, 13};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.host.size());
    w[1] = std::max(w[1], r.address.size());
    w[2] = std::max(w[2], r.ssh.size());
    w[3] = std::max(w[3], r.build.size());
  }
  std::cout << fmt::format("checking {} host{} for trainer {}\n", hosts.size(), hosts.size() == 1 ? "" : "s", trainer);
  std::cout << fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", "host", w[0], "address", w[1], "ssh", w[2],
                           "trainer build", w[3], "status");
  for (const Row& r : rows)
    std::cout << fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {}\n", r.host, w[0], r.address, w[1], r.ssh, w[2],
                             r.build, w[3], r.status);
  std::cout << (all_ok ? "all hosts ok\n" : "some hosts failed the check\n") << std::flush;
  return all_ok;
}

}  // namespace lockstep
