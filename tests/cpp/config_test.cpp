// Configuration: built-in presets, overrides by path, and a ConfigError naming the key (or the
// file) for every malformed preset, override or out-of-range value.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "neuronsim/device_model/config.h"
#include "neuronsim/device_model/device.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/params.h"

namespace neuronsim::device_model {
namespace {

using nlohmann::json;

// Runs `fn` and expects a ConfigError whose message contains each of `mentions`.
template <typename Fn>
void expect_config_error(Fn&& fn, const std::vector<std::string>& mentions) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning " << mentions.front();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    for (const auto& m : mentions) {
      EXPECT_NE(what.find(m), std::string::npos) << "message: " << what << "\n  missing: " << m;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ConfigError: " << e.what();
  }
}

ChipParams with(const std::vector<std::string>& overrides, const std::string& preset = "trn1") {
  Config c = Config::load(preset);
  c.apply_overrides(overrides);
  return parse_chip_params(c);
}

void expect_override_error(const std::string& assignment,
                           const std::vector<std::string>& mentions) {
  SCOPED_TRACE(assignment);
  expect_config_error([&] { with({assignment}); }, mentions);
}

// The JSON node of a leaf path.
const json& node(const json& tree, const std::string& path) {
  const json* n = &tree;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    n = &n->at(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return *n;
    start = dot + 1;
  }
}

// trn1's tree with one change, parsed as a preset file named `origin`.
template <typename Fn>
Config parse_changed(Fn&& change, const std::string& origin = "edited.json") {
  json tree = Config::load("trn1").tree();
  change(tree);
  return Config::parse(tree.dump(), origin);
}

TEST(Config, BuiltinPresetsLoad) {
  const auto names = Config::builtin_names();
  for (const char* want : {"trn1", "trn2"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const Config c = Config::load(name);
    EXPECT_EQ(c.name(), name);
    const auto keys = c.keys();
    EXPECT_GT(keys.size(), 40u);
    EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
    EXPECT_TRUE(c.overrides().empty());
    EXPECT_NO_THROW(parse_chip_params(c));
    EXPECT_EQ(c.flat_values().size(), keys.size());
  }
}

// Every hardware number names where it comes from.
TEST(Config, EveryLeafHasASource) {
  for (const auto& name : Config::builtin_names()) {
    const Config c = Config::load(name);
    for (const auto& key : c.keys()) {
      const json& leaf = node(c.tree(), key);
      ASSERT_TRUE(leaf.contains("source")) << name << " " << key;
      ASSERT_TRUE(leaf["source"].is_string()) << name << " " << key;
      EXPECT_FALSE(leaf["source"].get<std::string>().empty()) << name << " " << key;
      EXPECT_TRUE(c.has(key));
    }
  }
}

TEST(Config, TypedAccessors) {
  const Config c = Config::load("trn1");
  EXPECT_EQ(c.integer("sbuf.partitions"), 128);
  EXPECT_DOUBLE_EQ(c.number("sbuf.partitions"), 128.0);  // integers read as numbers too
  EXPECT_DOUBLE_EQ(c.number("tensor.frequency_ghz"), 2.8);
  EXPECT_EQ(c.string("tensor.timing_mode"), "neuroncore");
  EXPECT_FALSE(c.has("tensor"));       // a group, not a leaf
  EXPECT_FALSE(c.has("preset.name"));  // the header is not a parameter
  EXPECT_FALSE(c.has("sbuf.partitions.value"));
  expect_config_error([&] { c.integer("tensor.frequency_ghz"); },
                      {"configuration key 'tensor.frequency_ghz' is not an integer"});
  expect_config_error([&] { c.string("tensor.rows"); },
                      {"configuration key 'tensor.rows' is not a string"});
  expect_config_error([&] { c.number("tensor.timing_mode"); },
                      {"configuration key 'tensor.timing_mode' is not a number"});
  expect_config_error([&] { c.boolean("tensor.rows"); },
                      {"configuration key 'tensor.rows' is not a boolean"});
}

TEST(Config, OverridesChangeParams) {
  const ChipParams base = with({});
  EXPECT_DOUBLE_EQ(base.hbm.bandwidth_bytes_per_s, 410e9);
  Config c = Config::load("trn1");
  c.apply_overrides({"hbm.bandwidth_gbps=820", "tensor.frequency_ghz=1.4", "dma.queues=4",
                     "tensor.timing_mode=scalesim", "sbuf.partition_bytes=65536",
                     "dma.queues=8"});  // later overrides win
  const ChipParams p = parse_chip_params(c);
  EXPECT_DOUBLE_EQ(p.hbm.bandwidth_bytes_per_s, 820e9);
  EXPECT_DOUBLE_EQ(p.core.tensor.frequency_hz, 1.4e9);
  EXPECT_DOUBLE_EQ(p.tensor_peak_flops(), base.tensor_peak_flops() / 2);
  EXPECT_EQ(p.core.dma.queues, 8u);
  EXPECT_EQ(p.core.tensor.timing_mode, TensorTimingMode::kScaleSim);
  EXPECT_EQ(p.core.sbuf.partition_bytes, 65536u);
  // Overrides are recorded with their typed values, and the tree shows them.
  EXPECT_EQ(c.overrides()["hbm.bandwidth_gbps"], 820.0);
  EXPECT_EQ(c.overrides()["dma.queues"], 8);
  EXPECT_EQ(c.overrides()["tensor.timing_mode"], "scalesim");
  EXPECT_EQ(c.flat_values()["dma.queues"], 8);
  EXPECT_EQ(node(c.tree(), "dma.queues")["value"], 8);
  // Untouched values stay.
  EXPECT_EQ(p.core.sbuf.partitions, base.core.sbuf.partitions);
  // Values may contain '=': only the first one splits.
  expect_override_error("tensor.timing_mode=scale=sim", {"invalid value 'scale=sim'"});
}

TEST(Config, UnknownKeySuggestsTheClosest) {
  Config c = Config::load("trn1");
  expect_config_error(
      [&] { c.set("hbm.bandwith_gbps", "1"); },
      {"unknown configuration key 'hbm.bandwith_gbps'", "did you mean 'hbm.bandwidth_gbps'?"});
  expect_config_error([&] { c.apply_overrides({"tensor.row=64"}); },
                      {"unknown configuration key 'tensor.row'", "did you mean 'tensor.rows'?"});
  expect_config_error([&] { c.number("sbuf.partition"); },
                      {"'sbuf.partition'", "did you mean 'sbuf.partitions'?"});
  // Nothing close: no suggestion.
  try {
    c.set("completely.unrelated", "1");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'completely.unrelated'"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
  // Groups, the descriptive header and the inside of a leaf are not keys.
  for (const char* key : {"hbm", "preset.name", "sbuf.partitions.value", "sbuf.partitions.source",
                          "", ".", "hbm..latency_ns", "hbm.latency_ns."}) {
    expect_config_error([&] { c.set(key, "1"); }, {"unknown configuration key"});
  }
  EXPECT_TRUE(c.overrides().empty());
}

TEST(Config, MalformedOverrideValues) {
  expect_override_error("sbuf.partitions=abc",
                        {"invalid value 'abc' for configuration key 'sbuf.partitions': expected "
                         "an integer"});
  expect_override_error("sbuf.partitions=1.5", {"'sbuf.partitions': expected an integer"});
  expect_override_error("sbuf.partitions=128x", {"'sbuf.partitions': expected an integer"});
  expect_override_error("sbuf.partitions= 128", {"'sbuf.partitions': expected an integer"});
  expect_override_error("sbuf.partitions=", {"invalid value ''", "'sbuf.partitions'"});
  expect_override_error("sbuf.partitions=99999999999999999999",
                        {"'sbuf.partitions': expected an integer"});
  expect_override_error("hbm.bandwidth_gbps=abc",
                        {"invalid value 'abc' for configuration key 'hbm.bandwidth_gbps': "
                         "expected a number"});
  for (const char* v : {"inf", "-inf", "nan", "1e999", "820GB"}) {
    expect_override_error(std::string("hbm.bandwidth_gbps=") + v,
                          {"invalid value '" + std::string(v) + "'", "'hbm.bandwidth_gbps'"});
  }
  expect_override_error("tensor.timing_mode=fast",
                        {"invalid value 'fast' for configuration key 'tensor.timing_mode': "
                         "expected one of neuroncore, scalesim"});
  expect_override_error("hbm.bandwidth_gbps", {"malformed override 'hbm.bandwidth_gbps': "
                                               "expected key=value"});
  expect_override_error("=820", {"malformed override '=820'"});
  expect_override_error("", {"malformed override ''"});
  // A failed override leaves the config unchanged.
  Config c = Config::load("trn1");
  EXPECT_THROW(c.set("sbuf.partitions", "many"), ConfigError);
  EXPECT_EQ(c.integer("sbuf.partitions"), 128);
  EXPECT_TRUE(c.overrides().empty());
}

TEST(Config, BooleanLeaves) {
  // No built-in preset has a boolean yet; a preset file may.
  Config c = parse_changed([](json& t) {
    t["sim"] = {{"trace", {{"value", false}, {"source", "test"}}}};
  });
  EXPECT_FALSE(c.boolean("sim.trace"));
  c.set("sim.trace", "true");
  EXPECT_TRUE(c.boolean("sim.trace"));
  c.set("sim.trace", "0");
  EXPECT_FALSE(c.boolean("sim.trace"));
  expect_config_error([&] { c.set("sim.trace", "yes"); },
                      {"invalid value 'yes' for configuration key 'sim.trace': expected true or "
                       "false"});
}

TEST(Config, MalformedPresetFiles) {
  expect_config_error([] { Config::parse("{", "broken.json"); }, {"broken.json: not valid JSON"});
  expect_config_error([] { Config::parse("", "empty.json"); }, {"empty.json: not valid JSON"});
  // nlohmann reports an overflowing number as out_of_range, not parse_error.
  expect_config_error([] { Config::parse(R"({"hbm": {"x": {"value": 1e400}}})", "huge.json"); },
                      {"huge.json: not valid JSON", "1e400"});
  expect_config_error([] { Config::parse("[]", "list.json"); },
                      {"list.json: a preset must be a JSON object"});
  expect_config_error([] { parse_changed([](json& t) { t.erase("preset"); }, "nameless.json"); },
                      {"nameless.json: missing \"preset\": {\"name\": ...}"});
  expect_config_error([] { parse_changed([](json& t) { t["preset"].erase("name"); }); },
                      {"edited.json: missing \"preset\""});
  expect_config_error([] { parse_changed([](json& t) { t["preset"]["name"] = 1; }); },
                      {"edited.json: missing \"preset\""});
  expect_config_error(
      [] { parse_changed([](json& t) { t["hbm"]["bandwidth_gbps"].erase("source"); }); },
      {"edited.json: key 'hbm.bandwidth_gbps' has no \"source\" string"});
  expect_config_error(
      [] { parse_changed([](json& t) { t["hbm"]["bandwidth_gbps"]["source"] = 5; }); },
      {"edited.json: key 'hbm.bandwidth_gbps' has no \"source\" string"});
  expect_config_error(
      [] { parse_changed([](json& t) { t["hbm"]["bandwidth_gbps"].erase("value"); }); },
      {"edited.json: key 'hbm.bandwidth_gbps' has a \"source\" but no \"value\""});
  expect_config_error([] { parse_changed([](json& t) { t["hbm"]["bandwidth_gbps"] = 410; }); },
                      {"edited.json: key 'hbm.bandwidth_gbps' must be an object"});
  for (const json& bad : {json(nullptr), json::array({1}), json::object()}) {
    expect_config_error(
        [&] { parse_changed([&](json& t) { t["hbm"]["bandwidth_gbps"]["value"] = bad; }); },
        {"edited.json: key 'hbm.bandwidth_gbps' has a value that is not a number, boolean or "
         "string"});
  }
  // "choices" must be strings and must contain the preset's own value.
  expect_config_error(
      [] { parse_changed([](json& t) {
             t["tensor"]["timing_mode"]["choices"] = {1, 2};
           }); },
      {"edited.json: key 'tensor.timing_mode' has \"choices\""});
  expect_config_error(
      [] { parse_changed([](json& t) { t["tensor"]["timing_mode"]["choices"] = "neuroncore"; }); },
      {"key 'tensor.timing_mode' has \"choices\""});
  expect_config_error(
      [] { parse_changed([](json& t) { t["tensor"]["timing_mode"]["value"] = "fast"; }); },
      {"edited.json: key 'tensor.timing_mode' has value \"fast\" which is not one of its choices"});
  // A wrong type in a valid file is found when the value is read, naming the key.
  expect_config_error(
      [] {
        parse_chip_params(parse_changed([](json& t) { t["sbuf"]["partitions"]["value"] = "128"; }));
      },
      {"configuration key 'sbuf.partitions' is not an integer"});
  expect_config_error(
      [] { parse_chip_params(parse_changed([](json& t) { t["tensor"].erase("rows"); })); },
      {"unknown configuration key 'tensor.rows'"});
}

TEST(Config, LoadFromFile) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/neuronsim_config_test_" + std::to_string(::getpid()) + ".json";
  const std::string bad = good + ".bad";
  {
    json tree = Config::load("trn2").tree();
    tree["preset"]["name"] = "my-trn2";
    std::ofstream(good) << tree.dump(2);
    std::ofstream(bad) << tree.dump(2).substr(0, 100);
  }
  const Config c = Config::load(good);
  EXPECT_EQ(c.name(), "my-trn2");
  EXPECT_EQ(parse_chip_params(c).cores_per_chip, 8u);
  expect_config_error([&] { Config::load(bad); }, {bad + ": not valid JSON"});
  expect_config_error([] { Config::load("trn9"); },
                      {"unknown preset 'trn9' (did you mean 'trn1'?): not a built-in preset (",
                       "trn1", "trn2", ") and no such file"});
  // No suggestion for a name far from every preset.
  expect_config_error([] { Config::load("h100"); },
                      {"unknown preset 'h100': not a built-in preset ("});
  expect_config_error([&] { Config::load(dir); }, {dir});  // a directory is not a preset
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

// Range checks in parse_chip_params name the key and the value.
TEST(Config, RangeChecksNameTheKey) {
  expect_override_error("hbm.bandwidth_gbps=0",
                        {"configuration key 'hbm.bandwidth_gbps' must be > 0, got 0"});
  expect_override_error("hbm.bandwidth_gbps=-410", {"'hbm.bandwidth_gbps' must be > 0"});
  expect_override_error("tensor.frequency_ghz=0", {"'tensor.frequency_ghz' must be > 0"});
  expect_override_error("vector.frequency_ghz=-1", {"'vector.frequency_ghz' must be > 0"});
  expect_override_error("hbm.latency_ns=-1", {"'hbm.latency_ns' must be >= 0, got -1"});
  expect_override_error("dma.launch_latency_ns=-0.5", {"'dma.launch_latency_ns' must be >= 0"});
  expect_override_error("chip.cores=3", {"'chip.cores' (3) must be a multiple of "
                                         "'chip.hbm_stacks' (2)"});
  expect_override_error("chip.cores=0", {"'chip.cores' must be in [1, 64], got 0"});
  expect_override_error("sbuf.partitions=0", {"'sbuf.partitions' must be in [1, 1024], got 0"});
  expect_override_error("sbuf.partitions=-128", {"'sbuf.partitions' must be in [1, 1024]"});
  expect_override_error("semaphores.count=0", {"'semaphores.count' must be in [1, 4096]"});
  expect_override_error("dma.queues=257", {"'dma.queues' must be in [1, 256], got 257"});
  expect_override_error("psum.banks=3", {"'psum.banks' must divide 'psum.partition_bytes'"});
  expect_override_error("sbuf.partitions=64", {"'tensor.rows' cannot exceed 'sbuf.partitions'"});
  expect_override_error("tensor.moving_free_max=1024",
                        {"'tensor.moving_free_max' must fit one PSUM bank"});
  expect_override_error("hbm.capacity_gib=5000", {"'hbm.capacity_gib' must be <= 4096"});
  expect_override_error("chip.logical_core_size=3", {"'chip.logical_core_size' must divide"});
  // Positive but smaller than a byte after conversion: rejected, not a 0-byte HBM.
  expect_config_error(
      [] {
        parse_chip_params(
            parse_changed([](json& t) { t["hbm"]["capacity_gib"]["value"] = 1e-12; }));
      },
      {"'hbm.capacity_gib' must be >= 1 MiB"});
  // The limits themselves are accepted.
  EXPECT_EQ(with({"dma.queues=256", "semaphores.count=4096"}).core.dma.queues, 256u);
  EXPECT_EQ(with({"chip.cores=4", "chip.hbm_stacks=4"}).cores_per_stack(), 1u);
}

// Peak TensorE throughput: 2 x 128 x 128 PEs x clock.
TEST(Config, DerivedPeaks) {
  const ChipParams trn1 = with({}, "trn1");
  EXPECT_DOUBLE_EQ(trn1.tensor_peak_flops(), 2.0 * 128 * 128 * 2.8e9);
  EXPECT_NEAR(trn1.tensor_peak_flops() / 1e12, 91.75, 0.01);
  const ChipParams trn2 = with({}, "trn2");
  EXPECT_DOUBLE_EQ(trn2.tensor_peak_flops(), 2.0 * 128 * 128 * 2.4e9);
  EXPECT_NEAR(trn2.tensor_peak_flops() / 1e12, 78.64, 0.01);
  EXPECT_EQ(trn1.cores_per_chip, 2u);
  EXPECT_EQ(trn1.cores_per_stack(), 1u);
  EXPECT_EQ(trn1.core.psum.bank_bytes(), 2048u);
  EXPECT_EQ(trn2.cores_per_stack(), 2u);
}

TEST(Config, DeviceWithMoreCoresThanTheInstance) {
  DeviceOptions o;
  o.cores = 3;
  expect_config_error([&] { Device dev(Config::load("trn1"), o); },
                      {"3 NeuronCores requested but the trn1 preset's instance has 2"});
}

}  // namespace
}  // namespace neuronsim::device_model
