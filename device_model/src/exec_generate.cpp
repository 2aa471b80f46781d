// Opcodes that generate data: iota, rng (Philox streams identical to the host's) and memset.
#include <array>
#include <cstring>
#include <vector>

#include "exec_ops.h"
#include "executor_rows.h"
#include "neuronsim/device_model/philox.h"

namespace neuronsim::device_model::exec {

void exec_iota(const Instruction& in, const MemoryMap& mem) {
  const AccessPattern& d = in.dst;
  std::array<uint32_t, kMaxFreeDims> size{1, 1, 1, 1};
  std::array<int32_t, kMaxFreeDims> step{0, 0, 0, 0};
  // Align the dst's dims to the innermost positions of a 4-D index.
  for (int k = 0; k < d.ndims; ++k) {
    size[kMaxFreeDims - d.ndims + k] = d.dims[k].size;
    step[kMaxFreeDims - d.ndims + k] = in.iota_steps[k];
  }
  std::vector<int64_t> row(d.free_elements());
  for (uint32_t p = 0; p < d.partitions; ++p) {
    size_t i = 0;
    for (uint32_t a = 0; a < size[0]; ++a)
      for (uint32_t b = 0; b < size[1]; ++b)
        for (uint32_t c = 0; c < size[2]; ++c)
          for (uint32_t e = 0; e < size[3]; ++e) {
            int64_t v = static_cast<int64_t>(in.iota_base) +
                        static_cast<int64_t>(p) * in.iota_channel_multiplier +
                        static_cast<int64_t>(a) * step[0] + static_cast<int64_t>(b) * step[1] +
                        static_cast<int64_t>(c) * step[2] + static_cast<int64_t>(e) * step[3];
            row[i++] = static_cast<int32_t>(static_cast<uint32_t>(v));  // int32 math
          }
    store_row_int(mem, d, p, row);
  }
}

// Element e of the destination (row-major, partition-major) draws Philox word
// (rng_base + e) of the stream (seed, offset): the same stream the host kernels draw.
void exec_rng(const Instruction& in, const MemoryMap& mem) {
  const AccessPattern& d = in.dst;
  const uint64_t per_p = d.free_elements();
  std::vector<float> row(per_p);
  std::vector<int64_t> irow(per_p);
  for (uint32_t p = 0; p < d.partitions; ++p) {
    for (uint64_t f = 0; f < per_p; ++f) {
      const uint64_t i = in.rng_base + p * per_p + f;
      switch (in.rng_dist) {
        case RngDist::kUniform:
          row[f] = in.imm + (in.imm2 - in.imm) * philox::uniform(in.rng_seed, in.rng_offset, i);
          break;
        case RngDist::kNormal:
          row[f] = in.imm + in.imm2 * philox::normal(in.rng_seed, in.rng_offset, i);
          break;
        case RngDist::kInteger: {
          const uint64_t range =
              static_cast<uint64_t>(static_cast<int64_t>(in.imm2) - static_cast<int64_t>(in.imm));
          irow[f] = static_cast<int64_t>(in.imm) +
                    static_cast<int64_t>(philox::bits(in.rng_seed, in.rng_offset, i) % range);
          break;
        }
      }
    }
    if (in.rng_dist == RngDist::kInteger)
      store_row_int(mem, d, p, irow);
    else
      store_row(mem, d, p, row);
  }
}

void exec_memset(const Instruction& in, const MemoryMap& mem) {
  unsigned char v[4];
  store_float(v, in.dst.dtype, in.imm);
  const size_t es = dtype_size(in.dst.dtype);
  for (uint32_t p = 0; p < in.dst.partitions; ++p) {
    for_each_in_partition(mem, in.dst, p, [&](uint8_t* e, uint64_t) { std::memcpy(e, v, es); });
  }
}

}  // namespace neuronsim::device_model::exec
