// --device auto and --layout auto (launcher/device_check.h): parse_train_options
// resolves them to this machine's device, and to the layout that device and
// the precision call for, and says why; options that need the GPU name the
// device's reason when auto chose the CPU, and only then.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "device_check.h"
#include "options.h"
#include "parse_options.h"

using namespace lockstep;
using lockstep::testing::parse;
using lockstep::testing::parse_error;

TEST_CASE("device auto resolves to this machine's device and says why", "[device]") {
  const AutoDevice here = choose_auto_device();
  REQUIRE((here.device == DeviceKind::Cpu || here.device == DeviceKind::Cuda));
  CHECK_FALSE(here.why.empty());
#ifndef LOCKSTEP_HAVE_CUDA
  CHECK(here.device == DeviceKind::Cpu);
  CHECK(here.why == "this build has no CUDA support");
#endif
  const TrainConfig dflt = parse({});  // auto is the default
  CHECK(dflt.device == here.device);
  CHECK(dflt.device_auto_why == here.why);
  const TrainConfig given = parse({"--device", "auto"});
  CHECK(given.device == here.device);
  // An explicit device is taken as given: nothing was chosen.
  const TrainConfig cpu = parse({"--device", "cpu"});
  CHECK(cpu.device == DeviceKind::Cpu);
  CHECK(cpu.device_auto_why.empty());
  // The settings keep what the user asked for.
  for (const OptionSetting& s : dflt.settings)
    if (s.option == "device") CHECK(s.value == "auto");
}

TEST_CASE("an option that needs the GPU says why device auto chose the CPU", "[device]") {
  const AutoDevice here = choose_auto_device();
  const std::string explicit_cpu = parse_error({"--device", "cpu", "--precision", "bf16"});
  CHECK(explicit_cpu == "--precision bf16: needs --device cuda (the CPU computes in fp32)");
  if (here.device == DeviceKind::Cpu) {
    CHECK(parse_error({"--precision", "bf16"}) == "--precision bf16: needs --device cuda (the CPU computes in fp32); "
                                                  "--device auto chose the CPU: " + here.why);
    CHECK(parse_error({"--cuda-graph"}) ==
          "--cuda-graph: needs --device cuda; --device auto chose the CPU: " + here.why);
    // Errors that are not about the GPU are left as they are.
    CHECK(parse_error({"--conv-algorithm", "winograd", "--layout", "nhwc"}).find("--device auto") == std::string::npos);
  } else {  // a GPU machine: the same options are accepted
    CHECK(parse({"--precision", "bf16"}).precision == Precision::BF16);
    CHECK(parse({"--cuda-graph"}).cuda_graph);
  }
}

TEST_CASE("the note on option errors names device auto's choice only when it caused them", "[device]") {
  // As a GPU machine would resolve it: the options a CPU run takes fail there.
  TrainConfig gpu;
  gpu.device = DeviceKind::Cuda;
  gpu.device_auto_why = "2 GPUs visible";
  gpu.conv_algorithm = ConvAlgorithm::Winograd;
  const std::string winograd =
      "--conv-algorithm winograd: chooses the CPU's convolutions (on the GPU cuDNN chooses; see --cudnn-benchmark)";
  CHECK(auto_device_note(gpu, winograd) == "; --device auto chose the GPU: 2 GPUs visible");
  gpu.conv_algorithm = ConvAlgorithm::Auto;
  gpu.zero_stage = 1;
  CHECK(auto_device_note(gpu, "--zero-stage 1: the optimizer state is sharded on the CPU path only (not yet with "
                              "--device cuda)") == "; --device auto chose the GPU: 2 GPUs visible");
  // Given, not chosen: no note.
  TrainConfig given = gpu;
  given.device_auto_why.clear();
  CHECK(auto_device_note(given, winograd).empty());
  // An error that is not about the device: no note.
  TrainConfig cpu;
  cpu.device = DeviceKind::Cpu;
  cpu.device_auto_why = "no CUDA device is visible";
  cpu.nesterov = true;
  cpu.momentum = 0.f;
  CHECK(auto_device_note(cpu, "--nesterov needs --momentum > 0").empty());
  // An error about graphs and MPI, which names neither the device nor the GPU: no note.
  TrainConfig graph = gpu;
  graph.zero_stage = 0;
  graph.cuda_graph = true;
  graph.comm = GpuComm::Mpi;
  CHECK(auto_device_note(graph, "--cuda-graph and --comm mpi: a graph cannot hold the host-staged gradient average "
                                "(use NCCL)").empty());
  // Through the parser, on this machine: the zero-stage check sees the chosen device.
  if (choose_auto_device().device == DeviceKind::Cpu) {
    CHECK(parse({"--zero-stage", "1"}).zero_stage == 1);
  } else {
    CHECK(parse_error({"--zero-stage", "1"}).find("; --device auto chose the GPU: ") != std::string::npos);
  }
}

TEST_CASE("layout auto takes channels-last for 16-bit precision on the GPU and NCHW otherwise", "[device]") {
  CHECK(choose_auto_layout(DeviceKind::Cuda, Precision::BF16).layout == LayoutChoice::Nhwc);
  CHECK(choose_auto_layout(DeviceKind::Cuda, Precision::F16).layout == LayoutChoice::Nhwc);
  CHECK(choose_auto_layout(DeviceKind::Cuda, Precision::BF16).why ==
        "bf16 on the GPU: tensor-core convolutions read and write channels-last");
  CHECK(choose_auto_layout(DeviceKind::Cuda, Precision::F32).layout == LayoutChoice::Nchw);
  CHECK(choose_auto_layout(DeviceKind::Cuda, Precision::F32).why == "fp32 on the GPU");
  CHECK(choose_auto_layout(DeviceKind::Cpu, Precision::F32).layout == LayoutChoice::Nchw);
  CHECK(choose_auto_layout(DeviceKind::Cpu, Precision::F32).why == "the CPU");

  // Through the parser: auto is the default and follows the device chosen.
  const TrainConfig dflt = parse({});
  CHECK(dflt.layout == LayoutChoice::Nchw);  // fp32 on either device
  CHECK(dflt.layout_auto_why == choose_auto_layout(dflt.device, Precision::F32).why);
  for (const OptionSetting& s : dflt.settings)
    if (s.option == "layout") CHECK(s.value == "auto");
  // Given, not chosen: kept, with no reason.
  const TrainConfig nhwc = parse({"--layout", "nhwc"});
  CHECK(nhwc.layout == LayoutChoice::Nhwc);
  CHECK(nhwc.layout_auto_why.empty());
  CHECK(parse({"--device", "cpu", "--layout", "nchw"}).layout_auto_why.empty());
  // The CPU's own convolution choice needs NCHW, which auto gives it there.
  CHECK(parse({"--device", "cpu", "--conv-algorithm", "winograd"}).layout == LayoutChoice::Nchw);
  if (choose_auto_device().device == DeviceKind::Cuda) {
    const TrainConfig bf16 = parse({"--precision", "bf16"});
    CHECK(bf16.layout == LayoutChoice::Nhwc);
    CHECK(bf16.layout_auto_why == choose_auto_layout(DeviceKind::Cuda, Precision::BF16).why);
    CHECK(parse({"--precision", "bf16", "--layout", "nchw"}).layout == LayoutChoice::Nchw);
  }
}
