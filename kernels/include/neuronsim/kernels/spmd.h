#pragma once
// Kernels over a logical NeuronCore of several physical cores (trn2 LNC=2; Note [LNC launch] in
// neuronsim/device_model/device.h), as NKI launches `kernel[2](...)`: the work is split into
// disjoint parts, part p is the single-core kernel over its slice of the tensors, and the parts are
// joined into one launch whose program instance p (nl.program_id() == p) runs on physical core
// p. Every output element is computed by exactly the instructions the single-core kernel would
// use for it, so values do not depend on the grid.
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/elementwise.h"
#include "neuronsim/kernels/layer_norm.h"
#include "neuronsim/kernels/matmul.h"
#include "neuronsim/kernels/reduction.h"
#include "neuronsim/kernels/softmax.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// `t` restricted to [begin, end) along `dim` (its address moves by begin strides).
TensorDesc slice_dim(const TensorDesc& t, int64_t dim, int64_t begin, int64_t end);

/// Splits [0, units) into `parts` balanced ranges of whole units (the first ones one larger).
std::vector<std::pair<int64_t, int64_t>> split_range(int64_t units, uint32_t parts);

/// One launch of grid parts.size(): part p's streams become program instance p (StreamId::pcore),
/// its HBM regions and sections are kept. A single part is returned as it is.
device_model::Program join_instances(const std::string& name,
                                     std::vector<device_model::Program> parts);

/// nisa.core_barrier: appends to stream `at` of every program instance of `p` (grid > 1) a
/// signal to each other instance and a wait for all of theirs, on a semaphore no instruction of
/// `p` uses yet, so no instance passes the barrier before every one has reached it (its
/// earlier work on `at` complete). Throws std::invalid_argument when no semaphore is free.
void core_barrier(device_model::Program& p, device_model::StreamId at, uint32_t semaphores);

/// build_matmul over `grid` physical cores: M split into 128-row blocks when it has two or
/// more, else N into 512-column blocks, else the batch; grid 1 or too little work: one core.
device_model::Program build_matmul_grid(const std::string& name, const TensorDesc& a,
                                        const TensorDesc& b, const TensorDesc& c,
                                        const std::optional<TensorDesc>& bias,
                                        const MatmulSpec& spec,
                                        const device_model::CoreParams& core, uint32_t grid);

/// build_elementwise over `grid` physical cores: the output's outermost dim (largest stride)
/// split, inputs sliced alike (broadcast dims kept); small outputs stay on one core.
device_model::Program build_elementwise_grid(const std::string& name,
                                             const std::vector<TensorDesc>& inputs,
                                             const TensorDesc& out, const Expr& expr,
                                             const device_model::CoreParams& core, uint32_t grid);

/// Row kernels over `grid` physical cores: the tensors split along a dim the op keeps (for a
/// reduction a kept dim, for softmax any dim but `dim`, for layer norm a leading row dim), the
/// outermost in memory with at least `grid` indices; small tensors stay on one core.
device_model::Program build_reduce_grid(const std::string& name, const TensorDesc& in,
                                        const TensorDesc& out, const ReduceSpec& spec,
                                        const device_model::CoreParams& core, uint32_t grid);
device_model::Program build_softmax_grid(const std::string& name, const TensorDesc& in,
                                         const TensorDesc& out, int64_t dim, bool log,
                                         const device_model::CoreParams& core, uint32_t grid);
device_model::Program build_softmax_backward_grid(const std::string& name,
                                                  const TensorDesc& grad_out,
                                                  const TensorDesc& output,
                                                  const TensorDesc& grad_in, int64_t dim, bool log,
                                                  const device_model::CoreParams& core,
                                                  uint32_t grid);
device_model::Program build_layer_norm_grid(const std::string& name, const LayerNormIo& io,
                                            const device_model::CoreParams& core, uint32_t grid);

/// build_copy over `grid` physical cores, split as build_elementwise_grid splits.
device_model::Program build_copy_grid(const std::string& name, const TensorDesc& in,
                                      const TensorDesc& out, const device_model::CoreParams& core,
                                      uint32_t grid);

/// Elements an elementwise part must have at least for a split to pay (each core then moves a
/// few full 128-partition tiles; below that DMA latency, not bandwidth, sets the time).
inline constexpr int64_t kMinElementsPerCore = 128 * 512;

}  // namespace neuronsim::kernels
