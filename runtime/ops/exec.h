// Exec: where an op runs, besides what its tensors say. A tensor carries its
// device and dtype; an op on GPU tensors also needs the device context (its
// stream, caching allocator, cuBLAS and cuDNN handles, workspace), and every op
// names its caller in its error messages. CPU ops ignore `gpu`.
//
// Every family in ops/ has one device-neutral header (ops/<family>/<family>.h)
// whose entry points take tensors and an Exec; its dispatch file
// (ops/<family>/<family>.cpp) is the only place that picks the CPU or CUDA
// kernels and the fp32 or 16-bit ones (docs/design.md, "How to add an op").
#pragma once

namespace lockstep::cuda {
class Context;
}

namespace lockstep::ops {

struct Exec {
  cuda::Context* gpu = nullptr;  // the context GPU tensors' work is queued on; null for CPU-only work
  const char* who = "op";        // the caller (a layer's name), for error messages
};

}  // namespace lockstep::ops
