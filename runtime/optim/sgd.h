// SGD with momentum, Nesterov and L2 weight decay, as torch.optim.SGD
// (dampening 0):  g = grad + wd*p;  buf = m*buf + g;  p -= lr * (nesterov ? g + m*buf : buf)
#pragma once

#include "optim/optimizer.h"

namespace lockstep {

class Sgd final : public Optimizer {
 public:
  Sgd(ParameterStore& params, const OptimizerConfig& config);
  std::string describe() const override;

 protected:
  std::vector<std::pair<std::string, Tensor*>> state_slots() override;
  void update(int64_t begin, int64_t end, int64_t state_begin, float lr, float scale, bool decay) override;

 private:
  Tensor momentum_;  // [state_numel]
};

}  // namespace lockstep
