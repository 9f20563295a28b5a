// Layout: the memory order of 4-D activations ([N, C, H, W] logically).
//   NCHW: channels first (each channel's H x W plane contiguous); the default.
//   NHWC: channels last (each pixel's C values contiguous), what tensor-core
//         convolutions read and write natively.
// Shapes stay logical ([N, C, H, W]) in both: a layout changes where an
// element lives, never what a layer computes, and parameters (a convolution's
// [OC, C, KH, KW] weight) keep one canonical order, so weights and checkpoints
// are the same files in either layout.
#pragma once

#include <optional>
#include <string_view>

namespace lockstep {

enum class Layout { NCHW, NHWC };

constexpr std::string_view layout_name(Layout l) { return l == Layout::NHWC ? "nhwc" : "nchw"; }

// "nchw" / "nhwc" (the --layout spelling); nullopt otherwise.
constexpr std::optional<Layout> layout_from_name(std::string_view s) {
  if (s == "nchw") return Layout::NCHW;
  if (s == "nhwc") return Layout::NHWC;
  return std::nullopt;
}

}  // namespace lockstep
