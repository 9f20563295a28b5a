// The rank → lockstep-run abort channel (see job_control.h).
#include "job_control.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/error.h"

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;

struct Fd {  // closes on scope exit
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

bool parse_int(const std::string& s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t p = s.find(sep); p != std::string::npos; p = s.find(sep, start)) {
    parts.push_back(s.substr(start, p - start));
    start = p + 1;
  }
  parts.push_back(s.substr(start));
  return parts;
}

// Milliseconds left until `deadline`, at least 0.
int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

// Reads one line (without '\n') from a non-blocking socket before `deadline`.
std::optional<std::string> read_line(int fd, Clock::time_point deadline, size_t max_bytes = 128) {
  std::string line;
  while (line.size() < max_bytes) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0) return std::nullopt;
    char buf[128];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    line.append(buf, static_cast<size_t>(n));
    const size_t nl = line.find('\n');
    if (nl != std::string::npos) return line.substr(0, nl);
  }
  return std::nullopt;
}

// One attempt: connect, send the notice, wait for "ok".
bool notify_one(const std::string& address, int port, const std::string& message, Clock::time_point deadline) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) return false;
  Fd s{socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return false;
  if (connect(s.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) return false;
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0) return false;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
  }
  if (send(s.fd, message.data(), message.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(message.size())) return false;
  const auto answer = read_line(s.fd, deadline);
  return answer && *answer == "ok";
}

}  // namespace

std::string format_control(const ControlEndpoint& e) {
  std::string addresses;
  for (const auto& a : e.addresses) addresses += (addresses.empty() ? "" : ",") + a;
  return fmt::format("{}@{}@{}", e.token, e.port, addresses);
}

std::optional<ControlEndpoint> parse_control(const std::string& text) {
  const auto parts = split(text, '@');
  if (parts.size() != 3 || parts[0].empty() || parts[2].empty()) return std::nullopt;
  ControlEndpoint e;
  e.token = parts[0];
  if (!parse_int(parts[1], e.port) || e.port < 1 || e.port > 65535) return std::nullopt;
  for (const auto& a : split(parts[2], ',')) {
    in_addr probe{};
    if (inet_pton(AF_INET, a.c_str(), &probe) != 1) return std::nullopt;
    e.addresses.push_back(a);
  }
  return e;
}

AbortListener::AbortListener(const std::string& interface) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  LS_CHECK(fd_ >= 0, "abort listener: socket: {}", std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = 0;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd_, 64) != 0) {
    const std::string why = std::strerror(errno);
    close(fd_);
    LS_THROW("abort listener: bind/listen: {}", why);
  }
  socklen_t len = sizeof sa;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  endpoint_.port = ntohs(sa.sin_port);
  endpoint_.token = random_token();

  // This host's addresses: the chosen interface's first, loopback last.
  std::vector<std::string> preferred, others;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      (interface == i->ifa_name ? preferred : others).push_back(text);
    }
    freeifaddrs(list);
  }
  endpoint_.addresses = preferred;
  for (const auto& a : others)
    if (std::find(preferred.begin(), preferred.end(), a) == preferred.end()) endpoint_.addresses.push_back(a);
  endpoint_.addresses.push_back("127.0.0.1");
}

AbortListener::~AbortListener() {
  if (fd_ >= 0) close(fd_);
}

std::optional<int> AbortListener::poll(int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
  Fd c{accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
  if (c.fd < 0) return std::nullopt;
  const auto line = read_line(c.fd, Clock::now() + std::chrono::milliseconds(500));
  if (!line) return std::nullopt;
  const auto words = split(*line, ' ');
  int code = 0;
  if (words.size() != 3 || words[0] != "abort" || words[1] != endpoint_.token || !parse_int(words[2], code))
    return std::nullopt;
  send(c.fd, "ok\n", 3, MSG_NOSIGNAL);
  return code;
}

bool notify_launcher_of_abort(int code, double budget_s) {
  const char* value = std::getenv(kRunControlVariable);
  if (!value) return false;
  const auto endpoint = parse_control(value);
  if (!endpoint) return false;
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(budget_s * 1000));
  const std::string message = fmt::format("abort {} {}\n", endpoint->token, code);
  for (const auto& address : endpoint->addresses) {
    // Each address gets at most 0.5 s, so one that silently drops packets
    // does not use up the whole budget.
    const auto deadline = std::min(end, Clock::now() + std::chrono::milliseconds(500));
    if (notify_one(address, endpoint->port, message, deadline)) return true;
    if (Clock::now() >= end) break;
  }
  return false;
}

}  // namespace lockstep
