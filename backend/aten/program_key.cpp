#include "aten/program_key.h"

#include <ATen/ATen.h>

#include <cstring>

namespace neuronsim::backend {
namespace {

class KeyWriter {
 public:
  KeyWriter(const OpInvocation& inv, ProgramKey& out) : inv_(inv), out_(out) {}

  template <typename T>
  void raw(const T& v) {
    out_.key.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void tag(char c) { out_.key.push_back(c); }

  bool tensor(const at::Tensor& t) {
    if (!t.defined()) {
      tag('u');
      return true;
    }
    raw(static_cast<int8_t>(t.scalar_type()));
    raw(static_cast<uint8_t>(t.is_conj() | (t.is_neg() << 1)));
    raw(static_cast<uint8_t>(t.dim()));
    for (int64_t s : t.sizes()) raw(s);
    if (!is_neuron(t)) {  // a CPU scalar: its value is part of the program
      if (t.dim() != 0 || t.is_conj() || t.is_neg()) return false;
      tag('c');
      out_.key.append(static_cast<const char*>(t.const_data_ptr()), t.element_size());
      return true;
    }
    tag('t');
    for (int64_t s : t.strides()) raw(s);
    raw(t.storage_offset());
    const uint64_t base = inv_.hbm_address(t.storage().data());
    const uint64_t bytes = t.storage().nbytes();
    uint32_t region = 0;
    while (region < out_.regions.size() && out_.regions[region].base != base) ++region;
    if (region == out_.regions.size()) out_.regions.push_back({base, bytes});
    if (out_.regions[region].bytes != bytes) return false;
    raw(region);
    raw(bytes);
    return true;
  }

  bool value(const c10::IValue& v) {
    if (v.isNone()) {
      tag('n');
    } else if (v.isTensor()) {
      return tensor(v.toTensor());
    } else if (v.isTensorList()) {
      tag('L');
      raw(static_cast<uint32_t>(v.toTensorList().size()));
      for (const at::Tensor& t : v.toTensorList()) {
        if (!tensor(t)) return false;
      }
    } else if (v.isInt()) {
      tag('i');
      raw(v.toInt());
    } else if (v.isDouble()) {
      tag('d');
      raw(v.toDouble());
    } else if (v.isBool()) {
      tag('b');
      raw(v.toBool());
    } else if (v.isString()) {
      tag('s');
      out_.key.append(v.toStringRef());
      tag('\0');
    } else if (v.isIntList()) {
      tag('I');
      for (int64_t x : v.toIntList()) raw(x);
      tag(';');
    } else if (v.isDoubleList()) {
      tag('D');
      for (double x : v.toDoubleList()) raw(x);
      tag(';');
    } else if (v.isBoolList()) {
      tag('B');
      for (bool x : v.toBoolList()) raw(x);
      tag(';');
    } else if (v.isList()) {  // optional tensors (index), symbolic ints
      tag('l');
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isSymInt()) {
          tag('z');
          raw(e.toSymInt().guard_int(__FILE__, __LINE__));
        } else if (!value(e)) {
          return false;
        }
      }
      tag(';');
    } else if (v.isScalar()) {  // Scalar of a complex value lands here too
      const c10::Scalar s = v.toScalar();
      if (s.isComplex()) return false;
      tag(s.isFloatingPoint() ? 'f' : 'k');
      raw(s.isFloatingPoint() ? s.toDouble() : static_cast<double>(s.toLong()));
      if (!s.isFloatingPoint()) raw(s.toLong());
    } else if (v.isDevice()) {
      tag('v');
      raw(v.toDevice().index());
    } else {
      return false;  // generators and anything else a shape does not describe
    }
    return true;
  }

 private:
  const OpInvocation& inv_;
  ProgramKey& out_;
};

}  // namespace

std::optional<ProgramKey> program_key(const OpInvocation& inv, bool functional) {
  ProgramKey out;
  out.key.reserve(256);
  out.key.append(inv.schema->name());
  out.key.push_back('.');
  out.key.append(inv.schema->overload_name());
  out.key.push_back(functional ? 'F' : 'T');
  KeyWriter w(inv, out);
  for (const c10::IValue& a : inv.args) {
    if (!w.value(a)) return std::nullopt;
  }
  w.tag('>');
  for (const at::Tensor& t : inv.outputs) {
    if (!w.tensor(t)) return std::nullopt;
  }
  return out;
}

}  // namespace neuronsim::backend
