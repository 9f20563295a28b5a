// The runtime's input subjects and the trainer's flags, side by side.
#include "input_names.h"

#include <array>

#include "core/input_subject.h"

namespace lockstep {
namespace {

struct Name {
  const char* subject;  // core/input_subject.h
  const char* option;   // the option's name in TrainConfig::settings
  const char* shown;    // what the message says in the subject's place
};

constexpr std::array kNames{
    Name{subject::kDataDirectory, "data-dir", "--data-dir"},
    Name{subject::kCheckpointDirectory, "checkpoint-dir", "--checkpoint-dir"},
    Name{subject::kResume, "resume", "--resume"},
    Name{subject::kTimelineFile, "timeline", "--timeline"},
    Name{subject::kLearningRate, "lr", "--lr"},
    Name{subject::kLrSchedule, "lr-schedule", "--lr-schedule"},
    Name{subject::kLrGamma, "lr-gamma", "--lr-gamma"},
    Name{subject::kMomentum, "momentum", "--momentum"},
    Name{subject::kLossScale, "loss-scale", "--loss-scale"},
    Name{subject::kLossScaleWindow, "loss-scale-window", "--loss-scale-window"},
    Name{subject::kMaxGradNorm, "clip-grad-norm", "--clip-grad-norm"},
    Name{subject::kZeroStage, "zero-stage", "--zero-stage"},
    Name{subject::kGpuDevice, "device", "--device cuda"},
    Name{subject::kNcclTransport, "comm", "--comm nccl"},
    Name{subject::kCudaGraphs, "cuda-graph", "--cuda-graph"},
};

const Name* find(const std::string& subject) {
  for (const Name& n : kNames)
    if (subject == n.subject) return &n;
  return nullptr;
}

}  // namespace

std::string flag_for_subject(const std::string& subject) {
  const Name* n = find(subject);
  return n ? n->shown : "";
}

std::string user_message(const InputError& e, const TrainConfig& config) {
  const Name* n = e.subject().empty() ? nullptr : find(e.subject());
  if (!n) return e.message();
  std::string m = n->shown + e.detail();
  for (const OptionSetting& s : config.settings)
    if (s.option == n->option && s.source.rfind("LOCKSTEP_", 0) == 0) m += " (set by " + s.source + ")";
  return m;
}

}  // namespace lockstep
