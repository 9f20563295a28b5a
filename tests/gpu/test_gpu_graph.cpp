// --cuda-graph's pieces on the GPU: a captured CUDA graph replays what eager
// calls queue; dropout drawing its key from a device step counter gives the
// host key's masks, also when replayed with a new step; and a whole model's
// training step (forward, loss, backward, the device step state, SGD update)
// captured once and replayed gives bitwise the parameters of eager steps --
// the kernels and their inputs are the same, only the launches differ.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/rng.h"
#include "cuda/graph.h"
#include "gpu_test_util.h"
#include "nn/loss.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/elementwise/elementwise_cuda.h"
#include "optim/device_step.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

// A device int64 / float holding `v`. A pageable cudaMemcpy may return before
// the data has landed, and the contexts' streams do not wait for the legacy
// stream: synchronise the device before the next launch.
void set_device_i64(int64_t* dst, int64_t v) {
  LS_CUDA_CHECK(cudaMemcpy(dst, &v, sizeof v, cudaMemcpyHostToDevice));
  LS_CUDA_CHECK(cudaDeviceSynchronize());
}
void set_device_f32(float* dst, float v) {
  LS_CUDA_CHECK(cudaMemcpy(dst, &v, sizeof v, cudaMemcpyHostToDevice));
  LS_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "a captured CUDA graph replays the eager work", "[graph]") {
  const int64_t n = 10000;
  const auto x0 = random_vector(n, 1), y0 = random_vector(n, 2);
  Tensor xe = upload(Shape{n}, x0), ye = upload(Shape{n}, y0);
  Tensor xg = upload(Shape{n}, x0), yg = upload(Shape{n}, y0);
  ctx.synchronize();
  auto work = [&](Tensor& x, Tensor& y) {
    ops::scale_cuda(n, 1.5f, x.data<float>(), ctx.raw_stream());
    ops::add_inplace_cuda(DType::F32, n, x.data<float>(), y.data<float>(), ctx.raw_stream());
    ops::relu_forward_cuda(DType::F32, n, y.data<float>(), y.data<float>(), ctx.raw_stream());
  };
  const cuda::CudaGraph g = cuda::CudaGraph::capture(ctx.stream(), [&] { work(xg, yg); });
  REQUIRE(g.valid());
  CHECK(g.nodes() == 3);
  CHECK(download(xg) == x0);  // capture runs nothing
  for (int rep = 0; rep < 3; ++rep) {
    work(xe, ye);
    g.launch(ctx.stream());
  }
  CHECK(download(xg) == download(xe));
  CHECK(download(yg) == download(ye));
  // A throw inside the capture ends it: the stream is usable afterwards.
  CHECK_THROWS(cuda::CudaGraph::capture(ctx.stream(), [] { throw std::runtime_error("inside capture"); }));
  work(xe, ye);
  ctx.synchronize();
}

TEST_CASE_METHOD(GpuFixture, "dropout keyed by a device step counter draws the host key's masks", "[graph]") {
  const int64_t rows = 6, row_len = 333, n = rows * row_len;
  const float p = 0.3f;
  const uint64_t seed = 11, stream_id = 0xABCDEF;
  const auto x = random_vector(n, 3);
  Tensor xd = upload(Shape{n}, x), yd = device_zeros(Shape{n}), step = device_zeros(Shape{1}, DType::I64);
  Tensor mask = device_zeros(Shape{n}, DType::U8);
  auto host_mask = [&](int64_t s) {
    std::vector<float> y(static_cast<size_t>(n));
    std::vector<uint8_t> m(static_cast<size_t>(n));
    ops::dropout_forward_cpu(rows, row_len, 5, rng_key(seed, stream_id, static_cast<uint64_t>(s)), p, x.data(),
                             y.data(), m.data());
    return std::make_pair(y, m);
  };
  auto device_mask = [&]() {
    ctx.synchronize();
    std::vector<uint8_t> m(static_cast<size_t>(n));
    LS_CUDA_CHECK(cudaMemcpy(m.data(), mask.raw_data(), static_cast<size_t>(n), cudaMemcpyDeviceToHost));
    return m;
  };
  const ops::DeviceDropoutKey dk{seed, stream_id, step.data<int64_t>()};
  // `key` 0 is ignored when dk.step is set.
  const cuda::CudaGraph g = cuda::CudaGraph::capture(ctx.stream(), [&] {
    ops::dropout_forward_cuda(DType::F32, rows, row_len, 5, 0, p, xd.data<float>(), yd.data<float>(), mask.data<uint8_t>(),
                              ctx.raw_stream(), dk);
  });
  for (int64_t s : {int64_t{0}, int64_t{7}, int64_t{123456789}}) {
    CAPTURE(s);
    set_device_i64(step.data<int64_t>(), s);
    g.launch(ctx.stream());
    const auto [y_cpu, m_cpu] = host_mask(s);
    CHECK(device_mask() == m_cpu);
    CHECK(download(yd) == y_cpu);
  }
}

TEST_CASE("a model's training step captured once and replayed matches eager steps bit for bit", "[graph]") {
  for (const char* model : {"keras-cnn", "resnet20"}) {  // dropout; batch norm and residual blocks
    SECTION(model) {
      GpuFixture f;
      const bool cifar = std::string(model) == "resnet20";
      const models::ModelSpec spec{cifar ? Shape{3, 32, 32} : Shape{1, 28, 28}, 10};
      const int64_t batch = 8;
      // Two copies of the model, each with SGD (momentum) reading its step
      // scalars (learning rate, gradient factor) from a device state.
      struct Replica {
        std::unique_ptr<Model> m;
        std::unique_ptr<Optimizer> opt;
        std::unique_ptr<DeviceStep> state;
      } eager, graph;
      for (Replica* r : {&eager, &graph}) {
        r->m = models::build_model(model, spec, 5);
        r->m->to(f.ctx.allocator());
        OptimizerConfig oc;
        oc.momentum = 0.9f;
        oc.weight_decay = 1e-4f;
        r->opt = make_optimizer(r->m->params(), oc);
        r->opt->use_gpu(f.ctx);
        StepConfig lc;
        lc.loss_scale.dynamic = false;
        lc.loss_scale.init_scale = 1.f;
        r->state = std::make_unique<DeviceStep>(f.ctx, lc);
        r->opt->use_device_step(r->state->state_dev());
      }
      // The step's device-side scalars, as DeviceRuntime::set_step keeps them.
      Tensor lr_dev = f.device_zeros(Shape{1}), step_dev = f.device_zeros(Shape{1}, DType::I64);
      graph.state->read_lr_from(lr_dev.data<float>());
      const Shape xs = eager.m->batch_shape(batch);
      const Tensor x = Tensor::from_vector(xs, random_vector(xs.numel(), 9)).to(f.ctx.allocator());
      Tensor labels = Tensor::zeros(Shape{batch}, DType::I32);
      std::mt19937 gen(4);
      for (int64_t i = 0; i < batch; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(gen() % 10);
      const Tensor lg = labels.to(f.ctx.allocator());
      LossAccumulator loss_eager, loss_graph;

      // One training step; `dev_step` set: dropout and the update read the
      // step and learning rate from device memory.
      auto queue_step = [&](Replica& r, LossAccumulator& acc, int64_t s, float lr, const int64_t* dev_step) {
        ForwardContext fc{true, 3, s, 0, nullptr, &f.ctx};
        fc.step_dev = dev_step;
        const Tensor& z = r.m->net().forward(x, fc);
        acc.add(z, lg, 0.f, &f.ctx);
        Tensor dz = r.m->net().output_grad();
        softmax_cross_entropy_backward(z, lg, 1.f / static_cast<float>(batch), dz, 0.f, &f.ctx);
        r.m->net().backward(BackwardContext{false, nullptr, &f.ctx});
        r.state->step(r.m->params().grads().data<float>(), r.m->params().padded_numel(), lr, 1.f, 0.f, 0.f);
        r.opt->step(lr);
      };
      cuda::CudaGraph g;
      for (int64_t s = 0; s < 6; ++s) {
        CAPTURE(s);
        const float lr = 0.05f / static_cast<float>(1 + s);  // changes every step
        queue_step(eager, loss_eager, s, lr, nullptr);
        f.ctx.synchronize();
        set_device_f32(lr_dev.data<float>(), lr);
        set_device_i64(step_dev.data<int64_t>(), s);
        if (s < 2) {  // warm-up: buffers settle
          queue_step(graph, loss_graph, s, lr, step_dev.data<int64_t>());
        } else {
          const bool capture = !g.valid();
          if (capture)  // the host-side bookkeeping (the loss count) happens here, once
            g = cuda::CudaGraph::capture(f.ctx.stream(), [&] {
              queue_step(graph, loss_graph, s, 0.f /* read from lr_dev */, step_dev.data<int64_t>());
            });
          g.launch(f.ctx.stream());
          if (!capture) loss_graph.count_replayed(batch);
        }
        REQUIRE(f.download(graph.m->params().values()) == f.download(eager.m->params().values()));
      }
      REQUIRE(f.download(graph.m->buffers().values()) == f.download(eager.m->buffers().values()));
      const LossStats le = loss_eager.read(), lgr = loss_graph.read();
      CHECK(lgr.count == le.count);
      CHECK(lgr.loss_sum == le.loss_sum);
      CHECK(lgr.correct == le.correct);
      CHECK(graph.state->read().applied == 6);
    }
  }
}
