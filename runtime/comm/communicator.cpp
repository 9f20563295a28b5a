// Communicator helpers and the single-process communicator.
#include "comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "comm/wire_convert.h"

namespace lockstep {

std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine) {
  Tensor len = Tensor::zeros(Shape{1}, DType::I64);
  len.data<int64_t>()[0] = static_cast<int64_t>(mine.size());
  Tensor lens = Tensor::zeros(Shape{comm.size()}, DType::I64);
  comm.allgather(len, lens);
  int64_t longest = 0;
  for (int64_t l : lens.span<int64_t>()) longest = std::max(longest, l);
  Tensor buf = Tensor::zeros(Shape{std::max<int64_t>(longest, 1)}, DType::U8);
  std::memcpy(buf.raw_data(), mine.data(), mine.size());
  Tensor all = Tensor::zeros(Shape{comm.size() * buf.numel()}, DType::U8);
  comm.allgather(buf, all);
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data<uint8_t>() + r * buf.numel()),
                     static_cast<size_t>(lens.data<int64_t>()[r]));
  return out;
}

std::string broadcast_string(Communicator& comm, const std::string& s, int root) {
  Tensor len = Tensor::zeros(Shape{1}, DType::I64);
  len.data<int64_t>()[0] = static_cast<int64_t>(s.size());
  comm.broadcast(len, root);
  const int64_t n = len.data<int64_t>()[0];
  Tensor buf = Tensor::zeros(Shape{std::max<int64_t>(n, 1)}, DType::U8);
  if (comm.rank() == root) std::memcpy(buf.raw_data(), s.data(), s.size());
  comm.broadcast(buf, root);
  return std::string(reinterpret_cast<const char*>(buf.raw_data()), static_cast<size_t>(n));
}

double allreduce_scalar(Communicator& comm, double v, ReduceOp op) {
  Tensor t = Tensor::zeros(Shape{1}, DType::F64);
  t.data<double>()[0] = v;
  comm.allreduce(t, op);
  return t.data<double>()[0];
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_f16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

float f16_to_float(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

void round_to_wire(Tensor& t, WireType wire) {
  if (wire == WireType::F32) return;
  constexpr int64_t kBlock = 2048;
  uint16_t w16[kBlock];
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); i += kBlock) {
    const int64_t n = std::min(kBlock, t.numel() - i);
    floats_to_wire(v + i, n, wire, w16);
    wire_to_floats(w16, n, wire, v + i);
  }
}

void SingleProcessCommunicator::allreduce(Tensor& t, ReduceOp) {
  LS_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64 || t.dtype() == DType::I32 || t.dtype() == DType::I64,
           "allreduce of {} is not supported", dtype_name(t.dtype()));
}

void SingleProcessCommunicator::broadcast(Tensor&, int root) {
  LS_CHECK(root == 0, "broadcast root {} outside a world of one", root);
}

void SingleProcessCommunicator::allgather(const Tensor& in, Tensor& out) {
  LS_CHECK(out.numel() == in.numel() && out.dtype() == in.dtype(), "allgather: output must hold {} {}", in.numel(),
           dtype_name(in.dtype()));
  out.copy_from(in);
}

void allreduce_via_host(Communicator& comm, Tensor& t, ReduceOp op) {
  if (t.device().is_cpu()) {
    comm.allreduce(t, op);
    return;
  }
  Tensor h = on_host(t);
  comm.allreduce(h, op);
  t.copy_from(h);
}

void broadcast_via_host(Communicator& comm, Tensor& t, int root) {
  if (t.device().is_cpu()) {
    comm.broadcast(t, root);
    return;
  }
  Tensor h = on_host(t);
  comm.broadcast(h, root);
  t.copy_from(h);
}

}  // namespace lockstep
