// bench_overhead: what the DistributedOptimizer costs a single rank (the
// roadmap's "single-rank data-parallel overhead", DDP's 3%). One process, one
// model, one synthetic batch, two ways of taking a training step, alternating
// in blocks of --steps (plain, wrapped, wrapped, plain, ...) so both see the
// same machine state:
//   plain    forward, loss gradient, backward, optimizer.step
//   wrapped  the same through DistributedOptimizer over a world of one:
//            begin_backward, the grad-ready hook during backward, step
// Both run the same optimizer on the same parameters. Prints the median step of
// each (over all timed steps), each round's medians, the overhead
// (wrapped / plain - 1), and a JSON last line. Run as a single process (an
// MPI singleton); more ranks are refused. Bad input: one line on stderr, exit 2.
//   bench_overhead --model resnet20 --batch-size 64 --threads 2 --steps 10 --rounds 6
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_stats.h"
#include "comm/mpi_session.h"
#include "core/blas_kernels.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/loss.h"
#include "optim/distributed_optimizer.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;

namespace {

constexpr const char* kUsage =
    "usage: bench_overhead [--model lenet] [--batch-size 256] [--threads 1] [--image-size S] [--steps 10]\n"
    "                      [--rounds 6] [--warmup 10]\n"
    "  --model M         a built-in model (see trainer --help)\n"
    "  --batch-size N    samples per step, 1 to 65536\n"
    "  --threads T       compute threads, 1 to 1024\n"
    "  --image-size S    height and width of the input (default: the model's), 1 to 4096\n"
    "  --steps N         timed steps per block, 1 to 100000\n"
    "  --rounds N        rounds of one plain and one wrapped block, 1 to 10000\n"
    "  --warmup N        untimed steps of each kind before the first round, 0 to 100000\n";

constexpr int64_t kMaxSample = int64_t{1} << 24;       // values per sample, as the trainer allows
constexpr int64_t kMaxBatchValues = int64_t{1} << 31;  // 8 GiB of fp32 input

struct Config {
  std::string model = "lenet";
  int64_t batch = 256, image = 0;
  int threads = 1, steps = 10, rounds = 6, warmup = 10;
  bool help = false;
};

// Throws bench::BadArgument naming the first bad flag or value.
Config parse(int argc, char** argv) {
  const bench::KeyValues kv = bench::key_values(
      argc, argv, {"--model", "--batch-size", "--threads", "--image-size", "--steps", "--rounds", "--warmup"});
  Config c;
  c.help = kv.help;
  if (kv.has("--model")) c.model = kv.at("--model");
  if (kv.has("--batch-size")) c.batch = bench::int_argument("--batch-size", kv.at("--batch-size"), 1, 65536);
  if (kv.has("--threads")) c.threads = static_cast<int>(bench::int_argument("--threads", kv.at("--threads"), 1, 1024));
  if (kv.has("--image-size")) c.image = bench::int_argument("--image-size", kv.at("--image-size"), 1, 4096);
  if (kv.has("--steps")) c.steps = static_cast<int>(bench::int_argument("--steps", kv.at("--steps"), 1, 100000));
  if (kv.has("--rounds")) c.rounds = static_cast<int>(bench::int_argument("--rounds", kv.at("--rounds"), 1, 10000));
  if (kv.has("--warmup")) c.warmup = static_cast<int>(bench::int_argument("--warmup", kv.at("--warmup"), 0, 100000));
  return c;
}

using bench::median;

int run(const Config& c, Communicator& comm) {
  const models::ModelInfo& info = models::model_info(c.model);  // InputError naming the known models
  models::ModelSpec spec;
  const int64_t channels = info.default_shape[0];
  const int64_t height = c.image > 0 ? c.image : info.default_shape[1];
  const int64_t width = c.image > 0 ? c.image : info.default_shape[2];
  if (channels * height * width > kMaxSample)
    bench::bad_argument("--image-size {} makes {} x {} x {} values per sample, more than {}", c.image, channels, height,
                        width, kMaxSample);
  if (c.batch * channels * height * width > kMaxBatchValues)
    bench::bad_argument("--batch-size {} of {} x {} x {} samples is more than {} input values", c.batch, channels,
                        height, width, kMaxBatchValues);
  spec.sample_shape = Shape{channels, height, width};
  spec.num_classes = info.default_classes;
  set_compute_threads(c.threads);
  auto model = models::build_model(c.model, spec, 1);  // InputError if the model cannot take the shape
  Sequential& net = model->net();
  auto opt = make_optimizer(model->params(), OptimizerConfig{});
  DistributedOptimizer dopt(*opt, model->params(), comm);

  const int64_t B = c.batch;
  Tensor x = Tensor::zeros(model->batch_shape(B));
  Rng rng(7);
  for (float& v : x.span<float>()) v = rng.normal();
  Tensor labels = Tensor::zeros(Shape{B}, DType::I32);
  for (int64_t i = 0; i < B; ++i)
    labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(spec.num_classes)));
  // A small learning rate: the model trains on one batch for many steps and must stay finite.
  constexpr float kLr = 1e-4f;
  int64_t step = 0;
  const auto forward_backward = [&] {
    const Tensor& logits = net.forward(x, ForwardContext{true, 1, step++, 0});
    Tensor d = net.output_grad();
    softmax_cross_entropy_backward(logits, labels, 1.f / static_cast<float>(B), d);
    net.backward(BackwardContext{});
  };
  const auto plain = [&] {
    net.set_grad_ready_hook({});
    forward_backward();
    opt->step(kLr);
  };
  const auto wrapped = [&] {
    net.set_grad_ready_hook([&](int64_t end) { dopt.on_gradients_ready(end); });
    dopt.begin_backward(true);
    forward_backward();
    dopt.step(kLr);
  };
  const auto block = [&](const auto& fn, int n, std::vector<double>* times) {
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      if (times) times->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  block(plain, c.warmup, nullptr);
  block(wrapped, c.warmup, nullptr);
  std::vector<double> all_plain, all_wrapped, round_plain, round_wrapped;
  for (int r = 0; r < c.rounds; ++r) {
    std::vector<double> p, w;
    if (r % 2 == 0) {  // plain first in even rounds, wrapped first in odd ones
      block(plain, c.steps, &p);
      block(wrapped, c.steps, &w);
    } else {
      block(wrapped, c.steps, &w);
      block(plain, c.steps, &p);
    }
    round_plain.push_back(median(p));
    round_wrapped.push_back(median(w));
    all_plain.insert(all_plain.end(), p.begin(), p.end());
    all_wrapped.insert(all_wrapped.end(), w.begin(), w.end());
  }
  for (float v : model->params().values().span<float>()) LS_CHECK(std::isfinite(v), "the weights diverged");
  const double mp = median(all_plain), mw = median(all_wrapped), overhead = mw / mp - 1;
  std::printf("%s, batch %lld, %d thread(s), input %s, OpenBLAS %s; %d rounds of %d steps each way\n",
              c.model.c_str(), static_cast<long long>(B), c.threads, spec.sample_shape.str().c_str(),
              blas_kernels_in_use().describe().c_str(), c.rounds, c.steps);
  std::printf("%s\n", dopt.describe().c_str());
  for (int r = 0; r < c.rounds; ++r)
    std::printf("  round %d: plain %.3f ms, wrapped %.3f ms\n", r + 1, round_plain[static_cast<size_t>(r)] * 1e3,
                round_wrapped[static_cast<size_t>(r)] * 1e3);
  std::printf("median step: plain %.3f ms, wrapped %.3f ms; overhead %+.2f%%\n", mp * 1e3, mw * 1e3, overhead * 100);
  std::printf("%s\n", fmt::format(R"({{"bench":"overhead","model":"{}","batch":{},"threads":{},"plain_ms":{:.4f},)"
                                  R"("wrapped_ms":{:.4f},"overhead":{:.5f}}})",
                                  c.model, B, c.threads, mp * 1e3, mw * 1e3, overhead)
                          .c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  use_fast_blas_kernels(argv);  // the trainer's OpenBLAS kernels (core/blas_kernels.h), before MPI starts
  Config cfg;
  const std::string bad = bench::parse_arguments(parse, argc, argv, cfg);
  MpiSession mpi(&argc, &argv);
  auto comm = mpi.world();
  if (const int code = bench::stop_early(comm->rank(), "bench_overhead", bad, cfg.help, kUsage); code >= 0)
    return code;
  if (comm->size() != 1) {
    if (comm->rank() == 0)
      std::fprintf(stderr, "bench_overhead: measures a single rank; run it as one process, not %d ranks\n",
                   comm->size());
    return bench::kBadArguments;
  }
  try {
    return run(cfg, *comm);
  } catch (const bench::BadArgument& e) {
    std::fprintf(stderr, "bench_overhead: %s\n", e.what());
  } catch (const InputError& e) {
    std::fprintf(stderr, "bench_overhead: %s\n", e.message().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_overhead: %s\n", e.what());
  }
  return bench::kBadArguments;
}
