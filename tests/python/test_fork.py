"""fork() after the device is in use: CPU-only children (DataLoader workers) work; a child that
touches the device gets a clear RuntimeError instead of a crash or a hang."""

import multiprocessing as mp

import pytest
import torch

TIMEOUT = 120


@pytest.fixture(autouse=True)
def device_in_use():
    x = torch.arange(8.0, device="neuron") * 2
    assert torch.neuron.is_initialized()
    yield x


class _DeviceDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.full((2,), float(i), device="neuron")


def test_dataloader_with_forked_cpu_workers():
    data = torch.arange(40.0).reshape(20, 2)
    ds = torch.utils.data.TensorDataset(data, torch.arange(20))
    loader = torch.utils.data.DataLoader(
        ds, batch_size=3, num_workers=2, multiprocessing_context="fork", timeout=TIMEOUT
    )
    seen_x, seen_y = [], []
    for x, y in loader:
        # The main process moves batches to the device as usual.
        xd = x.to("neuron")
        seen_x.append((xd * 1).cpu())
        seen_y.append(y)
    assert torch.equal(torch.cat(seen_x), data)
    assert torch.equal(torch.cat(seen_y), torch.arange(20))
    # And runs two epochs (workers are forked again).
    assert sum(len(b[0]) for b in loader) == 20
    assert (torch.ones(3, device="neuron") + 1).cpu().tolist() == [2.0, 2.0, 2.0]


def test_dataloader_worker_touching_the_device_raises_clear_error():
    loader = torch.utils.data.DataLoader(
        _DeviceDataset(),
        batch_size=2,
        num_workers=1,
        multiprocessing_context="fork",
        timeout=TIMEOUT,
    )
    with pytest.raises(RuntimeError) as info:
        list(loader)
    msg = str(info.value)
    assert "fork" in msg and "spawn" in msg
    # The parent's device is unaffected.
    assert torch.ones(2, device="neuron").sum().item() == 2.0


def _child_creates_tensor(q):
    try:
        torch.ones(2, device="neuron")
        q.put("no error")
    except RuntimeError as e:
        q.put(f"RuntimeError: {e}")
    except BaseException as e:  # noqa: BLE001 - report anything else to the parent
        q.put(f"{type(e).__name__}: {e}")


def _child_reads_parent_tensor(q, x):
    try:
        q.put(f"no error {x.cpu().tolist()}")
    except RuntimeError as e:
        q.put(f"RuntimeError: {e}")
    except BaseException as e:  # noqa: BLE001
        q.put(f"{type(e).__name__}: {e}")


def _child_computes(q, x):
    try:
        y = x + 1
        q.put(f"no error {y.device}")
    except RuntimeError as e:
        q.put(f"RuntimeError: {e}")
    except BaseException as e:  # noqa: BLE001
        q.put(f"{type(e).__name__}: {e}")


def _run_forked(target, *args):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(q, *args))
    p.start()
    try:
        msg = q.get(timeout=TIMEOUT)
    finally:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
    return msg, p.exitcode


@pytest.mark.parametrize("target", ["create", "read", "compute"])
def test_forked_child_touching_the_device_gets_clear_error(target, device_in_use):
    fn = {
        "create": _child_creates_tensor,
        "read": _child_reads_parent_tensor,
        "compute": _child_computes,
    }[target]
    args = () if target == "create" else (device_in_use,)
    msg, exitcode = _run_forked(fn, *args)
    assert exitcode == 0  # no crash
    assert msg.startswith("RuntimeError: "), msg
    assert "fork" in msg and "spawn" in msg
    # The parent keeps working.
    assert (device_in_use + 1).cpu()[0].item() == 1.0
