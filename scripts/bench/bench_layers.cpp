// bench_layers: per-layer forward/backward time of a built-in model at a batch
// size, on synthetic input, single process. Prints a table with each layer's
// median time and achieved GFLOP/s, and a JSON last line.
//   bench_layers --model keras-cnn --batch-size 256 --threads 1 --iters 20
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "core/cpu.h"
#include "core/rng.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int main(int argc, char** argv) {
  cxxopts::Options o("bench_layers", "per-layer timing of a lockstep model");
  // Numbers are read as strings: cxxopts' integer parser trips a GCC 12 -Wrestrict false positive.
  auto str = [](const char* d) { return cxxopts::value<std::string>()->default_value(d); };
  o.add_options()("model", "model", str("lenet"))("batch-size", "batch", str("256"))("threads", "threads", str("1"))(
      "iters", "timed iterations", str("20"))("no-fusion", "disable ReLU fusion",
                                               cxxopts::value<bool>()->default_value("false"));
  const auto r = o.parse(argc, argv);
  const int64_t B = std::stoll(r["batch-size"].as<std::string>());
  set_compute_threads(std::stoi(r["threads"].as<std::string>()));
  auto model = models::build_model(r["model"].as<std::string>(), {}, 1);
  Sequential& net = model->net();
  net.set_fusion(!r["no-fusion"].as<bool>());
  OptimizerConfig oc;
  auto opt = make_optimizer(model->params(), oc);

  Tensor x = Tensor::zeros(model->batch_shape(B));
  Rng rng(7);
  for (float& v : x.span<float>()) v = rng.normal();
  Tensor labels = Tensor::zeros(Shape{B}, DType::I32);
  for (int64_t i = 0; i < B; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(10));

  const size_t L = net.size();
  std::vector<std::vector<double>> fwd(L), bwd(L);
  std::vector<double> step_times, opt_times;
  bool record = false;
  net.set_layer_observer([&](size_t i, Sequential::Phase ph, auto t0, auto t1) {
    if (!record) return;
    (ph == Sequential::Phase::Forward ? fwd : bwd)[i].push_back(std::chrono::duration<double>(t1 - t0).count());
  });
  const int iters = std::stoi(r["iters"].as<std::string>());
  for (int it = 0; it < iters + 3; ++it) {
    record = it >= 3;
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor& logits = net.forward(x, ForwardContext{true, 1, it, 0});
    Tensor d = net.output_grad();
    softmax_cross_entropy_backward(logits, labels, 1.f / static_cast<float>(B), d);
    net.backward(BackwardContext{});
    const auto t1 = std::chrono::steady_clock::now();
    opt->step(0.01f);
    const auto t2 = std::chrono::steady_clock::now();
    if (record) {
      step_times.push_back(std::chrono::duration<double>(t2 - t0).count());
      opt_times.push_back(std::chrono::duration<double>(t2 - t1).count());
    }
  }
  const std::vector<Shape> shapes = net.shapes(model->batch_shape(B));
  std::printf("%-3s %-46s %10s %10s %9s\n", "#", "layer", "fwd ms", "bwd ms", "fwd GF/s");
  double total_f = 0, total_b = 0;
  for (size_t i = 0; i < L; ++i) {
    const double f = median(fwd[i]) * 1e3, b = median(bwd[i]) * 1e3;
    total_f += f;
    total_b += b;
    const Shape in = i == 0 ? model->batch_shape(B) : shapes[i - 1];
    const double gf = f > 0 ? static_cast<double>(net.layer(i).forward_flops(in)) / (f * 1e-3) / 1e9 : 0;
    std::printf("%-3zu %-46s %10.3f %10.3f %9.1f\n", i, net.layer(i).describe().c_str(), f, b, gf);
  }
  const double step = median(step_times);
  const double flops = 3.0 * static_cast<double>(net.forward_flops(model->batch_shape(B)));
  std::printf("sum fwd %.3f ms, bwd %.3f ms, optimizer %.3f ms; step %.3f ms = %.0f img/s, %.1f GFLOP/s (3x fwd)\n",
              total_f, total_b, median(opt_times) * 1e3, step * 1e3, static_cast<double>(B) / step,
              flops / step / 1e9);
  std::cout << nlohmann::json{{"model", model->name()}, {"batch", B}, {"step_ms", step * 1e3},
                              {"images_per_sec", static_cast<double>(B) / step}}
                   .dump()
            << std::endl;
}
