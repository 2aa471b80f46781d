// ncsim kernel: write a library kernel (GEMM, layernorm) as a program file.
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/device_model/program_json.h"
#include "neuronsim/kernels/dense_gemm.h"
#include "neuronsim/kernels/dense_layer_norm.h"

namespace ncsim {

using namespace neuronsim;

namespace {

device_model::DType dtype_arg(const std::string& s) {
  auto t = device_model::parse_dtype(s == "fp8" ? "fp8_e4m3" : s);  // "fp8": the e4m3 encoding
  if (!t) throw device_model::Error("unknown dtype '" + s + "'");
  return *t;
}

nlohmann::json region(const std::string& name, uint64_t offset, uint64_t bytes, nlohmann::json init,
                      const std::string& output = "") {
  nlohmann::json r{{"name", name}, {"offset", offset}, {"bytes", bytes}};
  if (!init.is_null()) r["init"] = std::move(init);
  if (!output.empty()) r["output"] = output;
  return r;
}

void write(const nlohmann::json& j, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << j.dump(1) << "\n";
  } else {
    std::ofstream(path) << j.dump(1) << "\n";
    std::cerr << "wrote " << path << "\n";
  }
}

uint64_t align(uint64_t x) {
  return (x + 4095) / 4096 * 4096;
}

}  // namespace

void add_kernel_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("kernel", "write a library kernel as a program file");
  cmd->require_subcommand(1);
  struct Args {
    std::string preset = "trn1", dtype = "bf16", out_dtype, epilogue = "gelu", out;
    uint32_t m = 1024, k = 1024, n = 1024, rows = 1024, dim = 1024;
    bool bias = true;
  };
  auto a = std::make_shared<Args>();

  auto* gemm = cmd->add_subcommand("gemm", "C = act(A @ B + bias), A given as A^T [k, m]");
  gemm->add_option("--m", a->m)->capture_default_str();
  gemm->add_option("--k", a->k)->capture_default_str();
  gemm->add_option("--n", a->n)->capture_default_str();
  gemm->add_option("--dtype", a->dtype,
                   "input dtype (fp8 = fp8_e4m3: double-row matmuls on cores that have them)")
      ->capture_default_str();
  gemm->add_option("--out-dtype", a->out_dtype, "defaults to --dtype");
  gemm->add_option("--epilogue", a->epilogue, "activation after the bias")->capture_default_str();
  gemm->add_flag("--bias,!--no-bias", a->bias, "add a bias row")->capture_default_str();
  gemm->add_option("--preset", a->preset, "preset whose tile limits to use")->capture_default_str();
  gemm->add_option("-o,--out", a->out, "output file (default stdout)");
  gemm->callback([a] {
    const auto chip = device_model::parse_chip_params(device_model::Config::load(a->preset));
    kernels::GemmSpec s;
    s.m = a->m, s.k = a->k, s.n = a->n;
    s.in_dtype = dtype_arg(a->dtype);
    s.out_dtype = dtype_arg(a->out_dtype.empty() ? a->dtype : a->out_dtype);
    s.bias = a->bias;
    auto f = device_model::parse_act_func(a->epilogue);
    if (!f) throw device_model::Error("unknown activation '" + a->epilogue + "'");
    s.epilogue = *f;
    const uint64_t es = device_model::dtype_size(s.in_dtype),
                   oes = device_model::dtype_size(s.out_dtype);
    kernels::GemmAddresses ad;
    ad.a_t = 0;
    ad.b = align(ad.a_t + uint64_t{s.k} * s.m * es);
    ad.bias = align(ad.b + uint64_t{s.k} * s.n * es);
    ad.c = align(ad.bias + uint64_t{s.n} * es);
    const std::string in_name(device_model::dtype_name(s.in_dtype));
    nlohmann::json j = device_model::program_to_json(kernels::build_gemm(s, ad, chip.core));
    j["hbm_regions"] = {
        region("a_t", ad.a_t, uint64_t{s.k} * s.m * es,
               {{"kind", "normal"}, {"dtype", in_name}, {"seed", 1}}),
        region("b", ad.b, uint64_t{s.k} * s.n * es,
               {{"kind", "normal"}, {"dtype", in_name}, {"seed", 2}, {"stddev", 0.05}}),
        region("bias", ad.bias, uint64_t{s.n} * es,
               {{"kind", "normal"}, {"dtype", in_name}, {"seed", 3}}),
        region("c", ad.c, uint64_t{s.m} * s.n * oes, nullptr,
               std::string(device_model::dtype_name(s.out_dtype)))};
    write(j, a->out);
  });

  auto* ln = cmd->add_subcommand("layernorm", "y = layernorm(x) * gamma + beta over rows of x");
  ln->add_option("--rows", a->rows)->capture_default_str();
  ln->add_option("--dim", a->dim)->capture_default_str();
  ln->add_option("--dtype", a->dtype)->capture_default_str();
  ln->add_option("--preset", a->preset)->capture_default_str();
  ln->add_option("-o,--out", a->out, "output file (default stdout)");
  ln->callback([a] {
    const auto chip = device_model::parse_chip_params(device_model::Config::load(a->preset));
    kernels::LayerNormSpec s;
    s.rows = a->rows, s.dim = a->dim, s.dtype = dtype_arg(a->dtype);
    const uint64_t es = device_model::dtype_size(s.dtype);
    kernels::LayerNormAddresses ad;
    ad.x = 0;
    ad.gamma = align(uint64_t{s.rows} * s.dim * es);
    ad.beta = align(ad.gamma + uint64_t{s.dim} * es);
    ad.y = align(ad.beta + uint64_t{s.dim} * es);
    nlohmann::json j = device_model::program_to_json(kernels::build_layernorm(s, ad, chip.core));
    j["hbm_regions"] = {region("x", ad.x, uint64_t{s.rows} * s.dim * es,
                               {{"kind", "normal"}, {"dtype", a->dtype}, {"seed", 4}}),
                        region("gamma", ad.gamma, uint64_t{s.dim} * es,
                               {{"kind", "normal"}, {"dtype", a->dtype}, {"seed", 5}}),
                        region("beta", ad.beta, uint64_t{s.dim} * es,
                               {{"kind", "normal"}, {"dtype", a->dtype}, {"seed", 6}}),
                        region("y", ad.y, uint64_t{s.rows} * s.dim * es, nullptr, a->dtype)};
    write(j, a->out);
  });
}

}  // namespace ncsim
