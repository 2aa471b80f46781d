"""``neuronxcc.nki.compiler``: allocation and scheduling hints, accepted.

neuronsim allocates tiles itself (next fit, which multi-buffers loop tiles): ``sbuf.mod_alloc``
and ``psum.mod_alloc`` give the buffer kind and are otherwise not honoured; the scheduling hints
keep program order, which is what neuronsim does anyway.
"""

import contextlib


class _Allocator:
    def __init__(self, space):
        self.space = space

    def mod_alloc(self, base_addr=None, base_partition=0, num_par_tiles=(), num_free_tiles=()):
        return _Allocation(self.space)

    def alloc(self, func=None):
        return _Allocation(self.space)

    def auto_alloc(self):
        return _Allocation(self.space)


class _Allocation:
    def __init__(self, space):
        self.space = space


sbuf = _Allocator("sbuf")
psum = _Allocator("psum")


def skip_middle_end_transformations(func=None):
    return func if func is not None else (lambda f: f)


def enable_stack_allocator(func=None, **kwargs):
    return func if func is not None else (lambda f: f)


def force_auto_alloc(func=None, **kwargs):
    return func if func is not None else (lambda f: f)


@contextlib.contextmanager
def no_reorder():
    yield


__all__ = [
    "sbuf",
    "psum",
    "skip_middle_end_transformations",
    "enable_stack_allocator",
    "force_auto_alloc",
    "no_reorder",
]
