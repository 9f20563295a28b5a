// Trainer: where each micro-step's batch comes from -- the prefetch loader's
// next batch (on the GPU, its upload queued on the copy stream), or
// --benchmark-input fixed's one batch, made once and kept on the device.
// (trainer.h has the class; trainer.cpp the loop.)
#include "trainer.h"

namespace lockstep {

const Batch& Trainer::next_batch(PrefetchLoader& loader) {
  if (fixed_batch_.inputs.defined()) return fixed_batch_;
  const Batch& hb = loader.next();
  return dev_ ? dev_->upload(hb) : hb;  // GPU: queued copy on the copy stream
}

void Trainer::make_fixed_batch(PrefetchLoader& loader) {
  loader.begin(1, [&](int64_t, std::vector<int64_t>& out) {
    sampler_->indices(progress_.epoch, progress_.step_in_epoch, out, 0);
  });
  const Batch& hb = loader.next();
  const std::shared_ptr<Allocator> where = dev_ ? dev_->device_allocator() : cpu_allocator();
  fixed_batch_ = Batch{hb.inputs.to(where), hb.labels.to(where), 0};
}

}  // namespace lockstep
