#include "neuronsim/sim/trace_args.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace neuronsim::sim {
namespace {

void append_entry_value(std::string& out, const TraceArgs::Entry& e, std::string& scratch) {
  switch (e.kind) {
    case TraceArgs::Kind::kInt:
      append_json_number(out, e.v.i);
      return;
    case TraceArgs::Kind::kUint:
      append_json_number(out, e.v.u);
      return;
    case TraceArgs::Kind::kDouble:
      append_json_number(out, e.v.d);
      return;
    case TraceArgs::Kind::kBool:
      out += e.v.b ? "true" : "false";
      return;
    case TraceArgs::Kind::kString:
      append_json_string(out, e.text);
      return;
    case TraceArgs::Kind::kJsonText:
      out.append(e.text);
      return;
    case TraceArgs::Kind::kDeferred:
      scratch.clear();
      e.format(e.text.data(), scratch);
      append_json_string(out, scratch);
      return;
  }
}

nlohmann::json entry_value(const TraceArgs::Entry& e) {
  switch (e.kind) {
    case TraceArgs::Kind::kInt:
      return e.v.i;
    case TraceArgs::Kind::kUint:
      return e.v.u;
    case TraceArgs::Kind::kDouble:
      return e.v.d;
    case TraceArgs::Kind::kBool:
      return e.v.b;
    case TraceArgs::Kind::kString:
      return std::string(e.text);
    case TraceArgs::Kind::kJsonText:
      return nlohmann::json::parse(e.text);
    case TraceArgs::Kind::kDeferred: {
      std::string s;
      e.format(e.text.data(), s);
      return s;
    }
  }
  return nullptr;
}

}  // namespace

TraceArgs& TraceArgs::add(const Entry& e) {
  if (size_ == kInlineEntries) {  // full: the entries so far become JSON members, in order
    json_ = args_json(json_, begin(), size_);
    size_ = 0;
  }
  entries_[size_++] = e;
  return *this;
}

TraceArgs& TraceArgs::add_json_text(std::string_view key, std::string_view json_text) {
  Entry e;
  e.key = key;
  e.kind = Kind::kJsonText;
  e.text = json_text;
  return add(e);
}

nlohmann::json TraceArgs::to_json() const {
  return args_json(json_, begin(), size_);
}

void TraceArgs::append_json(std::string& out) const {
  append_args_json(out, json_, begin(), size_);
}

void append_json_string(std::string& out, std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') {
      // Escapes and UTF-8 checks as nlohmann writes them (the rare case).
      out += nlohmann::json(std::string(s)).dump();
      return;
    }
  }
  const size_t at = out.size();
  out.resize(at + s.size() + 2);
  char* p = out.data() + at;
  *p = '"';
  std::memcpy(p + 1, s.data(), s.size());
  p[s.size() + 1] = '"';
}

void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  // Whole numbers below 1e15 (cycles, bytes, flops): nlohmann writes their digits and ".0".
  if (v == std::trunc(v) && std::fabs(v) < 1e15 && !(v == 0 && std::signbit(v))) {
    const fmt::format_int text(static_cast<int64_t>(v));
    out.append(text.data(), text.size());
    out += ".0";
    return;
  }
  std::array<char, 64> buf;
  char* end = nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), end);
}

void append_json_number(std::string& out, int64_t v) {
  const fmt::format_int text(v);
  out.append(text.data(), text.size());
}

void append_json_number(std::string& out, uint64_t v) {
  const fmt::format_int text(v);
  out.append(text.data(), text.size());
}

void append_args_json(std::string& out, const nlohmann::json& base, const TraceArgs::Entry* entries,
                      size_t count) {
  if (count == 0) {
    out += base.is_null() ? "{}" : base.dump();
    return;
  }
  if (!base.is_null() && !(base.is_object() && base.empty())) {
    out += args_json(base, entries, count).dump();
    return;
  }
  // Keys in order, the last entry of a key winning: nlohmann's std::map and operator[].
  std::array<const TraceArgs::Entry*, TraceArgs::kInlineEntries> order;
  const size_t n = std::min(count, order.size());
  for (size_t i = 0; i < n; ++i) order[i] = entries + i;
  std::stable_sort(order.begin(), order.begin() + n,
                   [](const auto* a, const auto* b) { return a->key < b->key; });
  std::string scratch;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < n; ++i) {
    if (i + 1 < n && order[i + 1]->key == order[i]->key) continue;
    if (!first) out += ',';
    first = false;
    append_json_string(out, order[i]->key);
    out += ':';
    append_entry_value(out, *order[i], scratch);
  }
  out += '}';
}

nlohmann::json args_json(const nlohmann::json& base, const TraceArgs::Entry* entries,
                         size_t count) {
  nlohmann::json j = base.is_null() ? nlohmann::json::object() : base;
  for (size_t i = 0; i < count; ++i) j[std::string(entries[i].key)] = entry_value(entries[i]);
  return j;
}

}  // namespace neuronsim::sim
