// The rank → lockstep-run channel: abort notices and rank 0's progress reports (see job_control.h).
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

// A connected non-blocking socket to address:port before `deadline`, or -1.
int connect_to(const std::string& address, int port, Clock::time_point deadline) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) return -1;
  Fd s{socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return -1;
  if (connect(s.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) return -1;
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0) return -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return -1;
  }
  const int fd = s.fd;
  s.fd = -1;
  return fd;
}

// One exchange: connect, send `message`, wait for "ok". Returns the open
// socket (the caller closes it) or -1.
int exchange(const std::string& address, int port, const std::string& message, Clock::time_point deadline) {
  Fd s{connect_to(address, port, deadline)};
  if (s.fd < 0) return -1;
  if (send(s.fd, message.data(), message.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(message.size())) return -1;
  const auto answer = read_line(s.fd, deadline);
  if (!answer || *answer != "ok") return -1;
  const int fd = s.fd;
  s.fd = -1;
  return fd;
}

// Tries the endpoint's addresses in order, each for at most 0.5 s (so one
// that silently drops packets does not use up the whole budget).
int exchange_any(const ControlEndpoint& e, const std::string& message, double budget_s) {
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(budget_s * 1000));
  for (const auto& address : e.addresses) {
    const auto deadline = std::min(end, Clock::now() + std::chrono::milliseconds(500));
    const int fd = exchange(address, e.port, message, deadline);
    if (fd >= 0) return fd;
    if (Clock::now() >= end) break;
  }
  return -1;
}

std::optional<ControlEndpoint> endpoint_from_environment() {
  const char* value = std::getenv(kRunControlVariable);
  return value ? parse_control(value) : std::nullopt;
}

bool parse_i64(const std::string& s, int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// One line of a report connection as an event; nothing when malformed.
std::optional<ControlEvent> report_event(const std::string& line) {
  const auto w = split(line, ' ');
  ControlEvent e;
  if (w.size() == 2 && w[0] == "step") {
    e.kind = ControlEvent::Kind::Step;
    if (parse_i64(w[1], e.step) && e.step >= 0) return e;
  } else if (w.size() == 6 && w[0] == "start") {
    e.kind = ControlEvent::Kind::Start;
    if (parse_i64(w[1], e.step) && parse_int(w[2], e.world) && parse_i64(w[3], e.global_batch) &&
        parse_i64(w[4], e.micro_batch) && parse_int(w[5], e.accumulate) && e.step >= 0 && e.world > 0 &&
        e.global_batch > 0 && e.micro_batch > 0 && e.accumulate > 0)
      return e;
  }
  return std::nullopt;
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
  drop_reports();
  if (fd_ >= 0) close(fd_);
}

void AbortListener::drop_reports() {
  for (Report& r : reports_) close(r.fd);
  reports_.clear();
}

std::vector<ControlEvent> AbortListener::poll(int timeout_ms) {
  std::vector<pollfd> fds{{fd_, POLLIN, 0}};
  for (const Report& r : reports_) fds.push_back({r.fd, POLLIN, 0});
  std::vector<ControlEvent> out;
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return out;
  if (fds[0].revents & POLLIN) accept_one(out);
  read_reports(out);
  return out;
}

void AbortListener::accept_one(std::vector<ControlEvent>& out) {
  Fd c{accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
  if (c.fd < 0) return;
  const auto line = read_line(c.fd, Clock::now() + std::chrono::milliseconds(500), 512);
  if (!line) return;
  const auto words = split(*line, ' ');
  if (words.size() == 2 && words[0] == "report" && words[1] == endpoint_.token) {
    if (send(c.fd, "ok\n", 3, MSG_NOSIGNAL) == 3) {
      reports_.push_back({c.fd, ""});
      c.fd = -1;
    }
    return;
  }
  int code = 0;
  if (words.size() < 3 || words[0] != "abort" || words[1] != endpoint_.token || !parse_int(words[2], code)) return;
  ControlEvent e;
  e.kind = ControlEvent::Kind::Abort;
  e.code = code;
  const size_t cause_at = words[0].size() + words[1].size() + words[2].size() + 3;
  if (line->size() > cause_at) e.cause = line->substr(cause_at);
  send(c.fd, "ok\n", 3, MSG_NOSIGNAL);
  out.push_back(std::move(e));
}

void AbortListener::read_reports(std::vector<ControlEvent>& out) {
  for (size_t i = 0; i < reports_.size();) {
    Report& r = reports_[i];
    char buf[4096];
    bool closed = false;
    for (;;) {
      const ssize_t n = recv(r.fd, buf, sizeof buf, 0);
      if (n > 0) {
        r.pending.append(buf, static_cast<size_t>(n));
        continue;
      }
      closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      break;
    }
    for (size_t nl = r.pending.find('\n'); nl != std::string::npos; nl = r.pending.find('\n')) {
      if (auto e = report_event(r.pending.substr(0, nl))) out.push_back(*e);
      r.pending.erase(0, nl + 1);
    }
    if (closed || r.pending.size() > 4096) {
      close(r.fd);
      reports_.erase(reports_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

bool notify_launcher_of_abort(int code, const std::string& cause, double budget_s) {
  const auto endpoint = endpoint_from_environment();
  if (!endpoint) return false;
  std::string one_line = cause.substr(0, cause.find('\n'));
  if (one_line.size() > 300) one_line.resize(300);
  const std::string message = fmt::format("abort {} {} {}\n", endpoint->token, code, one_line);
  const int fd = exchange_any(*endpoint, message, budget_s);
  if (fd < 0) return false;
  close(fd);
  return true;
}

std::unique_ptr<LauncherReports> LauncherReports::connect(double budget_s) {
  const auto endpoint = endpoint_from_environment();
  if (!endpoint) return nullptr;
  const int fd = exchange_any(*endpoint, fmt::format("report {}\n", endpoint->token), budget_s);
  if (fd < 0) return nullptr;
  return std::unique_ptr<LauncherReports>(new LauncherReports(fd));
}

LauncherReports::~LauncherReports() {
  if (fd_ >= 0) close(fd_);
}

void LauncherReports::started(int64_t step, int world, int64_t global_batch, int64_t micro_batch, int accumulate) {
  send_line(fmt::format("start {} {} {} {} {}\n", step, world, global_batch, micro_batch, accumulate));
}

void LauncherReports::stepped(int64_t steps_done) { send_line(fmt::format("step {}\n", steps_done)); }

void LauncherReports::send_line(const std::string& line) {
  if (fd_ < 0) return;
  const ssize_t n = send(fd_, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n == static_cast<ssize_t>(line.size())) return;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // the buffer is full: this line is dropped
  close(fd_);  // lockstep-run is gone (or a partial line went out): no more reports
  fd_ = -1;
}

}  // namespace lockstep
