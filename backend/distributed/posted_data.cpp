#include "distributed/posted_data.h"

#include <ATen/ATen.h>

namespace neuronsim::backend::distributed {

void PostedData::post_recv(int peer, uint8_t* into, int64_t bytes) {
  if (bytes <= 0) return;
  std::vector<at::Tensor> v{at::from_blob(into, {bytes}, at::kByte)};
  works_.push_back(gloo_.recv(v, peer, tag_));
}

void PostedData::post_send(int peer, const uint8_t* from, int64_t bytes) {
  if (bytes <= 0) return;
  std::vector<at::Tensor> v{at::from_blob(const_cast<uint8_t*>(from), {bytes}, at::kByte)};
  works_.push_back(gloo_.send(v, peer, tag_));
}

void PostedData::wait_all() {
  for (auto& w : works_) w->wait();
}

}  // namespace neuronsim::backend::distributed
