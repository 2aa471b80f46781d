#include "neuronsim/device_model/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "neuronsim/device_model/errors.h"
#include "presets_embedded.h"

namespace neuronsim::device_model {
namespace {

bool is_leaf(const nlohmann::json& j) {
  return j.is_object() && j.contains("value");
}

void collect_leaves(const nlohmann::json& node, const std::string& prefix,
                    std::vector<std::string>& out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (prefix.empty() && it.key() == "preset") continue;  // descriptive header, not parameters
    std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (is_leaf(*it)) {
      out.push_back(path);
    } else if (it->is_object()) {
      collect_leaves(*it, path, out);
    }
  }
}

// Checks that every leaf is {"value": scalar, "source": string, ...}, naming the first offender.
void check_shape(const nlohmann::json& node, const std::string& prefix, const std::string& origin) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (prefix.empty() && it.key() == "preset") continue;
    std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (!it->is_object()) {
      throw ConfigError(fmt::format(
          "{}: key '{}' must be an object {{\"value\": ..., \"source\": ...}} or a group", origin,
          path));
    }
    if (is_leaf(*it)) {
      const auto& v = (*it)["value"];
      if (!(v.is_number() || v.is_boolean() || v.is_string())) {
        throw ConfigError(
            fmt::format("{}: key '{}' has a value that is not a number, boolean "
                        "or string",
                        origin, path));
      }
      if (!it->contains("source") || !(*it)["source"].is_string()) {
        throw ConfigError(fmt::format("{}: key '{}' has no \"source\" string", origin, path));
      }
      // set() checks overrides against "choices"; the preset's own value must pass too.
      if (it->contains("choices")) {
        const auto& c = (*it)["choices"];
        const bool strings =
            v.is_string() && c.is_array() && !c.empty() &&
            std::all_of(c.begin(), c.end(), [](const nlohmann::json& x) { return x.is_string(); });
        if (!strings) {
          throw ConfigError(fmt::format(
              "{}: key '{}' has \"choices\" but they are not a list of strings for a string value",
              origin, path));
        }
        if (std::find(c.begin(), c.end(), v) == c.end()) {
          throw ConfigError(
              fmt::format("{}: key '{}' has value {} which is not one of its choices {}", origin,
                          path, v.dump(), c.dump()));
        }
      }
    } else if (it->contains("source")) {
      // A leaf that lost its value would otherwise be reported as a group with a bad child.
      throw ConfigError(
          fmt::format("{}: key '{}' has a \"source\" but no \"value\"", origin, path));
    } else {
      check_shape(*it, path, origin);
    }
  }
}

// Overlays `over` on `base`: objects merge key by key, anything else replaces.
void merge_into(nlohmann::json& base, const nlohmann::json& over) {
  for (auto it = over.begin(); it != over.end(); ++it) {
    if (it->is_object() && base.contains(it.key()) && base[it.key()].is_object() &&
        !it->contains("value")) {
      merge_into(base[it.key()], *it);
    } else {
      base[it.key()] = *it;
    }
  }
}

// A preset naming a base ("preset": {"base": "trn1"}) holds only what differs from it: an
// instance preset (trn1.32xlarge) reuses its chip preset's parameters and sources.
nlohmann::json resolve_base(nlohmann::json tree, const std::string& origin, int depth) {
  if (!tree.is_object() || !tree.contains("preset") || !tree["preset"].is_object() ||
      !tree["preset"].contains("base")) {
    return tree;
  }
  const auto& base = tree["preset"]["base"];
  if (!base.is_string()) throw ConfigError(origin + ": \"preset\": {\"base\"} must be a string");
  if (depth > 8) throw ConfigError(origin + ": preset bases nest too deep (a cycle?)");
  const std::string name = base.get<std::string>();
  std::string text, base_origin;
  for (const auto& p : embedded_presets()) {
    if (p.name == name) text = p.json, base_origin = name + " (built-in preset)";
  }
  if (base_origin.empty()) {
    // A file, relative to the preset that names it.
    std::string path = name;
    const size_t slash = origin.rfind('/');
    if (!name.empty() && name[0] != '/' && slash != std::string::npos) {
      path = origin.substr(0, slash + 1) + name;
    }
    std::ifstream in{path};
    if (!in) {
      throw ConfigError(
          fmt::format("{}: base preset '{}' is neither built in nor a file", origin, name));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str(), base_origin = path;
  }
  nlohmann::json merged;
  try {
    merged = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", base_origin, e.what()));
  }
  merged = resolve_base(std::move(merged), base_origin, depth + 1);
  if (!merged.is_object()) throw ConfigError(base_origin + ": a preset must be a JSON object");
  merge_into(merged, tree);
  return merged;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

Config::Config(nlohmann::json tree, std::string origin)
    : tree_(resolve_base(std::move(tree), origin, 0)), origin_(std::move(origin)) {
  if (!tree_.is_object()) throw ConfigError(origin_ + ": a preset must be a JSON object");
  check_shape(tree_, "", origin_);
  if (tree_.contains("preset") && tree_["preset"].contains("name") &&
      tree_["preset"]["name"].is_string()) {
    name_ = tree_["preset"]["name"].get<std::string>();
  } else {
    throw ConfigError(origin_ + ": missing \"preset\": {\"name\": ...}");
  }
}

Config Config::parse(std::string_view json_text, const std::string& origin) {
  nlohmann::json tree;
  try {
    tree = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw ConfigError(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
  return Config(std::move(tree), origin);
}

Config Config::load(std::string_view name_or_path) {
  for (const auto& p : embedded_presets()) {
    if (p.name == name_or_path) return parse(p.json, std::string(p.name) + " (built-in preset)");
  }
  std::ifstream in{std::string(name_or_path)};
  if (!in) {
    std::string names, best;
    size_t best_d = 3;  // suggest only close names
    for (const auto& n : builtin_names()) {
      names += (names.empty() ? "" : ", ") + n;
      const size_t d = edit_distance(n, name_or_path);
      if (d < best_d) best_d = d, best = n;
    }
    throw ConfigError(fmt::format(
        "unknown preset '{}'{}: not a built-in preset ({}) and no such file", name_or_path,
        best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best), names));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), std::string(name_or_path));
}

std::string_view Config::builtin_text(std::string_view name) {
  for (const auto& p : embedded_presets()) {
    if (p.name == name) return p.json;
  }
  return {};
}

std::vector<std::string> Config::builtin_names() {
  std::vector<std::string> out;
  for (const auto& p : embedded_presets()) out.emplace_back(p.name);
  return out;
}

void Config::unknown_key(std::string_view path) const {
  std::string best;
  size_t best_d = 4;  // suggest only close names
  for (const auto& k : keys()) {
    size_t d = edit_distance(k, path);
    if (d < best_d) best_d = d, best = k;
  }
  throw ConfigError(fmt::format("unknown configuration key '{}' in preset {}{}", path, name_,
                                best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best)));
}

const nlohmann::json& Config::leaf(std::string_view path) const {
  return *const_cast<Config*>(this)->find_leaf(path);
}

nlohmann::json* Config::find_leaf(std::string_view path) {
  nlohmann::json* node = &tree_;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part(path.substr(start, dot == std::string_view::npos ? path.npos : dot - start));
    if (part.empty() || !node->is_object() || !node->contains(part)) unknown_key(path);
    node = &(*node)[part];
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (!is_leaf(*node)) unknown_key(path);
  return node;
}

bool Config::has(std::string_view path) const {
  try {
    leaf(path);
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

double Config::number(std::string_view path) const {
  const auto& v = leaf(path)["value"];
  if (!v.is_number())
    throw ConfigError(fmt::format("configuration key '{}' is not a number", path));
  return v.get<double>();
}

int64_t Config::integer(std::string_view path) const {
  const auto& v = leaf(path)["value"];
  if (!v.is_number_integer()) {
    throw ConfigError(fmt::format("configuration key '{}' is not an integer", path));
  }
  return v.get<int64_t>();
}

bool Config::boolean(std::string_view path) const {
  const auto& v = leaf(path)["value"];
  if (!v.is_boolean()) {
    throw ConfigError(fmt::format("configuration key '{}' is not a boolean", path));
  }
  return v.get<bool>();
}

std::string Config::string(std::string_view path) const {
  const auto& v = leaf(path)["value"];
  if (!v.is_string())
    throw ConfigError(fmt::format("configuration key '{}' is not a string", path));
  return v.get<std::string>();
}

void Config::set(std::string_view path, std::string_view text) {
  nlohmann::json& node = *find_leaf(path);
  nlohmann::json& v = node["value"];
  auto bad = [&](std::string_view expected) {
    throw ConfigError(fmt::format("invalid value '{}' for configuration key '{}': expected {}",
                                  text, path, expected));
  };
  if (v.is_boolean()) {
    if (text == "true" || text == "1")
      v = true;
    else if (text == "false" || text == "0")
      v = false;
    else
      bad("true or false");
  } else if (v.is_number_integer()) {
    int64_t x = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec != std::errc() || p != text.data() + text.size()) bad("an integer");
    v = x;
  } else if (v.is_number()) {
    double x = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(x)) bad("a number");
    v = x;
  } else {
    if (node.contains("choices")) {
      bool ok = false;
      std::string list;
      for (const auto& c : node["choices"]) {
        ok |= c.get<std::string>() == text;
        list += (list.empty() ? "" : ", ") + c.get<std::string>();
      }
      if (!ok) bad("one of " + list);
    }
    v = std::string(text);
  }
  overrides_[std::string(path)] = v;
}

void Config::apply_overrides(const std::vector<std::string>& assignments) {
  for (const auto& a : assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError(fmt::format("malformed override '{}': expected key=value", a));
    }
    set(std::string_view(a).substr(0, eq), std::string_view(a).substr(eq + 1));
  }
}

std::vector<std::string> Config::keys() const {
  std::vector<std::string> out;
  collect_leaves(tree_, "", out);
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json Config::flat_values() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& k : keys()) out[k] = leaf(k)["value"];
  return out;
}

}  // namespace neuronsim::device_model
