// How a TrainConfig is reported: the settings line of the start-up log and the
// JSON stored in checkpoints (options.cpp parses and checks it).
#include <nlohmann/json.hpp>

#include "options.h"

namespace lockstep {

std::string describe_settings(const TrainConfig& c, bool all) {
  std::string set, defaults;
  for (const OptionSetting& s : c.settings) {
    std::string& out = s.source == "default" ? defaults : set;
    if (!out.empty()) out += ", ";
    out += s.option + "=" + (s.value.empty() ? "''" : s.value);
    if (s.source != "default") out += " [" + s.source + "]";
  }
  return (set.empty() ? "all defaults" : set) + (all ? "; defaults: " + defaults : "");
}

nlohmann::json settings_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const OptionSetting& s : c.settings) j[s.option] = {{"value", s.value}, {"source", s.source}};
  return j;
}

Augment augmentation(const TrainConfig& c) {
  if (c.augment != Augment::Auto) return c.augment;
  return c.dataset == DatasetKind::Cifar10 ? Augment::CropFlip : Augment::None;
}

std::string config_json(const TrainConfig& c) {
  nlohmann::json j = {{"model", c.model},
                      {"dataset", name(c.dataset)},
                      {"data_dir", c.data_dir},
                      {"augment", name(augmentation(c))},
                      {"epochs", c.epochs},
                      {"max_steps", c.max_steps},
                      {"batch_size", c.batch_size},
                      {"global_batch_size", c.global_batch_size},
                      {"accumulate_steps", c.accumulate_steps},
                      {"optimizer", name(c.optimizer)},
                      {"lr", c.lr},
                      {"momentum", c.momentum},
                      {"nesterov", c.nesterov},
                      {"weight_decay", c.weight_decay},
                      {"lr_schedule", name(c.lr_schedule)},
                      {"warmup_epochs", c.warmup_epochs},
                      {"warmup_steps", c.warmup_steps},
                      {"min_lr", c.min_lr},
                      {"beta1", c.beta1},
                      {"beta2", c.beta2},
                      {"eps", c.eps},
                      {"vocab_size", c.vocab_size},
                      {"seq_len", c.seq_len},
                      {"n_layer", c.n_layer},
                      {"n_head", c.n_head},
                      {"n_embd", c.n_embd},
                      {"lr_step_epochs", c.lr_step_epochs},
                      {"lr_gamma", c.lr_gamma},
                      {"lr_scaling", name(c.lr_scaling)},
                      {"base_batch_size", c.base_batch_size},
                      {"decay_bn_bias", c.decay_bn_bias},
                      {"label_smoothing", c.label_smoothing},
                      {"clip_grad_norm", c.clip_grad_norm},
                      {"seed", c.seed},
                      {"zero_stage", c.zero_stage},
                      {"grad_op", name(c.grad_op)},
                      {"grad_compression", name(c.grad_compression)},
                      {"hierarchical_allreduce", name(c.hierarchical_allreduce)},
                      {"device", name(c.device)},
                      {"comm", name(c.comm)},
                      {"precision", name(c.precision)},
                      {"loss_scale", c.loss_scale},
                      {"loss_scale_window", c.loss_scale_window},
                      {"cuda_graph", c.cuda_graph},
                      {"cudnn_benchmark", c.cudnn_benchmark},
                      {"cudnn_deterministic", c.cudnn_deterministic},
                      {"cudnn_workspace_mb", c.cudnn_workspace_mb},
                      {"layout", name(c.layout)},
                      {"conv_algorithm", name(c.conv_algorithm)}};
  // Paths are bytes, not necessarily UTF-8: replace what JSON cannot hold instead of throwing.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lockstep
