// Adam and AdamW, as torch.optim.Adam / AdamW:
//   adam:  g = grad + wd*p                 adamw: p *= 1 - lr*wd;  g = grad
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;  t = steps + 1
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
#pragma once

#include "optim/optimizer.h"

namespace lockstep {

class Adam final : public Optimizer {
 public:
  Adam(ParameterStore& params, const OptimizerConfig& config);
  std::string describe() const override;

 protected:
  std::vector<std::pair<std::string, Tensor*>> state_slots() override;
  void update(int64_t begin, int64_t end, int64_t state_begin, float lr, float scale, bool decay) override;

 private:
  bool decoupled_;  // AdamW
  Tensor m_, v_;    // [state_numel] first and second moments
};

}  // namespace lockstep
