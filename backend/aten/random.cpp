// Native random ops with the device's Philox generator (torch.neuron.manual_seed makes them
// reproducible; the CPU fallback would ignore the device generator). Values come from the same
// Philox streams the ISA rng instruction draws, so ISA mode and the host agree.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <mutex>

#include "accelerator/context.h"
#include "accelerator/generator.h"
#include "aten/device_tensor.h"
#include "aten/native_boxed.h"
#include "aten/op_scope.h"
#include "aten/op_tracking.h"
#include "neuronsim/device/philox.h"
#include "neuronsim/kernels/random.h"

namespace neuronsim::backend {
namespace {

namespace philox = device::philox;

struct Stream {
  uint64_t seed, offset;
};

Stream reserve(const std::optional<at::Generator>& gen, const at::Tensor& t) {
  NeuronGenerator* g = get_generator(gen, t.device().index());
  std::lock_guard<std::mutex> lock(g->mutex_);
  return {g->current_seed(), g->reserve(philox::blocks_for(static_cast<uint64_t>(t.numel())))};
}

// Values for every logical element, in row-major order, as a contiguous CPU tensor.
at::Tensor host_values(const at::Tensor& t, const kernels::RandomSpec& s) {
  const int64_t n = t.numel();
  if (s.dist == device::RngDist::kInteger) {
    at::Tensor v = at::empty({n}, at::kLong);
    auto* p = v.data_ptr<int64_t>();
    const int64_t lo = static_cast<int64_t>(s.a), range = static_cast<int64_t>(s.b) - lo;
    for (int64_t i = 0; i < n; ++i) {
      p[i] = lo + static_cast<int64_t>(philox::bits(s.seed, s.offset, static_cast<uint64_t>(i)) %
                                       static_cast<uint64_t>(range));
    }
    return v.view(t.sizes());
  }
  at::Tensor v = at::empty({n}, at::kFloat);
  auto* p = v.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    p[i] = s.dist == device::RngDist::kNormal
               ? s.a + s.b * philox::normal(s.seed, s.offset, static_cast<uint64_t>(i))
               : s.a + (s.b - s.a) * philox::uniform(s.seed, s.offset, static_cast<uint64_t>(i));
  }
  return v.view(t.sizes());
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
    return kernels::build_random(op, describe(out, hbm), spec, r.device().params().core);
  });
  launch_programs(out.device(), {program}, isa_mode() && out.is_contiguous());
  OpTracker::get().record_native(op, is_64bit(out.scalar_type()));
}

at::Tensor& fill_random(at::Tensor& self, kernels::RandomSpec spec,
                        const std::optional<at::Generator>& gen, const char* op) {
  if (self.numel() == 0) return self;
  const Stream st = reserve(gen, self);
  spec.seed = st.seed;
  spec.offset = st.offset;
  cpu_view(self).copy_(host_values(self, spec));
  run(op, self, spec);
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  kernels::RandomSpec s;
  s.a = static_cast<float>(from);
  s.b = static_cast<float>(to);
  return fill_random(self, s, gen, "aten::uniform_");
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  kernels::RandomSpec s;
  s.dist = device::RngDist::kNormal;
  s.a = static_cast<float>(mean);
  s.b = static_cast<float>(std);
  return fill_random(self, s, gen, "aten::normal_");
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

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  const int64_t hi = to.value_or(default_to(self));
  TORCH_CHECK(from < hi, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", hi);
  kernels::RandomSpec s;
  s.dist = device::RngDist::kInteger;
  s.a = static_cast<float>(from);
  s.b = static_cast<float>(hi);
  if (self.numel() == 0) return self;
  const Stream st = reserve(gen, self);
  s.seed = st.seed;
  s.offset = st.offset;
  // Exact 64-bit range on the host (the ISA parameters are fp32).
  at::Tensor v = at::empty({self.numel()}, at::kLong);
  auto* p = v.data_ptr<int64_t>();
  const uint64_t range = static_cast<uint64_t>(hi - from);
  for (int64_t i = 0; i < self.numel(); ++i) {
    p[i] = from +
           static_cast<int64_t>(philox::bits(s.seed, s.offset, static_cast<uint64_t>(i)) % range);
  }
  cpu_view(self).copy_(v.view(self.sizes()));
  run("aten::random_", self, s);
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}

at::Tensor& random_default(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_from(self, 0, std::nullopt, gen);
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  kernels::RandomSpec s;
  s.p = static_cast<float>(p);
  const Stream st = reserve(gen, self);
  s.seed = st.seed;
  s.offset = st.offset;
  at::Tensor u = host_values(self, s);
  cpu_view(self).copy_(u.lt(static_cast<float>(p)));
  run("aten::bernoulli_", self, s);
  return self;
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen) {
  if (self.numel() == 0) return self;
  kernels::RandomSpec s;
  const Stream st = reserve(gen, self);
  s.seed = st.seed;
  s.offset = st.offset;
  const at::Tensor pc = p.device().is_privateuseone() ? cpu_view(p) : p;
  cpu_view(self).copy_(host_values(self, s).lt(pc.to(at::kFloat)));
  run("aten::bernoulli_", self, s, {p.device().is_privateuseone() ? p : p.to(self.device())});
  return self;
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return bernoulli_tensor(out, self, gen);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
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
  const Stream st = reserve(std::nullopt, input);
  s.seed = st.seed;
  s.offset = st.offset;
  const at::Tensor keep_mask = host_values(input, s).lt(static_cast<float>(keep));
  cpu_view(mask).copy_(keep_mask);
  const at::Tensor in_cpu = cpu_view(input);
  cpu_view(out).copy_(keep > 0 ? in_cpu * keep_mask.to(in_cpu.scalar_type()) * (1.0 / keep)
                               : at::zeros_like(in_cpu));
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
}

// Masks: bernoulli draws and dropout.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("bernoulli", bernoulli);
  m.impl("native_dropout", native_dropout);
}

}  // namespace neuronsim::backend
