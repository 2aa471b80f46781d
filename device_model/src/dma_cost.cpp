// How one DMA transfer spreads over the DMA engines (ARCH-v2, DMA-OVERVIEW, DMA-BW).
#include <algorithm>
#include <cmath>

#include "neuronsim/device_model/cost_model.h"

namespace neuronsim::device_model {
namespace {

// Elements in the innermost contiguous run of an AP (a run never crosses SBUF partitions).
uint64_t contiguous_run(const AccessPattern& ap) {
  uint64_t run = 1;
  int64_t expect = 1;
  for (int k = ap.ndims - 1; k >= 0; --k) {
    if (ap.dims[k].size == 1) continue;
    if (ap.dims[k].stride != expect) break;
    run *= ap.dims[k].size;
    expect *= ap.dims[k].size;
  }
  if (ap.space == MemSpace::kHbm && run == ap.free_elements() &&
      ap.partition_stride == static_cast<int64_t>(run)) {
    run *= ap.partitions;  // HBM rows that follow each other form one run
  }
  return run;
}

}  // namespace

DmaTransferShape dma_transfer_shape(const Instruction& in, const DmaParams& dma) {
  DmaTransferShape s;
  const AccessPattern& src = in.src0;
  const AccessPattern& dst = in.dst;
  const double elements = static_cast<double>(src.elements());
  const double elem_bytes =
      static_cast<double>(std::max(dtype_size(src.dtype), dtype_size(dst.dtype)));
  s.bytes = elements * elem_bytes;
  const uint64_t src_run = contiguous_run(src), dst_run = contiguous_run(dst);
  const uint64_t chunk = std::max<uint64_t>(1, std::min(src_run, dst_run));

  // Element-granular transfers (a tensor stored transposed relative to its SBUF layout).
  // ARCH-v3: Trainium2 DMA engines transpose 2- and 4-byte data into SBUF at up to 90% (from
  // HBM) or 50% (SBUF to SBUF) of their throughput, the 16 engines cooperating. Otherwise the
  // descriptors carry the stride pattern (nki-dge.rst), one per partition row, and every element
  // is its own access of dma.strided_access_bytes.
  double rate = 1.0, access = elem_bytes;
  const bool granular = chunk == 1 && elements > 1;
  if (granular) {
    const double eff = dst.space != MemSpace::kSbuf  ? 0.0
                       : src.space == MemSpace::kHbm ? dma.transpose_efficiency_hbm
                                                     : dma.transpose_efficiency_sbuf;
    s.transpose = eff > 0 && (elem_bytes == 2 || elem_bytes == 4);
    if (s.transpose) {
      rate = eff;
    } else {
      access = std::max<double>(elem_bytes, dma.strided_access_bytes);
      rate = elem_bytes / access;
    }
  }
  for (const AccessPattern* ap : {&src, &dst}) {
    if (ap->space != MemSpace::kHbm) continue;
    const bool strided = granular && !s.transpose && contiguous_run(*ap) == 1;
    s.hbm_bytes += strided ? elements * access : static_cast<double>(ap->bytes());
  }

  // DMA-BW: the fixed cost is per packet, and descriptors are cut into packets of
  // dma.packet_bytes (compute-comm-overlap.rst: 4 KiB by default). So payloads of >= 4 KiB per
  // descriptor all run at the same sustained rate (DMA-BW table: 23 B/ns per engine on trn2).
  if (s.transpose) {
    s.packets = s.descriptors =
        static_cast<uint64_t>(std::ceil(s.bytes / static_cast<double>(dma.packet_bytes)));
  } else if (granular) {
    const uint32_t rows = dst.space != MemSpace::kHbm ? dst.partitions : src.partitions;
    s.descriptors = std::max<uint32_t>(1, rows);
    const double per_row = elements / static_cast<double>(s.descriptors) * access;
    s.packets = s.descriptors * static_cast<uint64_t>(std::ceil(per_row / dma.packet_bytes));
  } else {
    s.descriptors = static_cast<uint64_t>(std::ceil(elements / static_cast<double>(chunk)));
    const double packets_per_descriptor =
        std::ceil(static_cast<double>(chunk) * elem_bytes / dma.packet_bytes);
    s.packets = s.descriptors * static_cast<uint64_t>(packets_per_descriptor);
  }

  // ARCH-v2: a transfer touching SBUF spreads over up to 16 engines of 8 partitions each.
  // HBM-to-HBM transfers spread their packets over the engines.
  uint32_t engines;
  if (src.space != MemSpace::kHbm || dst.space != MemSpace::kHbm) {
    const uint32_t rows = src.space != MemSpace::kHbm ? src.partitions : dst.partitions;
    engines = (rows + dma.partitions_per_engine - 1) / dma.partitions_per_engine;
  } else {
    engines =
        static_cast<uint32_t>(std::min<double>(dma.engines, std::ceil(s.bytes / dma.packet_bytes)));
  }
  s.engines = std::clamp<uint32_t>(engines, 1, dma.engines);
  s.cap_bytes_per_s = s.engines * dma.engine_bandwidth_bytes_per_s * rate;
  const double packets_per_engine = std::ceil(static_cast<double>(s.packets) / s.engines);
  s.descriptor_time_ns = packets_per_engine * dma.descriptor_overhead_ns;
  return s;
}

}  // namespace neuronsim::device_model
