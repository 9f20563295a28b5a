// GPU softmax cross-entropy: one 256-thread block per row (grid-stride over rows),
// each row's max, argmax and sums by a fixed shared-memory tree, then (forward)
// one block adding the per-row results in a fixed order. No atomics anywhere,
// so results are run-to-run deterministic. Mirrors ops/loss/softmax_xent_cpu.cpp:
// forward subtracts the fp32 row max and sums exp() in fp64; backward is fp32.
// The logits' type (fp32, bf16 or IEEE half) is picked from a DType at run
// time (cuda::dispatch_storage): the forward kernel is templated on the logits' storage
// type (cuda::load widens exactly, the math is unchanged); the 16-bit backward
// kernel computes each gradient element completely in fp32 (the fp32 kernel's
// values, operation by operation) and rounds it to the 16-bit type once.
// Backward's gradient factor is scale, times *scale_dev when the caller passes
// a device scalar (the dynamic loss scale): each thread computes it in fp32 at
// run time, and the label smoothing constants from it, operation by operation
// as the host computed them from scale before, so a null scale_dev gives the
// same bits as before.
#include "ops/loss/softmax_xent_cuda.h"

#include <type_traits>

#include <math_constants.h>

#include <algorithm>
#include <string>

#include "core/throw.h"
#include "cuda/float16.cuh"
#include "cuda/check.h"
#include "cuda/launch.cuh"

namespace lockstep::ops {
namespace {

using cuda::block_sum;
using cuda::kThreads;
using cuda::load;
using cuda::store;

constexpr int64_t kMaxRowBlocks = 65535;

int row_blocks(int64_t b) { return static_cast<int>(std::min<int64_t>(b, kMaxRowBlocks)); }

// The CPU op's argument checks (labels are device data: see the header).
void check_args(int64_t b, int64_t c, float smoothing) {
  if (!(smoothing >= 0.f && smoothing < 1.f))
    throw_error(__FILE__, __LINE__, "label smoothing " + std::to_string(smoothing) + " outside [0, 1)");
  if (b > 0 && c < 1)
    throw_error(__FILE__, __LINE__, "softmax cross-entropy over " + std::to_string(c) + " classes");
}

// Row max and its first index. Every thread starts from (z[0], 0) and takes
// only strictly larger values, so within a thread the first maximum wins;
// across threads equal values resolve to the smaller index. That is the CPU
// op's first argmax (for inputs without NaN). T: logits' storage (float, bf16, half).
template <typename T>
__device__ void row_argmax(const T* z, int64_t c, float* s_max, int64_t* s_arg) {
  const int t = threadIdx.x;
  float mx = load(z, 0);
  int64_t arg = 0;
  for (int64_t j = t; j < c; j += kThreads) {
    const float v = load(z, j);
    if (v > mx) {
      mx = v;
      arg = j;
    }
  }
  s_max[t] = mx;
  s_arg[t] = arg;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (t < half) {
      const float v = s_max[t + half];
      const int64_t a = s_arg[t + half];
      if (v > s_max[t] || (v == s_max[t] && a < s_arg[t])) {
        s_max[t] = v;
        s_arg[t] = a;
      }
    }
    __syncthreads();
  }
}

// Row max into s[0] (every thread), by the same comparisons as the CPU op's
// loop; s [kThreads] is free again on return. All kThreads threads must call it.
template <typename T>
__device__ float row_max(const T* z, int64_t c, float* s) {
  const int t = threadIdx.x;
  float mx = load(z, 0);
  for (int64_t j = t; j < c; j += kThreads) mx = load(z, j) > mx ? load(z, j) : mx;
  s[t] = mx;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (t < half) s[t] = s[t + half] > s[t] ? s[t + half] : s[t];
    __syncthreads();
  }
  mx = s[0];
  __syncthreads();  // everyone has read s[0] before the caller reuses s
  return mx;
}

// Per row i: row_loss[i] = -sum_j q_j log softmax(z)_j, row_correct[i] = argmax == label.
template <typename T>
__global__ void xent_forward_rows_kernel(int64_t b, int64_t c, const T* logits, const int32_t* labels,
                                         float smoothing, double* row_loss, int32_t* row_correct) {
  __shared__ float s_max[kThreads];
  __shared__ int64_t s_arg[kThreads];
  __shared__ double s_sum[kThreads];
  __shared__ double s_zsum[kThreads];
  const int t = threadIdx.x;
  for (int64_t i = blockIdx.x; i < b; i += gridDim.x) {
    const T* z = logits + i * c;
    row_argmax(z, c, s_max, s_arg);
    const float mx = s_max[0];
    const int64_t arg = s_arg[0];
    double sum = 0, zsum = 0;
    for (int64_t j = t; j < c; j += kThreads) {
      const float v = load(z, j);
      sum += ::exp(static_cast<double>(v - mx));
      zsum += v;
    }
    s_sum[t] = sum;
    s_zsum[t] = zsum;
    __syncthreads();  // also: every thread has read s_max[0], s_arg[0]
    block_sum(s_sum);
    block_sum(s_zsum);
    if (t == 0) {
      const int32_t label = labels[i];
      double loss;
      if (label < 0 || label >= c) {
        loss = CUDART_NAN;
      } else if (smoothing == 0.f) {
        loss = ::log(s_sum[0]) + mx - load(z, label);
      } else {
        // -sum_j q_j (z_j - lse) = lse - (1 - eps) z_label - (eps / C) sum_j z_j, as sum_j q_j = 1.
        const double lse = ::log(s_sum[0]) + mx;
        const double eps = smoothing;
        loss = lse - (1.0 - eps) * load(z, label) - eps / static_cast<double>(c) * s_zsum[0];
      }
      row_loss[i] = loss;
      row_correct[i] = arg == label ? 1 : 0;
    }
    __syncthreads();  // thread 0 is done with the shared arrays before the next row
  }
}

// One block: *loss_sum += sum_i row_loss[i], *correct += sum_i row_correct[i].
__global__ void xent_sum_kernel(int64_t b, const double* row_loss, const int32_t* row_correct, double* loss_sum,
                                int64_t* correct) {
  __shared__ double s_loss[kThreads];
  __shared__ int64_t s_correct[kThreads];
  const int t = threadIdx.x;
  double l = 0;
  int64_t k = 0;
  for (int64_t i = t; i < b; i += kThreads) {
    l += row_loss[i];
    k += row_correct[i];
  }
  s_loss[t] = l;
  s_correct[t] = k;
  __syncthreads();
  block_sum(s_loss);
  block_sum(s_correct);
  if (t == 0) {
    *loss_sum += s_loss[0];
    *correct += s_correct[0];
  }
}

// The backward's scalars, in fp32 with every operation rounded as written
// (the CPU op's expressions, which the host used to evaluate):
//   factor = scale * *scale_dev (scale when scale_dev is null)
//   off    = factor * smoothing / C    factor * q_j off the label
//   on     = factor * (1 - smoothing)  factor * (q_label - eps / C)
struct XentFactors {
  float factor, off, on;
};
__device__ XentFactors xent_factors(int64_t c, float scale, const float* scale_dev, float smoothing) {
  XentFactors f;
  f.factor = scale_dev != nullptr ? __fmul_rn(scale, *scale_dev) : scale;
  f.off = __fdiv_rn(__fmul_rn(f.factor, smoothing), static_cast<float>(c));
  f.on = __fmul_rn(f.factor, __fsub_rn(1.f, smoothing));
  return f;
}

// Per row: d = exp(z - max) / sum * factor, minus `off` everywhere when smoothing,
// then minus `on` at the label (the CPU op's `scale` or `on`, with factor for scale).
__global__ void xent_backward_kernel(int64_t b, int64_t c, const float* logits, const int32_t* labels, float scale,
                                     const float* scale_dev, float smoothing, float* dlogits) {
  __shared__ float s[kThreads];
  const int t = threadIdx.x;
  const XentFactors f = xent_factors(c, scale, scale_dev, smoothing);
  const bool smooth = smoothing != 0.f;
  for (int64_t i = blockIdx.x; i < b; i += gridDim.x) {
    const float* z = logits + i * c;
    float* d = dlogits + i * c;
    const int32_t label = labels[i];
    const bool valid = label >= 0 && label < c;
    const float mx = row_max(z, c, s);
    // Each thread reads z[j] before writing d[j] of the same j, and the max
    // pass is complete, so dlogits may alias logits.
    float part = 0.f;
    for (int64_t j = t; j < c; j += kThreads) {
      const float e = ::expf(z[j] - mx);
      d[j] = e;
      part += e;
    }
    s[t] = part;
    __syncthreads();
    block_sum(s);
    const float inv = f.factor / s[0];
    for (int64_t j = t; j < c; j += kThreads) {
      if (!valid)
        d[j] = CUDART_NAN_F;
      else if (smooth)
        d[j] = d[j] * inv - f.off;
      else
        d[j] = d[j] * inv;
    }
    __syncthreads();  // the label's element is written; s[0] read by all
    if (t == 0 && valid) d[label] -= smooth ? f.on : f.factor;
    __syncthreads();
  }
}

// 16-bit logits and dlogits (T = bf16 or half): the fp32 kernel above keeps
// exp(z - max) in dlogits between its passes and finishes the label's element
// in a third step; in 16 bits both would round twice. Here the sum pass only
// adds, and the write pass recomputes e = expf(z - max) (the same fp32 value
// the fp32 kernel stored) and finishes each element in registers before one
// rounding store:
//   smoothing:  e * inv - off, then - on at the label     (e * inv - off may fuse, as there)
//   otherwise:  e * inv, then - factor at the label        (the fp32 product rounded first, as there)
// Each thread reads z[j] (all reads of other threads' elements are done by the
// sum's barriers) before writing d[j] of the same j, so dlogits may alias logits.
template <typename T>
__global__ void xent_backward_16_kernel(int64_t b, int64_t c, const T* logits, const int32_t* labels, float scale,
                                        const float* scale_dev, float smoothing, T* dlogits) {
  __shared__ float s[kThreads];
  const int t = threadIdx.x;
  const XentFactors f = xent_factors(c, scale, scale_dev, smoothing);
  const bool smooth = smoothing != 0.f;
  for (int64_t i = blockIdx.x; i < b; i += gridDim.x) {
    const T* z = logits + i * c;
    T* d = dlogits + i * c;
    const int32_t label = labels[i];
    const bool valid = label >= 0 && label < c;
    const float mx = row_max(z, c, s);
    // __fadd_rn: add the rounded e, as the fp32 kernel adds the e it stores
    // (a plain += lets the compiler fuse expf's last product into the add).
    float part = 0.f;
    for (int64_t j = t; j < c; j += kThreads) part = __fadd_rn(part, ::expf(load(z, j) - mx));
    s[t] = part;
    __syncthreads();
    block_sum(s);
    const float inv = f.factor / s[0];
    for (int64_t j = t; j < c; j += kThreads) {
      float v;
      if (!valid) {
        v = CUDART_NAN_F;
      } else {
        const float e = ::expf(load(z, j) - mx);
        if (smooth) {
          v = e * inv - f.off;
          if (j == label) v -= f.on;
        } else {
          v = __fmul_rn(e, inv);
          if (j == label) v -= f.factor;
        }
      }
      store(d, j, v);
    }
    __syncthreads();  // s[0] read by all before the next row reuses s
  }
}

}  // namespace

void softmax_xent_forward_cuda(DType dt, int64_t b, int64_t c, const void* logits, const int32_t* labels,
                               float smoothing, double* row_loss, int32_t* row_correct, double* loss_sum,
                               int64_t* correct, cudaStream_t stream) {
  check_args(b, c, smoothing);
  cuda::dispatch_storage(dt, [&](auto tag) {  // outside the early return: any other dtype throws, even for b = 0
    using T = decltype(tag);
    if (b <= 0) return;
    xent_forward_rows_kernel<T><<<row_blocks(b), kThreads, 0, stream>>>(b, c, static_cast<const T*>(logits), labels,
                                                                        smoothing, row_loss, row_correct);
    LS_CUDA_CHECK_LAUNCH();
    xent_sum_kernel<<<1, kThreads, 0, stream>>>(b, row_loss, row_correct, loss_sum, correct);
    LS_CUDA_CHECK_LAUNCH();
  });
}

void softmax_xent_backward_cuda(DType dt, int64_t b, int64_t c, const void* logits, const int32_t* labels,
                                   float scale, const float* scale_dev, void* dlogits, float smoothing,
                                   cudaStream_t stream) {
  check_args(b, c, smoothing);
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if (b <= 0) return;
    if constexpr (std::is_same_v<T, float>)
      xent_backward_kernel<<<row_blocks(b), kThreads, 0, stream>>>(b, c, static_cast<const float*>(logits), labels,
                                                                   scale, scale_dev, smoothing,
                                                                   static_cast<float*>(dlogits));
    else
      xent_backward_16_kernel<T><<<row_blocks(b), kThreads, 0, stream>>>(
          b, c, static_cast<const T*>(logits), labels, scale, scale_dev, smoothing, static_cast<T*>(dlogits));
    LS_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::ops
