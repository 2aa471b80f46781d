// Data movement: tensor_copy and DMA, converting between dtypes.
#include <cstring>
#include <vector>

#include "exec_ops.h"
#include "executor_rows.h"

namespace neuronsim::device_model::exec {

// Same dtype: raw. Integer to integer (tensor_copy, `int_exact`): exact, wrapping when narrowing.
// Otherwise through fp32, as DMA casts always are.
void exec_copy(const AccessPattern& dst, const AccessPattern& src, const MemoryMap& mem,
               bool int_exact) {
  if (dst.dtype == src.dtype) {  // raw element copy: exact for every type
    const size_t es = dtype_size(src.dtype);
    std::vector<uint8_t> row;
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      uint8_t* d = contiguous_row(mem, dst, p);
      const uint8_t* s = contiguous_row(mem, src, p);
      if (d && s) {  // memmove: the row is read before it is written, as below
        std::memmove(d, s, src.free_elements() * es);
        continue;
      }
      row.resize(src.free_elements() * es);
      for_each_in_partition(
          mem, src, p, [&](const uint8_t* e, uint64_t i) { std::memcpy(&row[i * es], e, es); });
      for_each_in_partition(mem, dst, p,
                            [&](uint8_t* e, uint64_t i) { std::memcpy(e, &row[i * es], es); });
    }
    return;
  }
  if (int_exact && all_int({dst.dtype, src.dtype})) {
    std::vector<int64_t> a;
    for (uint32_t p = 0; p < dst.partitions; ++p) {
      load_row_int(mem, src, p, a);
      store_row_int(mem, dst, p, a);
    }
    return;
  }
  std::vector<float> a;
  for (uint32_t p = 0; p < dst.partitions; ++p) {
    load_row(mem, src, p, a);
    store_row(mem, dst, p, a);
  }
}

void exec_tensor_copy(const Instruction& in, const MemoryMap& mem) {
  exec_copy(in.dst, in.src0, mem, /*int_exact=*/true);
}

void exec_dma(const Instruction& in, const MemoryMap& mem) {
  // Element order is row-major over each AP; the two patterns may have different shapes.
  const AccessPattern& s = in.src0;
  const AccessPattern& d = in.dst;
  const size_t ses = dtype_size(s.dtype), des = dtype_size(d.dtype);
  if (s.partitions == d.partitions && s.free_elements() == d.free_elements()) {
    exec_copy(d, s, mem, /*int_exact=*/false);
    return;
  }
  std::vector<uint8_t> flat(s.elements() * ses);
  for_each_element(s, [&](int64_t addr, uint32_t p, uint64_t i) {
    std::memcpy(&flat[(p * s.free_elements() + i) * ses], mem.element(s, p, addr), ses);
  });
  for_each_element(d, [&](int64_t addr, uint32_t p, uint64_t i) {
    const uint8_t* e = &flat[(p * d.free_elements() + i) * ses];
    uint8_t* out = mem.element(d, p, addr);
    if (s.dtype == d.dtype)
      std::memcpy(out, e, des);
    else
      store_float(out, d.dtype, load_float(e, s.dtype));  // DMA casts go src -> fp32 -> dst
  });
}

}  // namespace neuronsim::device_model::exec
