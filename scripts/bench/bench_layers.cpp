// bench_layers: per-layer forward/backward time of a built-in model at a batch
// size, on synthetic input, single process. The input is the model's own
// sample shape and class count (models/registry.h: default_shape,
// default_classes) unless --image-size, --channels or --classes change them.
// Prints a table with each layer's median time and achieved GFLOP/s, and a
// JSON last line. Bad input (a flag, a value, a model or shape the model
// cannot take): one line on stderr, exit 2.
//   bench_layers --model keras-cnn --batch-size 256 --threads 1 --iters 20
#include <cxxopts.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "bench_args.h"
#include "bench_stats.h"
#include "core/blas_kernels.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/loss.h"
#include "ops/simd_level.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;

namespace {

constexpr int64_t kMaxSample = int64_t{1} << 24;  // values per sample, as the trainer allows
constexpr int64_t kMaxBatchValues = int64_t{1} << 31;  // 8 GiB of fp32 input

using bench::median;

struct Config {
  std::string model;
  int64_t batch = 256;
  int threads = 1, iters = 20;
  bool fusion = true;
  models::ModelSpec spec;
};

// Config from the command line; std::nullopt after printing --help. Throws
// bench::BadArgument naming the bad flag or value, InputError for an unknown model.
std::optional<Config> parse(int argc, char** argv) {
  cxxopts::Options o("bench_layers", "per-layer timing of a lockstep model on synthetic input");
  // Numbers are read as strings: cxxopts' integer parser trips a GCC 12 -Wrestrict false positive.
  auto str = [](const char* d) { return cxxopts::value<std::string>()->default_value(d); };
  o.add_options()("model", "model (see trainer --help)", str("lenet"))("batch-size", "batch", str("256"))(
      "threads", "compute threads", str("1"))("iters", "timed iterations (after 3 warm-up)", str("20"))(
      "image-size", "height and width of the input (default: the model's)", cxxopts::value<std::string>())(
      "channels", "channels of the input (default: the model's)", cxxopts::value<std::string>())(
      "classes", "classes (default: the model's)", cxxopts::value<std::string>())(
      "no-fusion", "disable ReLU fusion", cxxopts::value<bool>()->default_value("false"))("h,help", "this help");
  cxxopts::ParseResult r;
  try {
    r = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw bench::BadArgument(bench::plain_quotes(e.what()));
  }
  if (r.count("help")) {
    std::cout << o.help() << std::endl;
    return std::nullopt;
  }
  if (!r.unmatched().empty()) bench::bad_argument("unexpected argument '{}' (see --help)", r.unmatched().front());
  auto text = [&](const char* k) { return r[k].as<std::string>(); };
  Config c;
  c.model = text("model");
  c.batch = bench::int_argument("--batch-size", text("batch-size"), 1, 65536);
  c.threads = static_cast<int>(bench::int_argument("--threads", text("threads"), 1, 1024));
  c.iters = static_cast<int>(bench::int_argument("--iters", text("iters"), 1, 1000000));
  c.fusion = !r["no-fusion"].as<bool>();
  const models::ModelInfo& info = models::model_info(c.model);  // InputError naming the known models
  int64_t channels = info.default_shape[0], height = info.default_shape[1], width = info.default_shape[2];
  if (r.count("channels")) channels = bench::int_argument("--channels", text("channels"), 1, 4096);
  if (r.count("image-size")) height = width = bench::int_argument("--image-size", text("image-size"), 1, 4096);
  if (channels * height * width > kMaxSample)
    bench::bad_argument("{} makes {} x {} x {} values per sample, more than {}",
                        r.count("image-size") ? "--image-size" : "--channels", channels, height, width, kMaxSample);
  if (c.batch * channels * height * width > kMaxBatchValues)
    bench::bad_argument("--batch-size {} of {} x {} x {} samples is more than {} input values", c.batch, channels,
                        height, width, kMaxBatchValues);
  c.spec.sample_shape = Shape{channels, height, width};
  c.spec.num_classes = r.count("classes") ? bench::int_argument("--classes", text("classes"), 2, 100000)
                                          : info.default_classes;
  return c;
}

int run(const Config& c) {
  const int64_t B = c.batch;
  set_compute_threads(c.threads);
  auto model = models::build_model(c.model, c.spec, 1);  // InputError if the model cannot take the shape
  Sequential& net = model->net();
  net.set_fusion(c.fusion);
  OptimizerConfig oc;
  auto opt = make_optimizer(model->params(), oc);

  Tensor x = Tensor::zeros(model->batch_shape(B));
  Rng rng(7);
  for (float& v : x.span<float>()) v = rng.normal();
  Tensor labels = Tensor::zeros(Shape{B}, DType::I32);
  for (int64_t i = 0; i < B; ++i)
    labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.spec.num_classes)));

  const size_t L = net.size();
  std::vector<std::vector<double>> fwd(L), bwd(L);
  std::vector<double> step_times, opt_times;
  bool record = false;
  net.set_layer_observer([&](size_t i, Sequential::Phase ph, auto t0, auto t1) {
    if (!record) return;
    (ph == Sequential::Phase::Forward ? fwd : bwd)[i].push_back(std::chrono::duration<double>(t1 - t0).count());
  });
  const int iters = c.iters;
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
  const std::string header = fmt::format("layer (input {} x {}, {} classes)", B, c.spec.sample_shape.str(),
                                         c.spec.num_classes);
  std::printf("# OpenBLAS %s, own kernels %s\n", blas_kernels_in_use().describe().c_str(),
              ops::simd_clone_level().c_str());
  std::printf("%-3s %-46s %10s %10s %9s\n", "#", header.c_str(), "fwd ms", "bwd ms", "fwd GF/s");
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
  const auto dims = c.spec.sample_shape.dims();
  std::cout << nlohmann::json{{"model", model->name()}, {"batch", B},
                              {"input", std::vector<int64_t>(dims.begin(), dims.end())},
                              {"classes", c.spec.num_classes}, {"step_ms", step * 1e3},
                              {"images_per_sec", static_cast<double>(B) / step}}
                   .dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  use_fast_blas_kernels(argv);  // the trainer's OpenBLAS kernels (core/blas_kernels.h)
  try {
    const std::optional<Config> c = parse(argc, argv);
    return c ? run(*c) : 0;
  } catch (const bench::BadArgument& e) {
    std::fprintf(stderr, "bench_layers: %s\n", e.what());
  } catch (const InputError& e) {
    std::fprintf(stderr, "bench_layers: %s\n", e.message().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_layers: %s\n", e.what());
  }
  return bench::kBadArguments;
}
