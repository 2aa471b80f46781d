"""Test helpers with the names and behaviour of TorchNeuron's own (tests/utils/
neuron_test_utils.py in its repository), so tests here read as TorchNeuron's tests are written:
ops are checked through ``torch_neuronx``'s op tracking after a ``synchronize()``, and negative
tests raise after ``synchronize()``, as errors surface on the device."""

import os
from contextlib import contextmanager
from functools import wraps

import pytest
import torch
import torch_neuronx


@contextmanager
def track_neuron_ops():
    """Clears op tracking; what runs inside (and after) is recorded."""
    torch_neuronx.clear_op_tracking()
    yield


def _variants(op_name: str) -> list[str]:
    # NKI kernels are recorded under names derived from the op's.
    return [f"nki_{op_name}", op_name.replace("aten::", "nki_"), op_name.replace("aten::", "")]


def check_op_runs_on_neuron(op_name: str) -> tuple[bool, list, list]:
    torch.neuron.synchronize()
    executed = torch_neuronx.get_executed_ops()
    fallback = torch_neuronx.get_fallback_ops()
    if op_name in fallback:
        return False, executed, fallback
    if op_name in executed:
        return True, executed, fallback
    ran = any(v in op for v in _variants(op_name) for op in executed)
    return ran, executed, fallback


def assert_op_runs_on_neuron(op_name: str):
    ran, executed, fallback = check_op_runs_on_neuron(op_name)
    if not ran:
        raise AssertionError(
            f"Operation {op_name} did not run on Neuron.\n"
            f"Executed: {executed}\nFallback: {fallback}"
        )


def assert_op_did_not_run_on_neuron(op_name: str):
    if check_op_runs_on_neuron(op_name)[0]:
        raise AssertionError(f"Operation {op_name} ran on Neuron when it was not expected to run")


def assert_op_falls_back_on_cpu(op_name: str):
    ran, _, fallback = check_op_runs_on_neuron(op_name)
    if ran:
        raise AssertionError(f"Operation {op_name} ran on Neuron instead of falling back to CPU")
    if op_name not in fallback:
        raise AssertionError(f"Operation {op_name} was not tracked in execution")


def assert_op_does_not_run(op_name: str):
    executed = torch_neuronx.get_executed_ops()
    fallback = torch_neuronx.get_fallback_ops()
    if op_name in executed:
        raise AssertionError(
            f"Operation {op_name} ran on Neuron when it should not have run at all"
        )
    if op_name in fallback:
        raise AssertionError(f"Operation {op_name} fell back to CPU when it should not have run")
    if any(v in op for v in _variants(op_name) for op in executed):
        raise AssertionError(f"A kernel variant of {op_name} ran on Neuron")


def assert_raises(expected_exception, *args, **kwargs):
    """Decorator for negative tests: the test body, then ``torch.neuron.synchronize()``, must
    raise. ``match_cpu`` replaces ``match`` unless TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS
    is "1" (then errors come from the CPU kernel an op fell back to)."""

    def decorator(test_func):
        @wraps(test_func)
        def wrapper(*func_args, **func_kwargs):
            options = dict(kwargs)
            match_cpu = options.pop("match_cpu", None)
            unimplemented_only = (
                os.environ.get("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS") == "1"
            )
            if match_cpu is not None and not unimplemented_only:
                options["match"] = match_cpu
            with pytest.raises(expected_exception, *args, **options):
                test_func(*func_args, **func_kwargs)
                torch.neuron.synchronize()

        return wrapper

    return decorator
