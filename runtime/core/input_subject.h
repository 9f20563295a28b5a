// The inputs the runtime's input errors are about, in the runtime's words
// (InputError::subject, core/error.h). A program that lets its user set them
// another way (the trainer: flags and LOCKSTEP_* variables) maps these names
// to its own, in one table (launcher/input_names.cpp).
#pragma once

namespace lockstep::subject {

inline constexpr const char* kDataDirectory = "data directory";          // data/mnist.h, data/cifar10.h
inline constexpr const char* kCheckpointDirectory = "checkpoint directory";  // checkpoint/checkpoint.h
inline constexpr const char* kResume = "resuming";                       // load_latest_checkpoint
inline constexpr const char* kTimelineFile = "timeline file";            // profiling/timeline.h
inline constexpr const char* kLearningRate = "learning rate";            // optim/schedule.h
inline constexpr const char* kLrSchedule = "learning-rate schedule";
inline constexpr const char* kLrGamma = "step schedule's decay factor";
inline constexpr const char* kMomentum = "SGD momentum";                 // optim/sgd.h
inline constexpr const char* kLossScale = "initial loss scale";          // optim/device_step.h
inline constexpr const char* kLossScaleWindow = "loss-scale growth interval";
inline constexpr const char* kMaxGradNorm = "gradient clipping norm";    // optim/distributed_optimizer.h
inline constexpr const char* kZeroStage = "ZeRO stage";
inline constexpr const char* kGpuDevice = "GPU device";                  // device/device_runtime.h
inline constexpr const char* kNcclTransport = "NCCL transport";
inline constexpr const char* kCudaGraphs = "CUDA graphs";

}  // namespace lockstep::subject
