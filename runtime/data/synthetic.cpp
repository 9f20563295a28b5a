// Synthetic samples: label = hash(i) mod classes; pixels = pattern(label) + noise.
#include "data/synthetic.h"

#include "core/hash.h"
#include "core/rng.h"
#include "ops/simd.h"

namespace lockstep {
namespace {

// One sample's `per` values: pattern(label) + noise(sample). Compiled for
// AVX-512 and AVX2 as well as baseline x86-64, picked at load time: the two
// 64-bit hashes per value vectorise. Integer hashing and the exact 24-bit
// conversion give the same bits in every clone; ISO C++ (no extensions)
// keeps gcc from fusing the final multiply-adds.
LS_SIMD_CLONES_AVX512 void fill_values(uint64_t pattern_key, uint64_t noise_key, int64_t per, float* d) {
  for (int64_t e = 0; e < per; ++e) {
    const float pattern = u64_to_unit_float(rng_u64(pattern_key, static_cast<uint64_t>(e))) - 0.5f;
    const float noise = u64_to_unit_float(rng_u64(noise_key, static_cast<uint64_t>(e))) - 0.5f;
    d[e] = 0.25f * pattern + 2.f * noise;  // hard enough that accuracy is not trivially 100%
  }
}

}  // namespace

SyntheticDataset::SyntheticDataset(std::string name, Shape sample_shape, int64_t num_classes, int64_t size,
                                   uint64_t seed, int64_t first)
    : name_(std::move(name)), shape_(sample_shape), classes_(num_classes), size_(size), seed_(seed), first_(first) {
  LS_CHECK_INPUT(num_classes >= 2, "synthetic data needs at least 2 classes, got {}", num_classes);
  LS_CHECK_INPUT(size > 0, "synthetic data needs at least 1 sample, got {}", size);
  LS_CHECK_INPUT(sample_shape.rank() == 3 && sample_shape.numel() > 0, "synthetic sample shape {} must be [C, H, W]",
                 sample_shape.str());
}

void SyntheticDataset::fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const {
  auto* images = static_cast<float*>(inputs);
  const int64_t per = shape_.numel();
  const uint64_t label_key = rng_key(seed_, fnv1a("synthetic-label"));
  const uint64_t noise_key = rng_key(seed_, fnv1a("synthetic-noise"));
  const uint64_t pattern_key = rng_key(seed_, fnv1a("synthetic-pattern"));
  for (size_t k = 0; k < indices.size(); ++k) {
    LS_CHECK(indices[k] >= 0 && indices[k] < size_, "{}: sample index {} outside [0, {})", name_, indices[k], size_);
    const int64_t i = first_ + indices[k];
    const auto label = static_cast<int32_t>(rng_u64(label_key, static_cast<uint64_t>(i)) % static_cast<uint64_t>(classes_));
    labels[k] = label;
    float* d = images + static_cast<int64_t>(k) * per;
    fill_values(rng_key(pattern_key, static_cast<uint64_t>(label)), rng_key(noise_key, static_cast<uint64_t>(i)),
                per, d);
  }
}

}  // namespace lockstep
