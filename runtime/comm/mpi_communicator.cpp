// MPI implementation of the Communicator and the MpiSession.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "comm/mpi_check.h"
#include "comm/mpi_session.h"

namespace lockstep {

void mpi_fail(int code, const char* call, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) len = 0;
  throw_error(file, line, fmt::format("MPI error in {}: {}", call, std::string(msg, static_cast<size_t>(len))));
}

namespace {

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

MpiCommunicator::MpiCommunicator(MPI_Comm parent, int ranks_per_host) : ranks_per_host_(ranks_per_host) {
  LS_MPI(MPI_Comm_dup(parent, &comm_));
  LS_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  LS_MPI(MPI_Comm_rank(comm_, &rank_));
  LS_MPI(MPI_Comm_size(comm_, &size_));
  MPI_Comm local = MPI_COMM_NULL;
  LS_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  LS_MPI(MPI_Comm_rank(local, &local_rank_));
  LS_MPI(MPI_Comm_size(local, &local_size_));
  // Grouped by host: this host's ranks are [b, b + L), b a multiple of L, the
  // same L on every host.
  int span[2] = {rank_, -rank_};  // the host's lowest and (negated) highest rank
  LS_MPI(MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_INT, MPI_MIN, local));
  LS_MPI(MPI_Comm_free(&local));
  int per_host[2] = {local_size_, -local_size_};
  LS_MPI(MPI_Allreduce(MPI_IN_PLACE, per_host, 2, MPI_INT, MPI_MIN, comm_));
  int grouped = per_host[0] == -per_host[1] && -span[1] - span[0] + 1 == local_size_ && span[0] % local_size_ == 0;
  LS_MPI(MPI_Allreduce(MPI_IN_PLACE, &grouped, 1, MPI_INT, MPI_LAND, comm_));
  int leader = local_rank_ == 0 ? 1 : 0;
  LS_MPI(MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm_));
  ordered_ = std::make_unique<OrderedAllreduce>(comm_, rank_, size_);
  const int L = ranks_per_host_ > 0 ? ranks_per_host_ : local_size_;
  if (ranks_per_host_ > 0) grouped = size_ % L == 0;
  if (grouped && L >= 2 && size_ / L >= 2) hierarchical_ = std::make_unique<HierarchicalAllreduce>(comm_, L);
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

std::unique_ptr<Communicator> MpiCommunicator::duplicate() const {
  auto dup = std::make_unique<MpiCommunicator>(comm_, ranks_per_host_);
  dup->set_hierarchical_allreduce(use_hierarchical_);
  return dup;
}

bool MpiCommunicator::set_hierarchical_allreduce(bool on) {
  use_hierarchical_ = on && hierarchical_;
  return hierarchical_ != nullptr;
}

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

void MpiCommunicator::allreduce_sum_ordered(Tensor& t, WireType wire) {
  if (use_hierarchical_)
    hierarchical_->run(t, wire);
  else
    ordered_->run(t, wire);
}

void MpiCommunicator::reduce_scatter_sum_ordered(Tensor& t, WireType wire) {
  if (use_hierarchical_)  // every element's sum, in about as many bytes per link as the flat half
    hierarchical_->run(t, wire);
  else
    ordered_->run(t, wire, OrderedAllreduce::Phases::ReduceScatter);
}

void MpiCommunicator::allgather_owned(Tensor& t) {
  if (use_hierarchical_)
    hierarchical_->allgather_owned(t);
  else
    ordered_->run(t, WireType::F32, OrderedAllreduce::Phases::Allgather);
}

}  // namespace lockstep
