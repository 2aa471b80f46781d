#pragma once
// The arithmetic of collectives that runs on the host: data that travelled with the header
// exchange is reduced or assembled from the gathered slots, and the reduce ops Gloo lacks (AVG,
// PREMUL_SUM) finish after Gloo's SUM. Everything works on CPU views of neuron tensors
// (simulated HBM is host memory); the time is the collective model's, not this code's.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "distributed/wire.h"

namespace neuronsim::backend::distributed {

/// Bytes a rank sends: a pointer into a tensor's CPU view (held by `keep` when the bytes were
/// assembled for the occasion), or none (`size` < 0).
struct Bytes {
  const uint8_t* data = nullptr;
  int64_t size = -1;
  at::Tensor keep;
  bool defined() const { return size >= 0; }
};
/// A contiguous CPU tensor's bytes (no copy; the caller keeps the tensor alive).
Bytes bytes_at(const at::Tensor& cpu);
/// Owned bytes (a copy when assembled from several tensors).
Bytes bytes_owned(at::Tensor cpu);

/// The exchanged slots of every rank ([ranks * slot_bytes] bytes) and their layout.
struct Gathered {
  at::Tensor all;
  SlotLayout layout;
  /// Where rank r's data starts in its slot.
  const uint8_t* data(int64_t rank) const;
  /// Every rank's data from `byte_offset` on as [ranks, numel] elements of `dtype` (a view).
  at::Tensor stacked(at::ScalarType dtype, int64_t numel, int64_t byte_offset = 0) const;
  /// Rank r's data from `byte_offset` on as `numel` elements of `dtype` (a view).
  at::Tensor of(int64_t rank, at::ScalarType dtype, int64_t numel, int64_t byte_offset = 0) const;
};

/// Reduces `stacked` ([ranks, ...]) over its first dim into `out` with a reduce op.
void reduce_ranks(const at::Tensor& stacked, const c10d::ReduceOp& op, at::Tensor out);

/// `out` = `first` op `second` (two ranks' data in rank order, every element type's reduce op
/// as reduce_ranks applies it to two rows); `out` may be either input.
void reduce_two(const at::Tensor& first, const at::Tensor& second, const c10d::ReduceOp& op,
                at::Tensor out);

/// Whether two byte ranges share a byte.
bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes);

/// The Gloo op that carries a reduce op: SUM for AVG and PREMUL_SUM (finished by
/// finish_reduction), the op itself otherwise.
c10d::ReduceOp gloo_reduce_op(const c10d::ReduceOp& op);
/// After Gloo's SUM: AVG divides by `ranks`, PREMUL_SUM multiplies by its factor.
void finish_reduction(at::Tensor t, const c10d::ReduceOp& op, int64_t ranks);

/// Throws for reduce ops the backend does not support, or does not support for `dtype`.
void check_reduce_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* collective);

/// `t`'s bytes, flattened (uint8; a copy only if `t` is not contiguous).
at::Tensor bytes_of(const at::Tensor& cpu);
/// The bytes of several tensors, one after another.
at::Tensor concat_bytes(const std::vector<at::Tensor>& cpu);
int64_t nbytes(const at::Tensor& t);
int64_t total_bytes(const std::vector<at::Tensor>& ts);

}  // namespace neuronsim::backend::distributed
