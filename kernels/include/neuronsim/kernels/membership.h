#pragma once
// Membership tests (isin): each element compared with every test element. The elements are
// tiled onto partitions (128 rows, the free axis chunked); the test elements are loaded once,
// broadcast to every partition, and VectorE runs one compare-and-accumulate pair per test
// element (is_equal with a per-partition scalar, logical or). The real device's NKI isin does
// the same broadcast compare; its cost is linear in the number of test elements.
#include <optional>
#include <string>

#include "neuronsim/device_model/params.h"
#include "neuronsim/device_model/program.h"
#include "neuronsim/kernels/tensor_desc.h"

namespace neuronsim::kernels {

/// out = isin(elements, tests) (`invert`: not in). `elements` null: the scalar `element` is
/// tested and out has one element. `integer` compares as int32 (both sides integer data).
device_model::Program build_isin(const std::string& name, const std::optional<TensorDesc>& elements,
                                 float element, const TensorDesc& tests, const TensorDesc& out,
                                 bool invert, bool integer, const device_model::CoreParams& core);

/// The number of distinct values of a contiguous `in` (unique's output size), written as int32 to
/// `count`: elements on partitions (128 per tile), the whole tensor broadcast along the free axis;
/// an element is the first of its value when no lower index holds an equal value (is_equal
/// against the row, masked by an iota of j < i, or-reduced). The first-occurrence flags are
/// summed per partition, then across partitions (TensorE transpose, row sum).
device_model::Program build_unique_count(const std::string& name, const TensorDesc& in,
                                         const TensorDesc& count,
                                         const device_model::CoreParams& core);

/// The most test elements (isin) or input elements (unique) the kernels keep in SBUF.
int64_t max_isin_tests(const device_model::CoreParams& core);

}  // namespace neuronsim::kernels
