// The least work a training step must do, to hold a measured step time
// against the machine's rates (scripts/gpu/bench_table.py divides by the
// matmul rate and the copy bandwidth that torch_gpu.py --floor measures):
//   flops  3 x the forward's (the backward computes data and weight gradients,
//          twice the forward's multiply-adds) for every sample of the step.
//   bytes  activations: the forward's traffic (Module::forward_traffic: each
//          layer's input read and output written once) twice -- a layer's
//          backward reads its output's gradient and writes its input's, the
//          same elements -- less the model input's gradient, never computed;
//          at `activation_bytes` per element (2 in bf16/fp16, 4 in fp32).
//          Parameters, fp32: each micro-batch reads the weights once and
//          writes (or adds to) their gradients once; the optimizer's pass
//          reads parameter, gradient and its `state_arrays` state tensors and
//          writes parameter and state.
// A floor, not an estimate: it leaves out what layer-by-layer training
// cannot avoid but a fused one can (batch norm's second read for its
// statistics, saved activations read again by weight gradients, masks and
// pooling indices, the loss) and all communication.
#pragma once

#include <cstdint>

namespace lockstep {

struct StepFloor {
  double flops = 0;  // per step
  double bytes = 0;  // per step
};

// One step of `accumulate_steps` micro-batches of `micro_batch` samples.
// Per sample: `forward_flops` and `forward_traffic` elements, input of
// `input_elements`; `parameters` fp32 values with `state_arrays` optimizer
// state tensors (SGD momentum 1, Adam 2, plain SGD 0).
inline StepFloor step_floor(int64_t forward_flops, int64_t forward_traffic, int64_t input_elements,
                            int64_t micro_batch, int accumulate_steps, int64_t parameters, int state_arrays,
                            int activation_bytes) {
  const double samples = static_cast<double>(micro_batch) * accumulate_steps;
  StepFloor f;
  f.flops = 3.0 * static_cast<double>(forward_flops) * samples;
  const double activation_elements =
      (2.0 * static_cast<double>(forward_traffic) - static_cast<double>(input_elements)) * samples;
  const double parameter_arrays = 2.0 * accumulate_steps + 3.0 + 2.0 * state_arrays;  // see the header
  f.bytes = activation_elements * activation_bytes + parameter_arrays * 4.0 * static_cast<double>(parameters);
  return f;
}

}  // namespace lockstep
