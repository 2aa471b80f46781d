#include "distributed/wire.h"

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>

namespace neuronsim::backend::distributed {

namespace {
constexpr uint64_t kMagic = 0x4e53434332ull;  // "NSCC2"

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

uint64_t hash_shapes(const std::vector<at::IntArrayRef>& shapes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (ndim, dims...)
  auto mix = [&](int64_t v) {
    for (int i = 0; i < 8; ++i)
      h = (h ^ ((static_cast<uint64_t>(v) >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  mix(static_cast<int64_t>(shapes.size()));
  for (const auto& s : shapes) {
    mix(static_cast<int64_t>(s.size()));
    for (int64_t d : s) mix(d);
  }
  return h;
}

// Python's names: "float32", not c10's "Float".
std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat:
      return "float32";
    case c10::kDouble:
      return "float64";
    case c10::kHalf:
      return "float16";
    case c10::kBFloat16:
      return "bfloat16";
    case c10::kLong:
      return "int64";
    case c10::kInt:
      return "int32";
    case c10::kShort:
      return "int16";
    case c10::kChar:
      return "int8";
    case c10::kByte:
      return "uint8";
    case c10::kBool:
      return "bool";
    default:
      return c10::toString(t);
  }
}

std::string op_name(int op) {
  static const char* names[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "none";
}
}  // namespace

int64_t SlotLayout::splits_offset() const {
  return round_up(sizeof(Header), 64);
}
int64_t SlotLayout::payload_offset() const {
  return round_up(splits_offset() + 2 * 8 * ranks, 64);
}
int64_t SlotLayout::slot_bytes() const {
  return round_up(payload_offset() + inline_bytes, 64);
}

Header make_header(const Call& call, uint64_t sequence, int64_t arrival_ps, int64_t payload_bytes) {
  Header h;
  h.magic = kMagic;
  h.sequence = sequence;
  h.arrival_ps = arrival_ps;
  h.kind = static_cast<int32_t>(call.kind);
  h.dtype = static_cast<int32_t>(call.dtype);
  h.reduce_op = call.reduce_op;
  h.root = call.root;
  h.tensors = static_cast<int32_t>(call.shapes.size());
  if (!call.shapes.empty()) {
    const auto& s = call.shapes.front();
    h.ndim = static_cast<int32_t>(std::min<size_t>(s.size(), kMaxDims));
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t at = std::min<size_t>(i, kMaxDims - 1);
      h.dims[at] = i < kMaxDims ? s[i] : h.dims[at] * s[i];
    }
  }
  h.shapes_hash = hash_shapes(call.shapes);
  h.payload_bytes = payload_bytes;
  h.model_bytes = static_cast<int64_t>(call.model_bytes);
  return h;
}

std::string describe(const Header& h) {
  std::string dims;
  for (int i = 0; i < h.ndim; ++i) dims += (i ? ", " : "") + std::to_string(h.dims[i]);
  const std::string dtype = dtype_name(static_cast<c10::ScalarType>(h.dtype));
  std::string s = fmt::format("{}[{}]", dtype, dims);
  if (h.tensors > 1) s += fmt::format(" (first of {} tensors)", h.tensors);
  return s;
}

void check_agreement(const Call& call, const std::vector<Header>& headers,
                     const std::vector<std::vector<int64_t>>& send_splits,
                     const std::vector<std::vector<int64_t>>& recv_splits,
                     const std::string& group) {
  const Header& a = headers.front();
  const std::string where = fmt::format("neuron backend, process group '{}'", group);
  for (size_t r = 0; r < headers.size(); ++r) {
    const Header& b = headers[r];
    TORCH_CHECK(b.magic == kMagic, where, ": rank ", r,
                " sent a malformed collective header (a different neuronsim version?)");
    const auto kind_a = device_model::interconnect::kind_name(
        static_cast<device_model::interconnect::Kind>(a.kind));
    const auto kind_b = device_model::interconnect::kind_name(
        static_cast<device_model::interconnect::Kind>(b.kind));
    TORCH_CHECK(b.sequence == a.sequence && b.kind == a.kind, where, ": rank 0 called ", kind_a,
                " (collective #", a.sequence, ") while rank ", r, " called ", kind_b,
                " (collective #", b.sequence,
                "); every rank of a group must issue the same collectives in the same order");
    if (call.kind == device_model::interconnect::Kind::kBarrier) continue;
    TORCH_CHECK(b.dtype == a.dtype, where, ": ", call.name, " with mismatched dtypes: rank 0 has ",
                describe(a), ", rank ", r, " has ", describe(b));
    TORCH_CHECK(b.reduce_op == a.reduce_op, where, ": ", call.name,
                " with mismatched reduce ops: rank 0 uses ", op_name(a.reduce_op), ", rank ", r,
                " uses ", op_name(b.reduce_op));
    TORCH_CHECK(b.root == a.root, where, ": ", call.name, " with mismatched roots: rank 0 uses ",
                a.root, ", rank ", r, " uses ", b.root);
    if (call.kind == device_model::interconnect::Kind::kAllToAll)
      continue;  // shapes may differ; splits below
    TORCH_CHECK(b.shapes_hash == a.shapes_hash && b.tensors == a.tensors, where, ": ", call.name,
                " with mismatched shapes: rank 0 has ", describe(a), ", rank ", r, " has ",
                describe(b));
  }
  if (call.kind != device_model::interconnect::Kind::kAllToAll) return;
  // What rank i sends rank j must be what rank j expects from rank i.
  const size_t n = headers.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      TORCH_CHECK(send_splits[i][j] == recv_splits[j][i], where, ": ", call.name,
                  " with mismatched split sizes: rank ", i, " sends ", send_splits[i][j],
                  " bytes to rank ", j, ", which expects ", recv_splits[j][i], " bytes from it");
    }
  }
}

void check_posted_sizes(const Call& call, const std::vector<Header>& headers, int me,
                        const std::vector<int64_t>& expects, const std::vector<int64_t>& sends,
                        const std::string& group) {
  for (size_t r = 0; r < headers.size(); ++r) {
    if (static_cast<int>(r) == me) continue;
    const Header& h = headers[r];
    const bool to_me = h.sends_bytes == expects[r];
    TORCH_CHECK(to_me && h.expects_bytes == sends[r], "neuron backend, process group '", group,
                "': ", call.name, " with mismatched sizes: rank ", to_me ? me : r, " sends ",
                to_me ? sends[r] : h.sends_bytes, " bytes to rank ", to_me ? r : me,
                ", which expects ", to_me ? h.expects_bytes : expects[r], " bytes from it");
  }
}

}  // namespace neuronsim::backend::distributed
