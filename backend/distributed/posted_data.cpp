#include "distributed/posted_data.h"

#include <ATen/ATen.h>

namespace neuronsim::backend::distributed {

PostedData::PostedData(c10d::Backend& gloo, int ranks, int64_t chunk, int tag)
    : gloo_(gloo), chunk_(chunk), tag_(tag), recvs_(ranks), sends_(ranks) {}

void PostedData::post_recvs(int peer, uint8_t* into, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    std::vector<at::Tensor> v{at::from_blob(into + i * chunk_, {chunk_}, at::kByte)};
    recvs_[peer].push_back(gloo_.recv(v, peer, tag_));
  }
}

void PostedData::post_sends(int peer, const uint8_t* from, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    std::vector<at::Tensor> v{
        at::from_blob(const_cast<uint8_t*>(from) + i * chunk_, {chunk_}, at::kByte)};
    sends_[peer].push_back(gloo_.send(v, peer, tag_));
  }
}

void PostedData::wait_all() {
  for (auto* works : {&recvs_, &sends_}) {
    for (auto& by_peer : *works) {
      for (auto& w : by_peer) w->wait();
    }
  }
}

void PostedData::settle(const std::vector<int64_t>& matched_recvs,
                        const std::vector<int64_t>& matched_sends) noexcept {
  auto settle_one = [](std::vector<c10::intrusive_ptr<c10d::Work>>& works, int64_t matched) {
    for (int64_t i = 0; i < std::min<int64_t>(matched, static_cast<int64_t>(works.size())); ++i) {
      try {
        works[i]->wait();
      } catch (...) {
        return;  // the connection failed: Gloo touches none of these buffers any more
      }
    }
  };
  for (size_t p = 0; p < recvs_.size(); ++p) {
    settle_one(recvs_[p], matched_recvs[p]);
    settle_one(sends_[p], matched_sends[p]);
  }
  recvs_.assign(recvs_.size(), {});
  sends_.assign(sends_.size(), {});
}

}  // namespace neuronsim::backend::distributed
