#pragma once
// The concrete cost models (private to the device library; make_cost_model() picks one).
#include "neuronsim/device_model/cost_model.h"

namespace neuronsim::device_model {

class TensorCostModel final : public ComputeCostModel {
 public:
  explicit TensorCostModel(const TensorEngineParams& p) : p_(p) {}
  ComputeCost cost(const Instruction& in, StationaryState stationary) const override;

 private:
  TensorEngineParams p_;
};

/// VectorE, ScalarE and GpSimdE: per-partition lanes streaming the free dimension.
class LaneCostModel final : public ComputeCostModel {
 public:
  LaneCostModel(EngineKind kind, const LaneEngineParams& p, const SbufParams& sbuf)
      : kind_(kind), p_(p), sbuf_(sbuf) {}
  ComputeCost cost(const Instruction& in, StationaryState stationary) const override;

 private:
  double vector_cycles(const Instruction& in, double N) const;
  double stride_penalty(const Instruction& in) const;
  EngineKind kind_;
  LaneEngineParams p_;
  SbufParams sbuf_;
};

}  // namespace neuronsim::device_model
