// How far rounding alone moves one training step of a host model: the control
// that bounds the GPU model test's 16-bit comparisons (tests/gpu/
// test_gpu_model.cpp), shared with the CPU test that checks it
// (unit/test_rounding_control.cpp).
//
// cpu_train_pass: forward in training mode (step `step`: dropout keys),
// softmax cross-entropy averaged over the batch, backward; the gradients stay
// in the model. rounding_control: the same pass on a fresh copy of `ref`'s
// model whose parameters and input are each moved by a relative
// uniform(-u, u) (u = 2^-8 is one bf16 rounding, 2^-11 one fp16 rounding),
// against `ref`'s own pass (its logits, loss, and gradients left in `ref`):
// relative L2 of each figure. Host models only.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "nn/loss.h"
#include "registry.h"

namespace lockstep::testing {

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  if (a.size() != ref.size()) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// logits (a reference into the model's output), loss
inline std::pair<const Tensor&, LossStats> cpu_train_pass(Model& m, const Tensor& x, const Tensor& labels, int step) {
  const Tensor& z = m.net().forward(x, ForwardContext{true, 1, step, 0});
  LossAccumulator acc;
  acc.add(z, labels);
  Tensor dz = m.net().output_grad();
  softmax_cross_entropy_backward(z, labels, 1.f / static_cast<float>(labels.numel()), dz);
  m.net().backward(BackwardContext{});
  return {z, acc.read()};
}

struct RoundingControl {
  double logits = 0, loss = 0, all_grads = 0;
  std::vector<double> grads;  // per parameter, in declaration order
};

// `model`, `spec`: how `ref` was built (any seed: the weights are copied).
// ref_logits, ref_loss: ref's pass on (x, labels) at `step`, whose gradients ref holds.
inline RoundingControl rounding_control(const std::string& model, const models::ModelSpec& spec, const Model& ref,
                                        const Tensor& x, const Tensor& labels, int step, float u,
                                        const std::vector<float>& ref_logits, const LossStats& ref_loss) {
  auto m = models::build_model(model, spec, 1);
  Rng rng(1234 + static_cast<uint64_t>(step));
  const auto moved = [&](float v) { return v + v * rng.uniform(-u, u); };
  m->params().values().copy_from(ref.params().values());
  for (float& v : m->params().values().span<float>()) v = moved(v);
  Tensor xp = Tensor::zeros(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) xp.data<float>()[i] = moved(x.data<float>()[i]);
  const auto [z, loss] = cpu_train_pass(*m, xp, labels, step);
  RoundingControl out;
  out.logits = rel_l2(z.to_vector(), ref_logits);
  out.loss = rel_l2({static_cast<float>(loss.loss_sum)}, {static_cast<float>(ref_loss.loss_sum)});
  out.all_grads = rel_l2(m->params().grads().to_vector(), ref.params().grads().to_vector());
  for (size_t i = 0; i < ref.params().params().size(); ++i)
    out.grads.push_back(rel_l2(m->params().params()[i].grad.to_vector(), ref.params().params()[i].grad.to_vector()));
  return out;
}

}  // namespace lockstep::testing
