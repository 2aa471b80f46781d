#pragma once
// How the matmul kernel blocks C[M, N] = A[M, K] @ B[K, N] for SBUF reuse, as the fastest NKI
// matmul kernels do. Output tiles are [128 m, 512 n] fp32 (one PSUM bank); a group of gm x gn
// tiles accumulates over all of K while the previous group is evacuated. K moves in chunks of ck
// k-tiles (one DMA, a few KiB per partition). One operand is resident: its chunks for rb groups
// stay in SBUF while every group of the other operand streams past them through a ring of slots.
// The plan picks the resident operand and rb from the SBUF budget, minimising the estimated time
// max(HBM traffic / bandwidth, TensorE matmul + transpose cycles / clock).
#include <cstdint>

#include "neuronsim/device_model/params.h"

namespace neuronsim::kernels {

/// One operand seen as K x J (J = M for A, N for B).
struct MatmulSide {
  int64_t extent = 0;       // J
  uint32_t tile = 0;        // tile width along J: PE columns (A) or moving free max (B)
  uint64_t elem_bytes = 0;  // in SBUF
  bool natural = false;     // K contiguous: loaded as rows and transposed on TensorE
  uint64_t batches = 1;     // distinct batch slices (1 when broadcast over the batch)
};

struct MatmulShape {
  int64_t k = 0;
  MatmulSide a, b;
  uint64_t out_elem_bytes = 0;
  uint64_t batches = 1;
  bool bias = false;
  bool bias_rows = false;       // the bias varies along M (else one row broadcast over M)
  bool bias_column = false;     // ... and is constant along N (a per-partition operand)
  bool transposed_out = false;  // C^T tiles go back through TensorE transposes
  bool tmp = false;             // the epilogue needs an fp32 staging tile
};

struct MatmulPlan {
  uint32_t kt = 0;              // k-tiles of 128
  uint32_t ck = 1;              // k-tiles per chunk
  uint32_t chunks = 0;          // chunks along K
  uint32_t group_banks = 4;     // output tiles per accumulation group; two groups in flight
  uint32_t tiles_per_bank = 1;  // narrow output tiles share a PSUM bank
  uint32_t acc_banks = 4;       // PSUM banks per group: group tiles / tiles_per_bank
  uint64_t acc_tile_bytes = 0;  // PSUM bytes per partition of one output tile
  uint32_t tr_banks = 0;        // PSUM banks for TensorE transposes
  uint32_t gm = 1, gn = 1;      // tiles per group along M and N
  int64_t gw_a = 0, gw_b = 0;   // group widths: columns of A^T and B per chunk slot
  bool a_resident = true;
  uint32_t rb = 1;  // groups of the resident operand per block
  uint32_t resident_slots = 0, streamed_slots = 0;
  uint32_t stage_slots = 0;  // staging for natural operands (per natural side)
  uint32_t lookahead = 2;    // steps whose chunks are prepared before a step's matmuls
  uint32_t out_slots = 3;    // output groups in flight
  uint64_t bias_bytes = 0;   // per bias slot, per partition
  double estimate_s = 0;     // what the choice was made on
};

/// Throws std::invalid_argument when not even two chunks of each operand fit in SBUF.
MatmulPlan plan_matmul(const MatmulShape& s, const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
