// Watchdog: report exchange on a dedicated communicator, overdue detection,
// the diagnosis message.
#include "comm/watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"

namespace lockstep {
namespace {

constexpr int kTagToRoot = 1;    // rank r -> rank 0: r's position
constexpr int kTagFromRoot = 2;  // rank 0 -> rank r: rank 0's position
constexpr int kFields = 6;       // seq, step, kind, detail, inside, age in ms
constexpr double kQuietSeconds = 2.0;  // no report for this long (8 missed reports): cut off
using Record = std::array<int64_t, kFields>;

Record encode(const CollectivePosition& p, int64_t now_ns) {
  return {static_cast<int64_t>(p.seq), p.step, static_cast<int64_t>(p.kind), p.detail, p.inside ? 1 : 0,
          (now_ns - p.since_ns) / 1000000};
}

// The sender's age becomes a local since_ns (clocks of different hosts are not comparable).
CollectivePosition decode(const Record& r, int64_t now_ns) {
  CollectivePosition p;
  p.seq = static_cast<uint64_t>(r[0]);
  p.step = r[1];
  p.kind = static_cast<CollectiveKind>(r[2]);
  p.detail = static_cast<int32_t>(r[3]);
  p.inside = r[4] != 0;
  p.since_ns = now_ns - r[5] * 1000000;
  return p;
}

std::string where_am_i() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "?");
  return fmt::format("host {}, pid {}", host, static_cast<long>(getpid()));
}

std::string activity(const CollectivePosition& p) {
  if (p.kind == CollectiveKind::None) return fmt::format("step {}", p.step);
  return fmt::format("step {} {} {}", p.step, p.inside ? "in" : "after", describe_collective(p.kind, p.detail));
}

}  // namespace

std::string describe_collective(CollectiveKind kind, int32_t detail) {
  switch (kind) {
    case CollectiveKind::None: return "no collective";
    case CollectiveKind::Bucket: return fmt::format("allreduce bucket {}", detail);
    case CollectiveKind::GradientHandoff: return "gradient handoff (shared memory)";
    case CollectiveKind::StateBroadcast: return "state broadcast";
    case CollectiveKind::Metrics: return "metrics reduction";
    case CollectiveKind::Evaluation: return "evaluation reduction";
    case CollectiveKind::StepAgreement: return "step agreement";
    case CollectiveKind::ReplicaCheck: return "replica check";
    case CollectiveKind::BatchNormSync: return "batch norm statistics (synchronised batch norm)";
    case CollectiveKind::BufferSync: return "buffer averaging";
    case CollectiveKind::Checkpoint: return "checkpoint writing";
    case CollectiveKind::ParameterGather: return "parameter allgather (ZeRO-1)";
    case CollectiveKind::GradientNorm: return "gradient norm (ZeRO-1)";
    case CollectiveKind::StateGather: return "optimizer state gather (ZeRO-1)";
  }
  return "collective";
}

std::string Watchdog::diagnose(int me, const CollectivePosition& mine, double overdue_s,
                               const std::vector<CollectivePosition>& table, const std::vector<double>& heard_s_ago,
                               const std::vector<std::string>& where, double timeout_s,
                               const std::string& reason) {
  const std::string what =
      reason.empty() ? fmt::format("collective timeout ({:g} s)", timeout_s) : reason;
  const std::string waiting = fmt::format("step {} {}", mine.step, describe_collective(mine.kind, mine.detail));
  // Reports arrive every 0.25 s: a rank quiet for kQuietSeconds (or the whole
  // timeout, if shorter) is cut off even when it had reached this collective
  // just before it went quiet (a link cut mid-collective).
  const double quiet_s = std::min(timeout_s, kQuietSeconds);
  std::vector<std::string> culprits;
  for (size_t r = 0; r < table.size(); ++r) {
    if (static_cast<int>(r) == me || heard_s_ago[r] < 0) continue;  // myself, or no knowledge of r
    const CollectivePosition& p = table[r];
    const bool behind = p.seq < mine.seq;
    const bool silent = heard_s_ago[r] > quiet_s;
    if (!behind && !silent) continue;
    if (!behind) {
      culprits.push_back(fmt::format("rank {} ({}) reached {} but has not been heard from for {:.1f} s (unreachable?)",
                                     r, where[r], waiting, heard_s_ago[r]));
      continue;
    }
    const std::string last = p.seq == 0 && p.step == 0 && heard_s_ago[r] > timeout_s
                                 ? std::string("never heard from")
                                 : fmt::format("last seen at {}, {:.1f} s ago", activity(p), heard_s_ago[r]);
    culprits.push_back(fmt::format("rank {} ({}) has not reached {} after {:.0f} s; {}", r, where[r], waiting,
                                   overdue_s, last));
  }
  if (!culprits.empty()) {
    std::string msg = culprits.front();
    for (size_t i = 1; i < culprits.size(); ++i) msg += "; " + culprits[i];
    return fmt::format("{}: {}", what, msg);
  }
  if (me == 0)
    return fmt::format("{}: {} has not completed on rank 0 after {:.0f} s although every rank reached it and "
                       "reported within the timeout (a network problem between ranks?)",
                       what, waiting, overdue_s);
  const double heard0 = heard_s_ago.empty() ? -1 : heard_s_ago[0];
  return fmt::format("{}: {} has not completed on rank {} ({}) after {:.0f} s, and rank 0 did not end the job ({})",
                     what, waiting, me, where[static_cast<size_t>(me)], overdue_s,
                     heard0 < 0 ? std::string("no reports from rank 0")
                                : fmt::format("rank 0 last seen at {}, {:.1f} s ago", activity(table[0]), heard0));
}

Watchdog::Watchdog(MpiCommunicator& comm, const CollectiveTracker& tracker, Options options,
                   OnTimeout on_timeout)
    : tracker_(tracker), options_(options), on_timeout_(std::move(on_timeout)) {
  LS_CHECK(options_.timeout_s > 0, "watchdog timeout {} s", options_.timeout_s);
  rank_ = comm.rank();
  size_ = comm.size();
  where_ = allgather_strings(comm, where_am_i());
  if (MPI_Comm_dup(comm.handle(), &comm_) != MPI_SUCCESS) LS_THROW("MPI_Comm_dup for the watchdog failed");
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Watchdog::run() {
  const int64_t start = CollectiveTracker::now_ns();
  std::vector<CollectivePosition> table(static_cast<size_t>(size_));
  std::vector<int64_t> heard(static_cast<size_t>(size_), start);
  std::vector<bool> known(static_cast<size_t>(size_), false);
  const bool peers = options_.peer_reports && size_ > 1;

  Record in{};
  MPI_Request recv = MPI_REQUEST_NULL;
  auto post_recv = [&] {
    MPI_Irecv(in.data(), kFields, MPI_INT64_T, rank_ == 0 ? MPI_ANY_SOURCE : 0, rank_ == 0 ? kTagToRoot : kTagFromRoot,
              comm_, &recv);
  };
  std::vector<Record> out(static_cast<size_t>(size_));
  std::vector<MPI_Request> sends(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  auto send_to = [&](int dest, const Record& rec) {
    MPI_Request& req = sends[static_cast<size_t>(dest)];
    if (req != MPI_REQUEST_NULL) {  // the previous report still travelling: skip this one
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) return;
    }
    out[static_cast<size_t>(dest)] = rec;
    MPI_Isend(out[static_cast<size_t>(dest)].data(), kFields, MPI_INT64_T, dest,
              rank_ == 0 ? kTagFromRoot : kTagToRoot, comm_, &req);
  };
  if (peers) post_recv();

  const int64_t report_ns = static_cast<int64_t>(options_.report_every_s * 1e9);
  const int64_t limit_ns = static_cast<int64_t>((options_.timeout_s + (rank_ == 0 ? 0 : options_.grace_s)) * 1e9);
  int64_t next_report = start;
  while (!stop_.load()) {
    const int64_t now = CollectiveTracker::now_ns();
    if (peers) {
      while (true) {  // drain every report that has arrived
        int flag = 0;
        MPI_Status st;
        MPI_Test(&recv, &flag, &st);
        if (!flag) break;
        const auto src = static_cast<size_t>(st.MPI_SOURCE);
        table[src] = decode(in, now);
        heard[src] = now;
        known[src] = true;
        post_recv();
      }
      if (now >= next_report) {
        const Record rec = encode(tracker_.position(), now);
        if (rank_ == 0)
          for (int r = 1; r < size_; ++r) send_to(r, rec);
        else
          send_to(0, rec);
        next_report = now + report_ns;
      }
    }
    const CollectivePosition mine = tracker_.position();
    const bool waiting = mine.inside && is_collective(mine.kind);
    auto heard_ago = [&] {
      std::vector<double> ago(static_cast<size_t>(size_), -1.0);
      for (int r = 0; r < size_; ++r) {
        const auto i = static_cast<size_t>(r);
        // Rank 0 knows every rank (unheard ones count as silent since the start); others know rank 0.
        if (rank_ == 0 ? (peers && r != 0) : (peers && r == 0 && known[i]))
          ago[i] = static_cast<double>(now - heard[i]) / 1e9;
      }
      return ago;
    };
    const double overdue_s = static_cast<double>(now - mine.since_ns) / 1e9;
    if (waiting && now - mine.since_ns > limit_ns) {
      on_timeout_(diagnose(rank_, mine, overdue_s, table, heard_ago(), where_, options_.timeout_s));
      return;  // on_timeout ends the process; if it returns, stop watching
    }
    if (waiting && peers && overdue_s > options_.stopping_timeout_s && options_.stopping && options_.stopping()) {
      const std::vector<double> ago = heard_ago();
      const bool someone_silent =
          std::any_of(ago.begin(), ago.end(), [](double s) { return s > kQuietSeconds; });
      if (someone_silent) {
        on_timeout_(diagnose(rank_, mine, overdue_s, table, ago, where_, options_.timeout_s,
                             "cannot stop at a step boundary (a stop was requested; a rank is gone)"));
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Normal shutdown: withdraw the pending receive; sends are tiny and complete locally.
  if (recv != MPI_REQUEST_NULL) {
    MPI_Cancel(&recv);
    MPI_Wait(&recv, MPI_STATUS_IGNORE);
  }
  for (MPI_Request& req : sends)
    if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
}

}  // namespace lockstep
