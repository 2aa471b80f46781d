// Native random ops. Their values are the CPU's, as TorchNeuron's (which run on the CPU): ATen's
// CPU kernels on zero-copy views of the device tensors, drawing from the CPU default generator
// (accelerator/generator.h), so CPU and neuron draws interleave in one stream. A generator the
// user created, DTensor offset regions and ISA mode (the rng instruction computes the values)
// draw Philox streams instead, computed on the host exactly as the instruction does. The device
// time is the kernel library's random program either way.
#include <ATen/ATen.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/multinomial_native.h>
#include <torch/library.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "accelerator/context.h"
#include "accelerator/generator.h"
#include "aten/device_tensor.h"
#include "aten/kernel_report.h"
#include "aten/native_boxed.h"
#include "aten/op_observer.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"
#include "neuronsim/device_model/philox.h"
#include "neuronsim/kernels/ops/random_draws.h"

namespace neuronsim::backend {
namespace {

namespace philox = device_model::philox;

bool exact_64bit() {
  const char* v = std::getenv("NEURON_SIM_EXACT_64BIT");
  return v && std::strcmp(v, "1") == 0;
}

// 64-bit data is computed at 32 bits on the device (docs/neuron-device.md): the CPU stream's
// values, held as the device would hold them.
void round_64bit(const at::Tensor& host) {
  if (exact_64bit()) return;
  if (host.scalar_type() == at::kDouble) host.copy_(host.to(at::kFloat));
  if (host.scalar_type() == at::kLong) host.copy_(host.to(at::kInt));
}

// Values from a Philox stream (ISA mode, a user's generator, DTensor offset regions) rather than
// the CPU stream.
bool draws_philox(NeuronGenerator* g) {
  return isa_mode() || g->draws_philox();
}

NeuronGenerator::PhiloxStream philox_stream(NeuronGenerator* g, const at::Tensor& t) {
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->philox_stream(philox::blocks_for(static_cast<uint64_t>(t.numel())));
}

void set_stream(kernels::RandomSpec& s, const NeuronGenerator::PhiloxStream& st) {
  s.seed = st.seed;
  s.offset = st.offset;
}

// Values for every logical element, in row-major order, as a contiguous CPU tensor.
at::Tensor host_values(const at::Tensor& t, const kernels::RandomSpec& s) {
  const int64_t n = t.numel();
  if (s.dist == device_model::RngDist::kInteger) {
    const auto v = kernels::ops::philox_integer_draws(s, static_cast<int64_t>(s.a),
                                                      static_cast<int64_t>(s.b), n);
    return at::tensor(v, at::kLong).view(t.sizes());
  }
  return at::tensor(kernels::ops::philox_float_draws(s, n), at::kFloat).view(t.sizes());
}

// Device tensors the kernel reads besides its output (bernoulli's p, dropout's input and mask).
struct RandomOperands {
  at::Tensor p, dropout_input, dropout_mask;
};

void run(const char* op, const at::Tensor& out, kernels::RandomSpec spec,
         const RandomOperands& operands = {}) {
  OpScope scope(op, {out});
  const auto program = with_runtime([&](runtime::Runtime& r) {
    const auto hbm = hbm_addresses(r);
    if (operands.p.defined()) spec.p_tensor = describe(operands.p, hbm);
    if (operands.dropout_input.defined()) {
      spec.dropout_input = describe(operands.dropout_input, hbm);
      spec.dropout_mask = describe(operands.dropout_mask, hbm);
    }
    return kernels::ops::random_fill_programs(op, describe(out, hbm), spec,
                                              r.device().params().core);
  });
  launch_programs(out.device(), program, isa_mode() && out.is_contiguous());
  report_native_kernel(c10::OperatorName(op, ""), is_64bit(out.scalar_type()));
}

// `host_fill` draws the CPU stream's values into a CPU view with the CPU default generator.
template <typename HostFill>
at::Tensor& fill_random(at::Tensor& self, kernels::RandomSpec spec,
                        const std::optional<at::Generator>& gen, const char* op,
                        HostFill&& host_fill) {
  if (self.numel() == 0) return self;
  NeuronGenerator* g = get_generator(gen, self.device().index());
  if (draws_philox(g)) {
    set_stream(spec, philox_stream(g, self));
    cpu_view(self).copy_(host_values(self, spec));
  } else {
    const at::Tensor host = cpu_view(self);
    host_fill(host, g->host());
    round_64bit(host);
  }
  run(op, self, spec);
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  kernels::RandomSpec s;
  s.a = static_cast<float>(from);
  s.b = static_cast<float>(to);
  return fill_random(
      self, s, gen, "aten::uniform_",
      [&](const at::Tensor& h, const at::Generator& cg) { h.uniform_(from, to, cg); });
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  kernels::RandomSpec s;
  s.dist = device_model::RngDist::kNormal;
  s.a = static_cast<float>(mean);
  s.b = static_cast<float>(std);
  return fill_random(
      self, s, gen, "aten::normal_",
      [&](const at::Tensor& h, const at::Generator& cg) { h.normal_(mean, std, cg); });
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  kernels::RandomSpec s;
  s.exponential = static_cast<float>(lambd);
  return fill_random(
      self, s, gen, "aten::exponential_",
      [&](const at::Tensor& h, const at::Generator& cg) { h.exponential_(lambd, cg); });
}

// multinomial with replacement and more than one sample (ATen's multinomial_out handles the
// rest itself, with device ops: exponential draws q, p / q, argmax or topk). The values are the
// CPU kernel's on the CPU stream; on Philox streams each sample is one such Gumbel-max pass.
// The time: one pass per sample (exponential draws, the division, an argmax into the column).
void multinomial_with_replacement(at::Tensor& result, const at::Tensor& self, int64_t n,
                                  std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  OpScope scope("aten::multinomial", {result});
  NeuronGenerator* g = get_generator(gen, self.device().index());
  const at::Tensor probs = self.dim() == 1 ? self.unsqueeze(0) : self;
  const at::Tensor picks = result.dim() == 1 ? result.unsqueeze(0) : result;
  const at::Tensor q = at::empty(probs.sizes(), probs.options().dtype(at::kFloat));
  std::vector<kernels::RandomSpec> passes(static_cast<size_t>(n));
  for (auto& spec : passes) spec.exponential = 1.0f;
  if (draws_philox(g)) {
    const at::Tensor p = cpu_view(probs).to(at::kFloat);
    for (int64_t i = 0; i < n; ++i) {
      kernels::RandomSpec& spec = passes[static_cast<size_t>(i)];
      set_stream(spec, philox_stream(g, q));
      cpu_view(picks).select(1, i).copy_(p.div(host_values(q, spec)).argmax(1));
    }
  } else {
    cpu_view(result).copy_(at::multinomial(cpu_view(self), n, true, g->host()));
  }
  const auto programs = with_runtime([&](runtime::Runtime& r) {
    const auto hbm = hbm_addresses(r);
    std::vector<kernels::TensorDesc> columns;
    for (int64_t i = 0; i < n; ++i) columns.push_back(describe(picks.select(1, i), hbm));
    return kernels::ops::multinomial_programs(describe(probs, hbm), describe(q, hbm), columns,
                                              passes, r.device().params().core);
  });
  launch_programs(result.device(), programs, false);
  report_native_kernel(c10::OperatorName("aten::multinomial", ""), true);
}

int64_t default_to(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBool:
      return 2;
    case at::kByte:
      return 256;
    case at::kChar:
      return 128;
    case at::kShort:
      return 1 << 15;
    case at::kInt:
      return std::numeric_limits<int32_t>::max();
    case at::kLong:
      return std::numeric_limits<int32_t>::max();  // 32-bit on the device
    case at::kHalf:
      return (1 << 11) + 1;
    case at::kBFloat16:
      return (1 << 8) + 1;
    default:
      return (1 << 24) + 1;
  }
}

template <typename HostFill>
at::Tensor& random_impl(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        const std::optional<at::Generator>& gen, HostFill&& host_fill) {
  const int64_t hi = to.value_or(default_to(self));
  TORCH_CHECK(from < hi, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", hi);
  kernels::RandomSpec s;
  s.dist = device_model::RngDist::kInteger;
  s.a = static_cast<float>(from);
  s.b = static_cast<float>(hi);
  if (self.numel() == 0) return self;
  NeuronGenerator* g = get_generator(gen, self.device().index());
  if (!draws_philox(g)) {
    const at::Tensor host = cpu_view(self);
    host_fill(host, g->host());
    round_64bit(host);
    run("aten::random_", self, s);
    return self;
  }
  set_stream(s, philox_stream(g, self));
  // Exact 64-bit range on the host (the ISA parameters are fp32).
  const at::Tensor v =
      at::tensor(kernels::ops::philox_integer_draws(s, from, hi, self.numel()), at::kLong);
  cpu_view(self).copy_(v.view(self.sizes()));
  run("aten::random_", self, s);
  return self;
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  return random_impl(self, from, to, gen, [&](const at::Tensor& h, const at::Generator& cg) {
    h.random_(from, to, cg);
  });
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  return random_impl(self, 0, to, gen,
                     [&](const at::Tensor& h, const at::Generator& cg) { h.random_(to, cg); });
}

at::Tensor& random_default(at::Tensor& self, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  return random_impl(self, 0, std::nullopt, gen,
                     [&](const at::Tensor& h, const at::Generator& cg) { h.random_(cg); });
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  kernels::RandomSpec s;
  s.p = static_cast<float>(p);
  NeuronGenerator* g = get_generator(gen, self.device().index());
  if (draws_philox(g)) {
    set_stream(s, philox_stream(g, self));
    cpu_view(self).copy_(host_values(self, s).lt(static_cast<float>(p)));
  } else {
    cpu_view(self).bernoulli_(p, g->host());
  }
  run("aten::bernoulli_", self, s);
  return self;
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  if (self.numel() == 0) return self;
  kernels::RandomSpec s;
  NeuronGenerator* g = get_generator(gen, self.device().index());
  const at::Tensor pc = p.device().is_privateuseone() ? cpu_view(p) : p;
  if (draws_philox(g)) {
    set_stream(s, philox_stream(g, self));
    cpu_view(self).copy_(host_values(self, s).lt(pc.to(at::kFloat)));
  } else {
    cpu_view(self).bernoulli_(pc, g->host());
  }
  run("aten::bernoulli_", self, s, {p.device().is_privateuseone() ? p : p.to(self.device())});
  return self;
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> gen) {
  const BackendKernelScope kernel_scope;
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return bernoulli_tensor(out, self, gen);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  const BackendKernelScope kernel_scope;
  if (!train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::Tensor mask =
      at::empty_like(input, input.options().dtype(at::kBool), at::MemoryFormat::Contiguous);
  if (input.numel() == 0) return {out, mask};
  const double keep = 1.0 - p;
  kernels::RandomSpec s;
  s.p = static_cast<float>(keep);
  const at::Tensor in_cpu = cpu_view(input);
  NeuronGenerator* g = get_generator(std::nullopt, input.device().index());
  if (draws_philox(g)) {
    set_stream(s, philox_stream(g, input));
    const at::Tensor keep_mask = host_values(input, s).lt(static_cast<float>(keep));
    cpu_view(mask).copy_(keep_mask);
    cpu_view(out).copy_(keep > 0 ? in_cpu * keep_mask.to(in_cpu.scalar_type()) * (1.0 / keep)
                                 : at::zeros_like(in_cpu));
  } else {
    // What F.dropout computes on the CPU (ATen's _dropout_impl), draw for draw and rounding for
    // rounding: noise = bernoulli(1 - p) in the input's dtype, divided by 1 - p, times input.
    at::Tensor noise = at::empty_like(in_cpu);
    noise.bernoulli_(keep, g->host());
    cpu_view(mask).copy_(noise.ne(0));
    if (keep > 0) noise.div_(keep);
    cpu_view(out).copy_(in_cpu.mul(noise));
  }
  run("aten::native_dropout", out, s, {at::Tensor(), input, mask});
  return {out, mask};
}

}  // namespace

// Fills from a distribution.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_default);
  m.impl("exponential_", exponential_);
}

// multinomial: ATen's own (argument checks, the Gumbel-max path on device ops); the stub draws
// with replacement.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", TORCH_FN(at::native::multinomial));
  m.impl("multinomial.out", TORCH_FN(at::native::multinomial_out));
}

// Masks: bernoulli draws and dropout.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("bernoulli", bernoulli);
  m.impl("native_dropout", native_dropout);
}

}  // namespace neuronsim::backend

// The stub registers in ATen's namespace (the macro names ATen's registration type).
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(multinomial_with_replacement_stub,
                              &neuronsim::backend::multinomial_with_replacement)
}  // namespace at::native
