#include "neuronsim/kernels/rearrange.h"

#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/kernels/elementwise.h"

namespace neuronsim::kernels {
namespace {

int64_t wrap_dim(int64_t d, int64_t nd, const char* what) {
  const int64_t w = d < 0 ? d + nd : d;
  if (w < 0 || w >= nd) throw std::invalid_argument(fmt::format("{}: dim {} of {}", what, d, nd));
  return w;
}

// `t` narrowed to [start, start + len) along dim d.
TensorDesc narrow(TensorDesc t, size_t d, int64_t start, int64_t len) {
  t.address += static_cast<uint64_t>(start * t.strides[d] *
                                     static_cast<int64_t>(device_model::dtype_size(t.dtype)));
  t.sizes[d] = len;
  return t;
}

}  // namespace

device_model::Program build_flip(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& out, const std::vector<int64_t>& dims,
                                 const device_model::CoreParams& core) {
  if (in.sizes != out.sizes) throw std::invalid_argument("flip: input and output sizes differ");
  TensorDesc src = in;
  std::vector<bool> flipped(in.sizes.size(), false);
  for (int64_t d : dims) {
    const size_t w = static_cast<size_t>(wrap_dim(d, in.dim(), "flip"));
    if (flipped[w]) continue;  // as on the CPU, a repeated dim flips once
    flipped[w] = true;
    if (src.sizes[w] <= 1) continue;
    src = narrow(src, w, src.sizes[w] - 1, src.sizes[w]);
    src.strides[w] = -src.strides[w];
  }
  if (in.numel() == 0) return device_model::Program{name, {}, {}};
  return build_copy(name, src, out, core);
}

device_model::Program build_roll(const std::string& name, const TensorDesc& in,
                                 const TensorDesc& out, const std::vector<int64_t>& shifts,
                                 const std::vector<int64_t>& dims,
                                 const device_model::CoreParams& core) {
  if (in.sizes != out.sizes) throw std::invalid_argument("roll: input and output sizes differ");
  if (shifts.size() != dims.size())
    throw std::invalid_argument("roll: shifts and dims differ in length");
  if (in.numel() == 0) return device_model::Program{name, {}, {}};
  std::vector<std::pair<TensorDesc, TensorDesc>> blocks{{in, out}};
  for (size_t k = 0; k < dims.size(); ++k) {
    const size_t d = static_cast<size_t>(wrap_dim(dims[k], in.dim(), "roll"));
    const int64_t n = in.sizes[d];
    const int64_t s = ((shifts[k] % n) + n) % n;
    if (s == 0) continue;
    std::vector<std::pair<TensorDesc, TensorDesc>> next;
    for (const auto& [src, dst] : blocks) {
      // in[0, n - s) -> out[s, n); in[n - s, n) -> out[0, s).
      next.emplace_back(narrow(src, d, 0, n - s), narrow(dst, d, s, n - s));
      next.emplace_back(narrow(src, d, n - s, s), narrow(dst, d, 0, s));
    }
    blocks = std::move(next);
  }
  return build_copies(name, blocks, core);
}

}  // namespace neuronsim::kernels
