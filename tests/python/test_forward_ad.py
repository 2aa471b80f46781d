"""Forward-mode AD and torch.func on the neuron device: values match the CPU, natively.

Forward AD represents an absent tangent (a bias's, say) by an efficient zero tensor
(`aten::_efficientzerotensor`): a tensor with no storage that the ZeroTensor key materialises as
zeros on its device when an op reads it. Without the device's own factory it went through the
CPU fallback, and with it every op that met one (linear, mm, add).
"""

import neuronsim
import pytest
import torch
import torch.nn as nn
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vmap


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))


TRANSFORMS = {
    "jvp": lambda f, x: jvp(f, (x,), (torch.ones_like(x),))[1],
    "jacfwd": lambda f, x: jacfwd(f)(x[0]),
    "jacrev": lambda f, x: jacrev(f)(x[0]),
    "hessian": lambda f, x: hessian(lambda v: f(v).sum())(x[0]),
    "per_sample_grad": lambda f, x: vmap(grad(lambda v: f(v[None]).square().sum()))(x),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_torch_func_transforms_match_cpu_without_fallback(name):
    m = _mlp()
    x = torch.randn(6, 5)
    want = TRANSFORMS[name](lambda v: m(v), x)
    md = m.to("neuron")
    params = {k: v.detach() for k, v in md.named_parameters()}
    neuronsim.clear_op_tracking()
    got = TRANSFORMS[name](lambda v: functional_call(md, params, (v,)), x.to("neuron"))
    assert not neuronsim.get_fallback_ops()
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_efficient_zero_tensor_lives_on_the_device():
    z = torch._efficientzerotensor((2, 3), device="neuron")
    assert z.device == torch.device("neuron", torch.neuron.current_device())
    assert z._is_zerotensor()
    x = torch.randn(2, 3)
    neuronsim.clear_op_tracking()
    assert torch.equal((z + x.to("neuron")).cpu(), x)
    assert torch.equal(z.cpu(), torch.zeros(2, 3))
    assert torch.equal(z.t().clone().cpu(), torch.zeros(3, 2))
    assert not neuronsim.get_fallback_ops()
    with pytest.raises(RuntimeError, match="ZeroTensors are immutable"):
        z.add_(1)
