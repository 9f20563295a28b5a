// ParameterStore layout: reverse declaration order, aligned offsets.
#include "nn/parameter_store.h"

namespace lockstep {

Parameter* ParameterStore::declare(std::string name, const Shape& shape, bool decay) {
  LS_CHECK(!finalized_, "parameter {} declared after the store was finalised", name);
  LS_CHECK(find(name) == nullptr, "parameter {} declared twice", name);
  Parameter p;
  p.name = std::move(name);
  p.shape = shape;
  p.decay = decay;
  params_.push_back(std::move(p));
  return &params_.back();
}

void ParameterStore::finalize(std::shared_ptr<Allocator> allocator) {
  LS_CHECK(!finalized_, "parameter store finalised twice");
  int64_t offset = 0;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    it->offset = offset;
    offset += (it->numel() + kAlignElements - 1) / kAlignElements * kAlignElements;
  }
  padded_numel_ = offset;
  values_ = Tensor::zeros(Shape{padded_numel_}, DType::F32, allocator);
  grads_ = Tensor::zeros(Shape{padded_numel_}, DType::F32, allocator);
  for (auto& p : params_) {
    p.value = values_.slice(p.offset, p.shape);
    p.grad = grads_.slice(p.offset, p.shape);
  }
  finalized_ = true;
}

void ParameterStore::rebind_grads(Tensor buffer) {
  LS_CHECK(finalized_, "rebind_grads before finalize");
  LS_CHECK(buffer.dtype() == DType::F32 && buffer.numel() == padded_numel_, "gradient buffer must be F32 [{}], got {} {}",
           padded_numel_, dtype_name(buffer.dtype()), buffer.shape().str());
  buffer.copy_from(grads_);
  grads_ = std::move(buffer);
  for (auto& p : params_) p.grad = grads_.slice(p.offset, p.shape);
}

void ParameterStore::rebind_values(Tensor buffer) {
  LS_CHECK(finalized_, "rebind_values before finalize");
  LS_CHECK(buffer.dtype() == DType::F32 && buffer.numel() == padded_numel_, "value buffer must be F32 [{}], got {} {}",
           padded_numel_, dtype_name(buffer.dtype()), buffer.shape().str());
  buffer.copy_from(values_);
  values_ = std::move(buffer);
  for (auto& p : params_) p.value = values_.slice(p.offset, p.shape);
}

void ParameterStore::to(const std::shared_ptr<Allocator>& allocator) {
  LS_CHECK(finalized_, "ParameterStore::to before finalize");
  if (padded_numel_ == 0) return;  // nothing to move (a model without buffers)
  values_ = values_.to(allocator);
  grads_ = grads_.to(allocator);
  for (auto& p : params_) {
    p.value = values_.slice(p.offset, p.shape);
    p.grad = grads_.slice(p.offset, p.shape);
  }
}

const Parameter* ParameterStore::find(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

int64_t ParameterStore::numel() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.numel();
  return n;
}

}  // namespace lockstep
