// --cuda-graph end to end below the trainer: DeviceRuntime (set_step,
// upload, run_step, invalidate_graphs) with the NCCL gradient reducer and the
// DistributedOptimizer, against the trainer's plain eager GPU path on a twin
// model. keras-cnn (dropout keyed by the device step) takes 12 SGD steps with
// a changing learning rate: 2 eager, each upload slot's step captured, 2
// replays; then the graphs are invalidated (as after an evaluation): 2 eager,
// two captures and 2 replays again. Parameters and loss sums must equal the
// eager twin's bit for bit after every step (one rank: ncclAvg of one
// contribution is exact; the kernels and their inputs are the same).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "comm/nccl_communicator.h"
#include "cuda/context.h"
#include "data/loader.h"
#include "device/device_runtime.h"
#include "mpi_gpu_cases.h"
#include "mpi_world.h"
#include "nn/loss.h"
#include "optim/distributed_optimizer.h"
#include "optim/device_step.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;
using lockstep::testing::world;

TEST_CASE("--cuda-graph through DeviceRuntime and the NCCL reducer equals the eager GPU path bit for bit", "[nccl]") {
  if (!lockstep::testing::nccl_case_can_run()) return;
  Communicator& w = world();
  if (w.size() != 1) return;  // bitwise equality is claimed for one rank (NCCL may pick other algorithms in graphs)

  DeviceRuntimeOptions o;
  o.transport = GpuTransport::Nccl;
  o.graphs = true;
  o.collective_timeout_s = 120;
  DeviceRuntime dev(o, w);
  dev.connect(w);
  REQUIRE(dev.nccl() != nullptr);
  REQUIRE(dev.device_step() != nullptr);  // a fixed scale of 1: the step's device-side scalars
  cuda::Context& gpu = dev.gpu();

  const models::ModelSpec spec{Shape{1, 28, 28}, 10};
  const int64_t batch = 16;
  struct Replica {
    std::unique_ptr<Model> m;
    std::unique_ptr<Optimizer> opt;
    std::unique_ptr<DistributedOptimizer> dopt;
    LossAccumulator loss;
  } eager, graph;
  for (Replica* r : {&eager, &graph}) {
    r->m = models::build_model("keras-cnn", spec, 7);
    r->m->to(dev.device_allocator());
    OptimizerConfig oc;
    oc.momentum = 0.9f;
    oc.weight_decay = 1e-4f;
    r->opt = make_optimizer(r->m->params(), oc);
    r->opt->use_gpu(gpu);
    DistributedOptions o;
    o.gpu = &gpu;
    o.nccl = dev.nccl();
    o.timeout_s = 120;
    if (r == &graph) {
      r->opt->use_device_step(dev.device_step()->state_dev());
      o.device_step = dev.device_step();
    }
    r->dopt = std::make_unique<DistributedOptimizer>(*r->opt, r->m->params(), w, o);
    DistributedOptimizer* d = r->dopt.get();
    r->m->net().set_grad_ready_hook([d](int64_t end) { d->on_gradients_ready(end); });
  }

  // One page-locked host batch, refilled every step (as the loader's slots are).
  Batch hb;
  hb.inputs = Tensor::zeros(eager.m->batch_shape(batch), DType::F32, dev.host_allocator());
  hb.labels = Tensor::zeros(Shape{batch}, DType::I32, dev.host_allocator());
  std::mt19937 gen(12);
  std::uniform_real_distribution<float> pixel(0.f, 1.f);

  // The step both replicas take; `step_dev` set: the graph's device-side step.
  auto queue_step = [&](Replica& r, const Tensor& x, const Tensor& y, int64_t s, float lr, const int64_t* step_dev) {
    ForwardContext fc{true, 3, s, 0, nullptr, &gpu};
    fc.step_dev = step_dev;
    const Tensor& z = r.m->net().forward(x, fc);
    r.loss.add(z, y, 0.f, &gpu);
    Tensor dz = r.m->net().output_grad();
    softmax_cross_entropy_backward(z, y, 1.f / static_cast<float>(batch), dz, 0.f, &gpu);
    r.dopt->begin_backward(true);
    r.m->net().backward(BackwardContext{false, nullptr, &gpu});
    r.dopt->step(lr);
  };

  int replays = 0;
  for (int64_t s = 0; s < 12; ++s) {
    CAPTURE(s);
    if (s == 6) dev.invalidate_graphs();  // as after an evaluation: warm up and capture again
    for (int64_t i = 0; i < hb.inputs.numel(); ++i) hb.inputs.data<float>()[i] = pixel(gen);
    for (int64_t i = 0; i < batch; ++i) hb.labels.data<int32_t>()[i] = static_cast<int32_t>(gen() % 10);
    const float lr = 0.05f / static_cast<float>(1 + s);

    // Eager twin: the trainer's plain GPU path (host lr, host dropout keys).
    const Tensor xe = hb.inputs.to(dev.device_allocator()), ye = hb.labels.to(dev.device_allocator());
    queue_step(eager, xe, ye, s, lr, nullptr);

    // Graph replica: as Trainer::graph_step.
    const Batch& b = dev.upload(hb);
    const DeviceRuntime::StepScalars sp = dev.set_step(lr, s);
    dev.device_step()->read_lr_from(sp.lr);
    const auto how = dev.run_step(b.inputs.raw_data(), [&] { queue_step(graph, b.inputs, b.labels, s, lr, sp.step); });
    if (how == DeviceRuntime::StepRun::Replayed) {
      graph.loss.count_replayed(batch);
      ++replays;
    }
    CHECK((how == DeviceRuntime::StepRun::Eager) == (s == 0 || s == 1 || s == 6 || s == 7));

    dev.wait_graph_steps();
    eager.dopt->drain();
    graph.dopt->drain();
    gpu.synchronize();
    REQUIRE(on_host(graph.m->params().values()).to_vector() == on_host(eager.m->params().values()).to_vector());
  }
  CHECK(dev.graph_captures() == 4);  // two upload slots, twice
  CHECK(replays == 4);
  const LossStats le = eager.loss.read(), lg = graph.loss.read();
  CHECK(lg.count == le.count);
  CHECK(lg.loss_sum == le.loss_sum);
  CHECK(lg.correct == le.correct);
  CHECK(dev.device_step()->read().applied == 12);
}
