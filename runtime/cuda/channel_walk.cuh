// ChannelWalk: one thread's share of a per-channel reduction over [N, C, P]
// data (NCHW activations, P = H*W): block (c, s) takes slice s of channel c's
// N*P values, its threads stride the slice by blockDim.x, and each step hands
// out kUnroll element offsets at once (so their loads are in flight together)
// with no division in the loop. Used by batch norm's reductions and the
// convolution's bias gradient; the order of the values a thread sees is fixed
// by the shape alone.
#pragma once

#include <cstdint>

namespace lockstep::cuda {

template <int kUnroll>
struct ChannelWalk {
  // Channel c of `channels`, P values per image; the slice [begin, end) of its
  // N*P values (image n, position p = index n*P + p).
  __device__ ChannelWalk(int64_t channels, int64_t P, int64_t c, int64_t begin, int64_t end)
      : end_(end), P_(P), step_(blockDim.x), plane_stride_(channels * P), base_(c * P) {
    j_ = begin + threadIdx.x;
    n_ = j_ / P;
    p_ = j_ - n_ * P;
    dn_ = step_ / P;
    dp_ = step_ - dn_ * P;
  }

  __device__ bool more() const { return j_ < end_; }

  // The next kUnroll offsets of this thread; in[u] says whether offset u is
  // inside the slice (the ones past its end are not to be read).
  __device__ void next(int64_t (&off)[kUnroll], bool (&in)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      in[u] = j_ < end_;
      off[u] = n_ * plane_stride_ + base_ + p_;
      j_ += step_;
      n_ += dn_;
      p_ += dp_;
      if (p_ >= P_) {
        p_ -= P_;
        ++n_;
      }
    }
  }

 private:
  int64_t j_, end_, n_, p_, dn_, dp_, P_, step_, plane_stride_, base_;
};

}  // namespace lockstep::cuda
