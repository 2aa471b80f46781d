// ncsim demo: the README's main job. Runs a bf16 GEMM with bias + GELU epilogue and a layernorm on
// one simulated NeuronCore, checks both against host references, writes a Perfetto trace and a
// text report.
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "neuronsim/device_model/errors.h"
#include "neuronsim/reference/host_checks.h"
#include "session.h"

namespace ncsim {

using namespace neuronsim;

void add_demo_command(CLI::App& app) {
  struct Args {
    DeviceArgs device;
    std::string trace = "out/demo_trace.json", report = "out/demo_report.txt";
    uint32_t m = 1024, k = 1024, n = 1024, rows = 2048, dim = 1024;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("demo", "GEMM+bias+GELU and layernorm on the simulated core");
  a->device.add_to(*cmd);
  cmd->add_option("--trace", a->trace, "trace file")->capture_default_str();
  cmd->add_option("--report", a->report, "report file")->capture_default_str();
  cmd->add_option("--m", a->m, "GEMM M")->capture_default_str();
  cmd->add_option("--k", a->k, "GEMM K")->capture_default_str();
  cmd->add_option("--n", a->n, "GEMM N")->capture_default_str();
  cmd->add_option("--rows", a->rows, "layernorm rows")->capture_default_str();
  cmd->add_option("--dim", a->dim, "layernorm width")->capture_default_str();
  cmd->callback([a] {
    for (const auto& f : {a->trace, a->report}) {
      const auto dir = std::filesystem::path(f).parent_path();
      if (!dir.empty()) std::filesystem::create_directories(dir);
    }
    Session session(a->device, 1, a->trace);
    device_model::Device& dev = session.device();
    const bool check = dev.mode() != device_model::ExecMode::kTiming;
    uint8_t* hbm = dev.hbm_data();
    std::string report;

    // Runs a kernel; in full mode, checks its output against the host reference (lazily: the
    // reference reads the inputs).
    auto run = [&](const device_model::Program& p, const char* what, uint64_t out,
                   device_model::DType t, uint64_t count,
                   const std::function<std::vector<double>()>& expected, double atol, double rtol) {
      const auto r = dev.run(0, p);
      report += fmt::format("{}: {} instructions, {:.3f} us simulated\n", p.name,
                            p.instruction_count(), r.duration().us());
      if (!check) return;
      const auto got = reference::read_floats(hbm + out, t, count);
      const auto cmp = reference::compare(got, expected(), atol, rtol);
      report += fmt::format(
          "  check vs host reference: max abs error {:.4g}, {} of {} outside bf16 tolerance\n",
          cmp.max_abs_error, cmp.mismatches, got.size());
      if (cmp.mismatches) {
        throw device_model::Error(fmt::format("{} result does not match the host reference", what));
      }
    };

    // GEMM: C[m, n] = gelu(A @ B + bias), bf16 in and out.
    kernels::GemmSpec g;
    g.m = a->m, g.k = a->k, g.n = a->n;
    g.bias = true;
    g.epilogue = device_model::ActFunc::kGelu;
    kernels::GemmAddresses ga;
    const uint64_t es = 2;
    ga.a_t = 0;
    ga.b = ga.a_t + uint64_t{g.k} * g.m * es;
    ga.bias = ga.b + uint64_t{g.k} * g.n * es;
    ga.c = ga.bias + uint64_t{g.n} * es;
    if (check) {
      reference::fill_normal(hbm + ga.a_t, g.in_dtype, uint64_t{g.k} * g.m, 1);
      reference::fill_normal(hbm + ga.b, g.in_dtype, uint64_t{g.k} * g.n, 2, 0.05f);
      reference::fill_normal(hbm + ga.bias, g.in_dtype, g.n, 3);
    }
    run(
        kernels::build_gemm(g, ga, dev.params().core), "GEMM", ga.c, g.out_dtype,
        uint64_t{g.m} * g.n, [&] { return reference::gemm(g, hbm, ga); }, 2e-2, 2e-2);

    // Layernorm over rows of x, bf16.
    kernels::LayerNormSpec l;
    l.rows = a->rows, l.dim = a->dim;
    kernels::LayerNormAddresses la;
    la.x = ga.c + uint64_t{g.m} * g.n * es;
    la.gamma = la.x + uint64_t{l.rows} * l.dim * es;
    la.beta = la.gamma + uint64_t{l.dim} * es;
    la.y = la.beta + uint64_t{l.dim} * es;
    if (check) {
      reference::fill_normal(hbm + la.x, l.dtype, uint64_t{l.rows} * l.dim, 4);
      reference::fill_normal(hbm + la.gamma, l.dtype, l.dim, 5);
      reference::fill_normal(hbm + la.beta, l.dtype, l.dim, 6);
    }
    run(
        kernels::build_layernorm(l, la, dev.params().core), "layernorm", la.y, l.dtype,
        uint64_t{l.rows} * l.dim, [&] { return reference::layernorm(l, hbm, la); }, 3e-2, 2e-2);

    const auto summary = session.finish();
    report = fmt::format("neuronsim demo on {} ({} mode)\n\n", dev.params().preset_name,
                         device_model::exec_mode_name(dev.mode())) +
             report + "\n" + traces::format_summary(summary);
    std::cout << report;
    std::ofstream(a->report) << report;
    std::cout << fmt::format("\ntrace: {} (open in https://ui.perfetto.dev)\nreport: {}\n",
                             a->trace, a->report);
  });
}

}  // namespace ncsim
