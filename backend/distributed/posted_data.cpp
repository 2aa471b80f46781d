#include "distributed/posted_data.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace neuronsim::backend::distributed {

void PostedData::post_recv(int peer, uint8_t* into, int64_t bytes, int tag) {
  if (bytes <= 0) return;
  std::vector<at::Tensor> v{at::from_blob(into, {bytes}, at::kByte)};
  works_.push_back(gloo_.recv(v, peer, tag));
}

void PostedData::post_send(int peer, const uint8_t* from, int64_t bytes, int tag) {
  if (bytes <= 0) return;
  std::vector<at::Tensor> v{at::from_blob(const_cast<uint8_t*>(from), {bytes}, at::kByte)};
  works_.push_back(gloo_.send(v, peer, tag));
}

void PostedData::wait_all() {
  for (auto& w : works_) w->wait();
}

int AgreedSizes::find(int64_t bytes) const {
  for (int i = 0; i < kRemembered; ++i) {
    if (sizes_[i] == bytes) return i;
  }
  return -1;
}

void AgreedSizes::remember(int64_t bytes) {
  const int at = find(bytes);
  // Shift the entries before it (or all but the oldest) one place back.
  std::move_backward(sizes_.begin(), sizes_.begin() + (at < 0 ? kRemembered - 1 : at),
                     sizes_.begin() + (at < 0 ? kRemembered : at + 1));
  sizes_[0] = bytes;
}

}  // namespace neuronsim::backend::distributed
