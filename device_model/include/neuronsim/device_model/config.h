#pragma once
// A hardware configuration: a preset (JSON, every leaf {"value", "source"}; "preset": {"base":
// "trn1"} builds on another preset and holds only what differs) plus overrides by
// path ("hbm.bandwidth_gbps=820"). Code reads values through typed accessors that name the key
// on error; it holds no hardware numbers of its own.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace neuronsim::device_model {

class Config {
 public:
  /// A built-in preset by name ("trn1", "trn2") or a path to a preset JSON file.
  static Config load(std::string_view name_or_path);
  /// Parses a preset from a JSON text; `origin` names it in errors.
  static Config parse(std::string_view json_text, const std::string& origin);
  /// Names of the built-in presets.
  static std::vector<std::string> builtin_names();
  /// A built-in preset's JSON text as its file holds it (keys in file order); empty if unknown.
  static std::string_view builtin_text(std::string_view name);

  const std::string& name() const { return name_; }

  double number(std::string_view path) const;
  int64_t integer(std::string_view path) const;
  bool boolean(std::string_view path) const;
  std::string string(std::string_view path) const;
  bool has(std::string_view path) const;

  /// Overrides one value; the text is parsed as the type the preset holds there.
  void set(std::string_view path, std::string_view value_text);
  /// Applies "key=value" strings in order.
  void apply_overrides(const std::vector<std::string>& assignments);
  /// The overrides applied so far, {"path": value}.
  const nlohmann::json& overrides() const { return overrides_; }

  /// Every leaf path, sorted.
  std::vector<std::string> keys() const;
  /// The whole preset with sources, values as overridden.
  const nlohmann::json& tree() const { return tree_; }
  /// {"path": value} for every leaf: what a trace's metadata records.
  nlohmann::json flat_values() const;

 private:
  Config(nlohmann::json tree, std::string origin);
  const nlohmann::json& leaf(std::string_view path) const;
  nlohmann::json* find_leaf(std::string_view path);
  [[noreturn]] void unknown_key(std::string_view path) const;

  nlohmann::json tree_;
  nlohmann::json overrides_ = nlohmann::json::object();
  std::string origin_;
  std::string name_;
};

}  // namespace neuronsim::device_model
