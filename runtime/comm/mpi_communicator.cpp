// MPI implementation of the Communicator and the MpiSession.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "comm/mpi_session.h"
#include "comm/ordered_sum.h"
#include "ops/simd.h"

namespace lockstep {
namespace {

[[noreturn]] void mpi_fail(int code, const char* call, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) len = 0;
  throw_error(file, line, fmt::format("MPI error in {}: {}", call, std::string(msg, static_cast<size_t>(len))));
}

#define LS_MPI(call)                                              \
  do {                                                            \
    const int ls_mpi_rc = (call);                                 \
    if (ls_mpi_rc != MPI_SUCCESS) mpi_fail(ls_mpi_rc, #call, __FILE__, __LINE__); \
  } while (0)

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::U8: return MPI_UINT8_T;
    case DType::F16:
    case DType::BF16: return MPI_UINT16_T;  // moved as bits (broadcast/allgather only)
  }
  LS_THROW("no MPI type for {}", dtype_name(t));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  return MPI_SUM;
}

// MPI counts are ints: larger tensors go in chunks of this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;
// Elements per segment of an ordered allreduce (see allreduce_sum_ordered):
// 1 MB, measured best of 1, 4 and 16 MB for 4-256 MB buffers at 2 ranks.
constexpr int64_t kOrderedSegment = int64_t{1} << 18;

// Waits for `reqs` without holding a core for the whole transfer. Open MPI's
// blocking waits poll for as long as the data takes (its progress loop in
// user time, epoll in system time): on a slow link that is most of a step,
// taken from the compute threads that backward runs on while buckets are
// reduced. So: poll for kSpin (an exchange through shared memory or a fast
// network is over by then), then test at growing intervals up to kMaxNap.
// Measured across two namespace hosts on 2 cores, 1 Gbit/s link (2026-11-23):
// keras-cnn with 1 MB buckets 85.5 -> 72.4 ms per step, resnet50 at 64x64
// 1332 -> 1153 ms; no change through shared memory (bench_allreduce --path
// ordered, 4 B to 64 MB) or when nothing overlaps (docs/performance.md).
void wait_all(std::vector<MPI_Request>& reqs) {
  using clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(200);
  constexpr auto kMaxNap = std::chrono::microseconds(50);
  const auto start = clock::now();
  auto nap = std::chrono::microseconds(5);
  for (;;) {
    int done = 0;
    LS_MPI(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (clock::now() - start < kSpin) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kMaxNap);
  }
}

}  // namespace

// ---------------------------------------------------------------- MpiSession

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  LS_MPI(MPI_Initialized(&initialized));
  LS_CHECK(!initialized, "MPI is already initialised: create one MpiSession per process");
  LS_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool MpiSession::thread_multiple() const { return thread_level_ >= MPI_THREAD_MULTIPLE; }

const char* MpiSession::thread_level_name() const {
  if (thread_level_ >= MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  if (thread_level_ >= MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (thread_level_ >= MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  return "MPI_THREAD_SINGLE";
}

std::unique_ptr<Communicator> MpiSession::world() const {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

void MpiSession::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort should not return; make sure
}

// ---------------------------------------------------------------- MpiCommunicator

MpiCommunicator::MpiCommunicator(MPI_Comm parent) {
  LS_MPI(MPI_Comm_dup(parent, &comm_));
  LS_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  LS_MPI(MPI_Comm_rank(comm_, &rank_));
  LS_MPI(MPI_Comm_size(comm_, &size_));
  MPI_Comm local = MPI_COMM_NULL;
  LS_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  LS_MPI(MPI_Comm_rank(local, &local_rank_));
  LS_MPI(MPI_Comm_size(local, &local_size_));
  LS_MPI(MPI_Comm_free(&local));
  int leader = local_rank_ == 0 ? 1 : 0;
  LS_MPI(MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::allreduce(Tensor& t, ReduceOp op) {
  const DType dt = t.dtype();
  LS_CHECK(dt == DType::F32 || dt == DType::F64 || dt == DType::I32 || dt == DType::I64,
           "allreduce of {} is not supported", dtype_name(dt));
  LS_CHECK(op != ReduceOp::Average || dt == DType::F32 || dt == DType::F64, "average of integers is not supported");
  LS_CHECK(t.device().is_cpu(), "MPI allreduce of a {} tensor", t.device().str());
  char* p = static_cast<char*>(t.raw_data());
  for (int64_t off = 0; off < t.numel(); off += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, t.numel() - off));
    LS_MPI(MPI_Allreduce(MPI_IN_PLACE, p + off * static_cast<int64_t>(size_of(dt)), n, mpi_type(dt), mpi_op(op), comm_));
  }
  if (op == ReduceOp::Average && size_ > 1) {
    if (dt == DType::F32) {
      const float s = 1.f / static_cast<float>(size_);
      for (float& v : t.span<float>()) v *= s;
    } else {
      const double s = 1.0 / size_;
      for (double& v : t.span<double>()) v *= s;
    }
  }
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  LS_CHECK(root >= 0 && root < size_, "broadcast root {} outside [0, {})", root, size_);
  LS_CHECK(t.device().is_cpu(), "MPI broadcast of a {} tensor", t.device().str());
  char* p = static_cast<char*>(t.raw_data());
  const int64_t esize = static_cast<int64_t>(size_of(t.dtype()));
  for (int64_t off = 0; off < t.numel(); off += kMaxCount) {
    const int n = static_cast<int>(std::min(kMaxCount, t.numel() - off));
    LS_MPI(MPI_Bcast(p + off * esize, n, mpi_type(t.dtype()), root, comm_));
  }
}

void MpiCommunicator::allgather(const Tensor& in, Tensor& out) {
  LS_CHECK(out.dtype() == in.dtype() && out.numel() == in.numel() * size_,
           "allgather: output holds {} {}, needs {} x {}", out.numel(), dtype_name(out.dtype()), size_, in.numel());
  LS_CHECK(in.numel() <= kMaxCount, "allgather of {} elements per rank is not supported", in.numel());
  LS_MPI(MPI_Allgather(in.raw_data(), static_cast<int>(in.numel()), mpi_type(in.dtype()), out.raw_data(),
                       static_cast<int>(in.numel()), mpi_type(in.dtype()), comm_));
}

void MpiCommunicator::barrier() { LS_MPI(MPI_Barrier(comm_)); }

std::unique_ptr<Communicator> MpiCommunicator::duplicate() const { return std::make_unique<MpiCommunicator>(comm_); }

namespace {

// An MPI shared-memory window: one block per rank, all mapped in every rank.
class MpiSharedMemory final : public SharedMemory {
 public:
  MpiSharedMemory(MPI_Comm comm, int64_t bytes) : bytes_(bytes) {
    LS_MPI(MPI_Comm_size(comm, &ranks_));
    void* base = nullptr;
    // Round blocks to 4 KiB so ranks' blocks never share a page (or a cache line).
    const int64_t rounded = (bytes + 4095) / 4096 * 4096;
    LS_MPI(MPI_Win_allocate_shared(static_cast<MPI_Aint>(rounded), 1, MPI_INFO_NULL, comm, &base, &win_));
    blocks_.resize(static_cast<size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) {
      MPI_Aint size = 0;
      int disp = 0;
      LS_MPI(MPI_Win_shared_query(win_, r, &size, &disp, &blocks_[static_cast<size_t>(r)]));
    }
    std::memset(base, 0, static_cast<size_t>(rounded));
    LS_MPI(MPI_Barrier(comm));  // everyone zeroed before anyone uses
  }
  ~MpiSharedMemory() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Win_free(&win_);
  }
  int ranks() const override { return ranks_; }
  int64_t bytes() const override { return bytes_; }
  void* block(int rank) override { return blocks_[static_cast<size_t>(rank)]; }

 private:
  MPI_Win win_ = MPI_WIN_NULL;
  int ranks_ = 0;
  int64_t bytes_;
  std::vector<void*> blocks_;
};

}  // namespace

std::shared_ptr<SharedMemory> MpiCommunicator::allocate_shared(int64_t bytes) {
  if (nodes_ != 1 || local_size_ != size_) return nullptr;
  return std::make_shared<MpiSharedMemory>(comm_, bytes);
}

namespace {

template <typename Conv>
void convert_range(int64_t n, Conv&& conv) {
  for (int64_t i = 0; i < n; ++i) conv(i);
}

}  // namespace

void MpiCommunicator::allreduce_sum_ordered(Tensor& t, WireType wire) {
  LS_CHECK(t.dtype() == DType::F32 && t.device().is_cpu(), "ordered allreduce needs a host F32 tensor, got {} on {}",
           dtype_name(t.dtype()), t.device().str());
  // Large tensors go in segments, each reduced completely before the next, so
  // the receive space and the data being summed stay in cache (one pass over a
  // 256 MB buffer otherwise streams it through memory several times). Every
  // element is still summed in rank order, so results do not depend on this.
  const int64_t segment = kOrderedSegment;
  if (t.numel() > segment) {
    for (int64_t off = 0; off < t.numel(); off += segment) {
      Tensor part = t.slice(off, Shape{std::min(segment, t.numel() - off)});
      allreduce_sum_ordered(part, wire);
    }
    return;
  }
  const int64_t n = t.numel();
  LS_CHECK(n < (int64_t{1} << 31), "ordered allreduce of {} elements at once is not supported", n);
  if (size_ == 1) {
    round_to_wire(t, wire);
    return;
  }
  const int N = size_, me = rank_;
  auto first = [&](int r) { return n * r / N; };
  const int64_t mine = first(me + 1) - first(me), largest = (n + N - 1) / N;
  const bool narrow = wire != WireType::F32;
  const int64_t esize = narrow ? 2 : 4;
  const MPI_Datatype type = narrow ? MPI_UINT16_T : MPI_FLOAT;
  // Receive slots: one per rank (this rank's slot unused unless narrow), in the
  // wire type; then for narrow wires, fp32 copies to sum.
  const int64_t need = N * largest * esize + (narrow ? N * largest * 4 : 0);
  if (recv_.nbytes() < static_cast<size_t>(need)) recv_ = Tensor::zeros(Shape{need}, DType::U8);
  char* slots = static_cast<char*>(recv_.raw_data());
  float* data = t.data<float>();
  char* send = reinterpret_cast<char*>(data);
  uint16_t* w16 = nullptr;
  if (narrow) {
    if (static_cast<int64_t>(wire_.nbytes()) < n * 2) wire_ = Tensor::zeros(Shape{n * 2}, DType::U8);
    w16 = reinterpret_cast<uint16_t*>(wire_.raw_data());
    if (wire == WireType::BF16)
      convert_range(n, [&](int64_t i) { w16[i] = float_to_bf16(data[i]); });
    else
      convert_range(n, [&](int64_t i) { w16[i] = float_to_f16(data[i]); });
    send = reinterpret_cast<char*>(w16);
  }
  // One exchange with every other rank r: receive `recv_count(r)` elements at
  // `recv_at(r)`, send `send_count(r)` from `send_at(r)`; wait for all of it.
  std::vector<MPI_Request> reqs;
  reqs.reserve(static_cast<size_t>(2 * (N - 1)));
  auto exchange = [&](int tag, auto recv_at, auto recv_count, auto send_at, auto send_count) {
    reqs.clear();
    for (int r = 0; r < N; ++r) {
      if (r == me) continue;
      reqs.emplace_back();
      LS_MPI(MPI_Irecv(recv_at(r), recv_count(r), type, r, tag, comm_, &reqs.back()));
    }
    for (int r = 0; r < N; ++r) {
      if (r == me) continue;
      reqs.emplace_back();
      LS_MPI(MPI_Isend(send_at(r), send_count(r), type, r, tag, comm_, &reqs.back()));
    }
    wait_all(reqs);
  };
  auto chunk_at = [&](int r) { return send + first(r) * esize; };
  auto chunk_count = [&](int r) { return static_cast<int>(first(r + 1) - first(r)); };
  auto slot_at = [&](int r) { return slots + r * largest * esize; };  // rank r's copy of my chunk
  auto mine_at = [&](int) { return chunk_at(me); };
  auto mine_count = [&](int) { return static_cast<int>(mine); };
  // Phase 1: every other rank's chunk to it; every other rank's copy of mine here.
  exchange(0, slot_at, mine_count, chunk_at, chunk_count);
  // Sum this rank's chunk in rank order.
  std::vector<const float*> src(static_cast<size_t>(N));
  float* out = data + first(me);
  if (!narrow) {
    // The own contribution is read in place: sum_in_order reads every source
    // of an element before writing it.
    for (int r = 0; r < N; ++r)
      src[static_cast<size_t>(r)] = r == me ? out : reinterpret_cast<const float*>(slot_at(r));
    sum_in_rank_order(src.data(), N, mine, out);
  } else {
    float* wide = reinterpret_cast<float*>(slots + N * largest * esize);
    for (int r = 0; r < N; ++r) {
      const uint16_t* h = r == me ? w16 + first(me) : reinterpret_cast<const uint16_t*>(slot_at(r));
      float* f = wide + r * largest;
      if (wire == WireType::BF16)
        convert_range(mine, [&](int64_t i) { f[i] = bf16_to_float(h[i]); });
      else
        convert_range(mine, [&](int64_t i) { f[i] = f16_to_float(h[i]); });
      src[static_cast<size_t>(r)] = f;
    }
    sum_in_rank_order(src.data(), N, mine, out);
    uint16_t* o16 = w16 + first(me);
    if (wire == WireType::BF16)
      convert_range(mine, [&](int64_t i) { o16[i] = float_to_bf16(out[i]); });
    else
      convert_range(mine, [&](int64_t i) { o16[i] = float_to_f16(out[i]); });
  }
  // Phase 2: every owner's sums to everyone, in place.
  exchange(1, chunk_at, chunk_count, mine_at, mine_count);
  if (narrow) {
    if (wire == WireType::BF16)
      convert_range(n, [&](int64_t i) { data[i] = bf16_to_float(w16[i]); });
    else
      convert_range(n, [&](int64_t i) { data[i] = f16_to_float(w16[i]); });
  }
}

}  // namespace lockstep
