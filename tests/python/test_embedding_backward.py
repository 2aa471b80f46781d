"""Eager embedding backward on the device: a position embedding's indices are consecutive, so
its gradient rows form one long run; the accumulating copy reads each run into two fp32 SBUF
buffers, which must fit a partition (a 128 x 256 run did not: 'needs 131072 more SBUF bytes')."""

import torch
import torch.nn.functional as F


def test_position_embedding_backward_with_runs_longer_than_half_sbuf():
    torch.manual_seed(0)
    weight = torch.randn(128, 256)
    pos = torch.arange(128).expand(4, 128)
    grad = torch.randn(4, 128, 256)

    def grad_of(device):
        w = weight.to(device).requires_grad_()
        F.embedding(pos.to(device), w).backward(grad.to(device))
        return w.grad.cpu()

    torch.testing.assert_close(grad_of("neuron"), grad_of("cpu"), rtol=1e-5, atol=1e-5)
