#pragma once
// Random fills on GpSimdE (the ISA rng instruction: Philox streams identical to the host's),
// optionally thresholded against a probability (bernoulli, dropout masks) or transformed into
// exponential draws (ScalarE log, VectorE scale).
#include <optional>
#include <string>

#include "neuronsim/device_model/isa.h"
#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

struct RandomSpec {
  device_model::RngDist dist = device_model::RngDist::kUniform;
  float a = 0.0f, b = 1.0f;
  uint64_t seed = 0, offset = 0;
  /// bernoulli: out = (u < p), p a constant or a tensor broadcastable to out.
  std::optional<float> p;
  std::optional<TensorDesc> p_tensor;
  /// dropout: out = in * (u < keep) / keep, and mask = (u < keep).
  std::optional<TensorDesc> dropout_input, dropout_mask;
  /// exponential with this rate: out = log(1 - u) * (-1 / lambda), u uniform in [0, 1).
  std::optional<float> exponential;
};

/// Element i (row-major over out) draws stream word i; exact for contiguous outputs.
device_model::Program build_random(const std::string& name, const TensorDesc& out,
                                   const RandomSpec& spec, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
