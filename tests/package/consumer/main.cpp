// A user's data-parallel training program on an installed liblockstep: an MLP
// built layer by layer (as in README's "Using the library") trained with a
// DistributedOptimizer, gradients averaged in buckets during backward and
// clipped to a global norm (DistributedOptions::max_grad_norm), on a
// synthetic task every rank generates alike (a fixed random linear teacher);
// each rank trains on its shard of the global batch; with --zero-stage-1 the
// optimizer state is sharded over the ranks (DistributedOptions::zero_stage).
// With --gpu (a package built with CUDA) the same training runs on the rank's
// GPU, gradients averaged by NCCL, unclipped (README's "On the GPU").
// Then a built-in model from the registry (lockstep::models) runs a forward pass.
// OpenBLAS runs the kernels the trainer would (use_fast_blas_kernels), named
// at the end of the line.
// Prints "consumer: ok ..." on rank 0 and exits 0 when the loss fell and every
// replica holds the same weights bit for bit; one line and exit 1 otherwise.
#include <lockstep/comm/mpi_session.h>
#include <lockstep/core/blas_kernels.h>
#include <lockstep/core/cpu.h>
#include <lockstep/core/error.h>
#include <lockstep/models/registry.h>
#include <lockstep/nn/layers.h>
#include <lockstep/nn/loss.h>
#include <lockstep/nn/model.h>
#include <lockstep/optim/distributed_optimizer.h>
#include <lockstep/optim/optimizer.h>
#ifdef LOCKSTEP_HAVE_CUDA
#include <lockstep/comm/nccl_communicator.h>
#include <lockstep/cuda/context.h>
#include <lockstep/cuda/device.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

constexpr int64_t kFeatures = 32, kClasses = 4, kGlobalBatch = 64, kSteps = 40;
constexpr float kMaxGradNorm = 0.3f;  // under every step's norm here: each update is clipped

// Sample i of the task: x ~ N(0, 1)^kFeatures, label = argmax of teacher * x.
struct Task {
  std::vector<float> teacher = std::vector<float>(kClasses * kFeatures);
  Task() {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    for (float& t : teacher) t = nd(rng);
  }
  void sample(uint64_t index, float* x, int32_t& label) const {
    std::mt19937 rng(static_cast<uint32_t>(1000 + index));
    std::normal_distribution<float> nd;
    for (int64_t f = 0; f < kFeatures; ++f) x[f] = nd(rng);
    float best = -INFINITY;
    for (int64_t c = 0; c < kClasses; ++c) {
      float z = 0;
      for (int64_t f = 0; f < kFeatures; ++f) z += teacher[c * kFeatures + f] * x[f];
      if (z > best) best = z, label = static_cast<int32_t>(c);
    }
  }
};

int run(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  auto comm = mpi.world();
  const int rank = comm->rank(), size = comm->size();
  LS_CHECK(kGlobalBatch % size == 0, "global batch {} not divisible by {} ranks", kGlobalBatch, size);
  const int64_t local = kGlobalBatch / size;
  set_compute_threads(1);

  Sequential net;
  net.add(std::make_unique<Flatten>());
  net.add(std::make_unique<Linear>(kFeatures, 64));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Linear>(64, kClasses));
  Model model("consumer-mlp", std::move(net), Shape{1, 1, kFeatures}, kClasses, /*seed=*/100 + rank);
  auto opt = make_optimizer(model.params(), OptimizerConfig{});
  DistributedOptions options;
  options.max_grad_norm = kMaxGradNorm;
  const std::string mode = argc > 1 ? argv[1] : "";
  LS_CHECK(mode.empty() || mode == "--zero-stage-1" || mode == "--gpu", "unknown option '{}'", mode);
  options.zero_stage = mode == "--zero-stage-1" ? 1 : 0;
  cuda::Context* gpu = nullptr;         // --gpu: the rank's device context
  std::shared_ptr<Allocator> on_device;  // --gpu: its memory
#ifdef LOCKSTEP_HAVE_CUDA
  std::unique_ptr<cuda::Context> context;
  std::unique_ptr<NcclCommunicator> nccl;
  if (mode == "--gpu") {
    // GPU = local rank; NCCL's unique id goes from rank 0 to the others over MPI.
    context = std::make_unique<cuda::Context>(
        cuda::select_device(comm->local_rank(), comm->local_size(), /*exclusive=*/true, "--gpu"));
    gpu = context.get();
    nccl = NcclCommunicator::create(*comm, gpu->device());
    on_device = gpu->allocator();
    model.to(on_device);  // parameters, gradients and buffers move to the GPU
    opt->use_gpu(*gpu);   // and the optimizer's state and updates
    options.gpu = gpu;
    options.nccl = nccl.get();
    options.max_grad_norm = 0.f;  // clipping on the GPU goes through a DeviceStep (optim/device_step.h)
  }
#else
  LS_CHECK(mode != "--gpu", "--gpu: this lockstep was built without CUDA");
#endif
  DistributedOptimizer dopt(*opt, model.params(), *comm, options);
  dopt.broadcast_state(0);  // every replica starts from rank 0's weights (seeds differ on purpose)
  model.net().set_grad_ready_hook([&](int64_t end) { dopt.on_gradients_ready(end); });

  const Task task;
  Tensor x = Tensor::zeros(model.batch_shape(local));
  Tensor labels = Tensor::zeros(Shape{local}, DType::I32);
  double first = 0, last = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    for (int64_t i = 0; i < local; ++i) {
      const uint64_t index = static_cast<uint64_t>(step * kGlobalBatch + rank * local + i);
      task.sample(index, x.data<float>() + i * kFeatures, labels.data<int32_t>()[i]);
    }
    // On the GPU the batch is copied to the device (a real program would
    // reuse device buffers and copy asynchronously from page-locked memory).
    const Tensor xs = on_device ? x.to(on_device) : x, ys = on_device ? labels.to(on_device) : labels;
    ForwardContext fctx;
    fctx.step = step;
    fctx.gpu = gpu;
    const Tensor& logits = model.net().forward(xs, fctx);
    LossAccumulator acc;  // on the GPU the sums stay on the device until read()
    acc.add(logits, ys, 0.f, gpu);
    Tensor loss = Tensor::from_vector(Shape{1}, {static_cast<float>(acc.read().loss_sum)});
    comm->allreduce(loss, ReduceOp::Sum);
    const double mean = loss.data<float>()[0] / kGlobalBatch;
    (step == 0 ? first : last) = mean;
    Tensor dlogits = model.net().output_grad();  // this shard's mean; the optimizer averages over ranks
    softmax_cross_entropy_backward(logits, ys, 1.f / static_cast<float>(local), dlogits, 0.f, gpu);
    dopt.begin_backward(true);
    BackwardContext bctx;
    bctx.gpu = gpu;
    model.net().backward(bctx);
    dopt.step(0.1f);
  }

  // Every replica must hold rank 0's weights exactly.
  dopt.drain();  // the last step's collectives and update done (GPU); a no-op on the CPU
  const Tensor mine = on_host(model.params().values());
  Tensor root = mine.to(cpu_allocator());
  comm->broadcast(root, 0);
  int differ = std::memcmp(mine.data<float>(), root.data<float>(), static_cast<size_t>(mine.numel()) * 4) != 0;
  Tensor flag = Tensor::from_vector(Shape{1}, {static_cast<float>(differ)});
  comm->allreduce(flag, ReduceOp::Sum);

  // A built-in model from the registry, one forward pass.
  auto lenet = models::build_model("lenet", models::ModelSpec{}, /*seed=*/1);
  Tensor images = Tensor::zeros(lenet->batch_shape(2));
  const Tensor& out = lenet->net().forward(images, ForwardContext{false});

  if (rank == 0) {
    if (flag.data<float>()[0] != 0) return std::fprintf(stderr, "consumer: replicas differ after training\n"), 1;
    if (!(last < 0.5 * first))
      return std::fprintf(stderr, "consumer: loss %.4f -> %.4f did not halve\n", first, last), 1;
    if (!gpu && dopt.clipped_steps() == 0)
      return std::fprintf(stderr, "consumer: no step clipped (last norm %.4f)\n", dopt.last_grad_norm()), 1;
    if (out.shape() != Shape{2, 10})
      return std::fprintf(stderr, "consumer: lenet gave %s\n", out.shape().str().c_str()), 1;
    std::printf("consumer: ok on %d ranks%s: loss %.9f -> %.9f in %lld steps (%lld clipped), replicas identical, "
                "optimizer state %lld of %lld values here, lenet -> %s, OpenBLAS %s\n",
                size, gpu ? " (GPUs, NCCL)" : "", first, last, static_cast<long long>(kSteps), static_cast<long long>(dopt.clipped_steps()),
                static_cast<long long>(opt->state_numel()), static_cast<long long>(model.params().padded_numel()),
                out.shape().str().c_str(), blas_kernels_in_use().describe().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS's kernels for this CPU, as the trainer runs them: first in main(),
  // before MPI starts (it may re-execute the program).
  use_fast_blas_kernels(argv);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
