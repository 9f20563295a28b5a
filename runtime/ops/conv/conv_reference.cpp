// The race's accurate reference algorithm: choice and call (ops/conv/conv_reference.h).
#include "ops/conv/conv_reference.h"

#include <vector>

namespace lockstep::ops {
namespace {

// cudnnGet*WorkspaceSize for `algo` of `dir`: its success also says that cuDNN
// supports the algorithm for these descriptors and math type.
cudnnStatus_t workspace_size(cudnnHandle_t h, const ConvDescriptors& d, ConvDirection dir, int algo, size_t* bytes) {
  switch (dir) {
    case ConvDirection::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case ConvDirection::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
    case ConvDirection::BackwardFilter: break;
  }
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
}

}  // namespace

std::optional<ConvReference> find_reference(cudnnHandle_t handle, const ConvDescriptors& d, ConvDirection dir,
                                            bool sixteen_bit, size_t limit) {
  // Deterministic, no transforms; the forward's precomputed-index variant first (it is the faster).
  std::vector<int> algos = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1};
  if (dir == ConvDirection::Forward)
    algos = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
  else if (dir == ConvDirection::BackwardData)
    algos = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1};
  std::vector<cudnnMathType_t> maths = {CUDNN_FMA_MATH};
  if (sixteen_bit) maths = {CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH};
  for (const int algo : algos)
    for (const cudnnMathType_t math : maths) {
      if (sixteen_bit && cudnnSetConvolutionMathType(d.conv, math) != CUDNN_STATUS_SUCCESS) continue;
      size_t bytes = 0;
      if (workspace_size(handle, d, dir, algo, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= limit)
        return ConvReference{dir, algo, math, bytes};
    }
  return std::nullopt;
}

cudnnStatus_t run_reference(cudnnHandle_t handle, const ConvDescriptors& d, const ConvReference& r, bool sixteen_bit,
                            const void* a, const void* b, void* out, void* workspace) {
  const float one = 1.f, zero = 0.f;  // alpha and beta are fp32 for every non-double configuration
  if (sixteen_bit) {
    const cudnnStatus_t st = cudnnSetConvolutionMathType(d.conv, r.math);
    if (st != CUDNN_STATUS_SUCCESS) return st;
  }
  switch (r.dir) {
    case ConvDirection::Forward:
      return cudnnConvolutionForward(handle, &one, d.x, a, d.w, b, d.conv,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(r.algo), workspace, r.workspace_bytes,
                                     &zero, d.y, out);
    case ConvDirection::BackwardData:
      return cudnnConvolutionBackwardData(handle, &one, d.w, a, d.y, b, d.conv,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(r.algo), workspace,
                                          r.workspace_bytes, &zero, d.x, out);
    case ConvDirection::BackwardFilter: break;
  }
  return cudnnConvolutionBackwardFilter(handle, &one, d.x, a, d.y, b, d.conv,
                                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(r.algo), workspace,
                                        r.workspace_bytes, &zero, d.w, out);
}

}  // namespace lockstep::ops
