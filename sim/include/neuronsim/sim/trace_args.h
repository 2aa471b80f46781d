#pragma once
// The arguments of one trace record (an instruction's operands, cycles, bytes ...), built on the
// simulating thread without allocating. A TraceArgs borrows everything it names (keys, strings,
// payloads): a sink copies what it keeps before slice() returns, and a file sink turns it into
// text on its writer thread. Serialised, the args are the JSON object nlohmann::json would dump
// for the same members (keys sorted, a later entry replacing an earlier one of the same key).
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace neuronsim::sim {

/// Appends the text of a value (unquoted, unescaped) to `out`; `data` holds the value's bytes
/// (possibly unaligned).
using TraceTextFormatter = void (*)(const char* data, std::string& out);

class TraceArgs {
 public:
  enum class Kind : uint8_t {
    kInt,
    kUint,
    kDouble,
    kBool,
    kString,    // text: the string
    kJsonText,  // text: a serialised JSON value, written as it is
    kDeferred,  // text: a trivially copyable value's bytes, `format` makes its string
  };
  struct Entry {
    std::string_view key;
    Kind kind = Kind::kInt;
    union {
      int64_t i;
      uint64_t u;
      double d;
      bool b;
    } v{};
    std::string_view text;
    TraceTextFormatter format = nullptr;

    Entry() = default;
    template <typename T>
    requires std::is_integral_v<T> Entry(std::string_view k, T value) : key(k) {
      if constexpr (std::is_same_v<T, bool>) {
        kind = Kind::kBool;
        v.b = value;
      } else if constexpr (std::is_signed_v<T>) {
        kind = Kind::kInt;
        v.i = value;
      } else {
        kind = Kind::kUint;
        v.u = value;
      }
    }
    template <typename T>
    requires std::is_floating_point_v<T> Entry(std::string_view k, T value)
        : key(k), kind(Kind::kDouble) {
      v.d = static_cast<double>(value);
    }
    Entry(std::string_view k, std::string_view s) : key(k), kind(Kind::kString), text(s) {}
    Entry(std::string_view k, const std::string& s) : Entry(k, std::string_view(s)) {}
    Entry(std::string_view k, const char* s) : Entry(k, std::string_view(s)) {}
  };
  /// Entries kept inline; more go into the JSON object (slower, still correct).
  static constexpr size_t kInlineEntries = 12;

  TraceArgs() = default;
  TraceArgs(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries) add(e);
  }
  /// A JSON object's members (callers that already have one; the slow path).
  TraceArgs(nlohmann::json object) : json_(std::move(object)) {}  // NOLINT: implicit on purpose

  TraceArgs& add(const Entry& e);
  /// A serialised JSON value written as it is (the text must be valid JSON).
  TraceArgs& add_json_text(std::string_view key, std::string_view json_text);
  /// A string made from `value` (trivially copyable, read when the record is written) by `F`:
  /// formatting is left to whoever writes the record.
  template <typename T, void (*F)(const T&, std::string&)>
  TraceArgs& add_deferred(std::string_view key, const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    Entry e;
    e.key = key;
    e.kind = Kind::kDeferred;
    e.text = std::string_view(reinterpret_cast<const char*>(&value), sizeof(T));
    e.format = &call_formatter<T, F>;
    return add(e);
  }

  const Entry* begin() const { return entries_.data(); }
  const Entry* end() const { return entries_.data() + size_; }
  size_t size() const { return size_; }
  /// Members given as a JSON object (null when none): written before the entries.
  const nlohmann::json& json() const { return json_; }
  bool empty() const { return size_ == 0 && (json_.is_null() || json_.empty()); }

  /// The args as a JSON object (what an in-memory sink keeps).
  nlohmann::json to_json() const;
  /// Appends the JSON object text, byte for byte what to_json().dump() gives.
  void append_json(std::string& out) const;

 private:
  template <typename T, void (*F)(const T&, std::string&)>
  static void call_formatter(const char* data, std::string& out) {
    T value;
    std::memcpy(&value, data, sizeof(T));
    F(value, out);
  }
  std::array<Entry, kInlineEntries> entries_;
  uint8_t size_ = 0;
  nlohmann::json json_;
};

/// JSON text pieces written exactly as nlohmann::json::dump() writes them.
void append_json_string(std::string& out, std::string_view s);
void append_json_number(std::string& out, double v);
void append_json_number(std::string& out, int64_t v);
void append_json_number(std::string& out, uint64_t v);

/// The JSON object of `base`'s members (null: none) and then `entries` (a later one replacing an
/// earlier member of the same key), as text: what nlohmann::json::dump() writes for it.
void append_args_json(std::string& out, const nlohmann::json& base, const TraceArgs::Entry* entries,
                      size_t count);
/// The same object as a JSON value.
nlohmann::json args_json(const nlohmann::json& base, const TraceArgs::Entry* entries, size_t count);

}  // namespace neuronsim::sim
