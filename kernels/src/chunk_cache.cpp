#include "chunk_cache.h"

#include <climits>
#include <unordered_map>

namespace neuronsim::kernels {

ChunkCache::ChunkCache(uint32_t slots, const std::vector<int>& keys)
    : slots_(slots), keys_(keys), next_(keys.size(), INT_MAX) {
  std::unordered_map<int, int> later;
  for (int i = static_cast<int>(keys.size()) - 1; i >= 0; --i) {
    auto it = later.find(keys[i]);
    if (it != later.end()) next_[i] = it->second;
    later[keys[i]] = i;
  }
}

std::optional<uint32_t> ChunkCache::find(int key) const {
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].key == key) return s;
  }
  return std::nullopt;
}

int ChunkCache::next_use(const Slot& s) const {
  return s.last_use < 0 ? -1 : next_[s.last_use];
}

std::optional<uint32_t> ChunkCache::victim(int j, int emitted) const {
  std::optional<uint32_t> best;
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    const Slot& x = slots_[s];
    if (x.key < 0) return s;
    if (x.last_use < 0 || x.last_use >= emitted || next_use(x) <= j) continue;
    if (!best) {
      best = s;
      continue;
    }
    const Slot& b = slots_[*best];
    const int nx = next_use(x), nb = next_use(b);
    if (nx > nb || (nx == nb && x.last_use < b.last_use)) best = s;
  }
  return best;
}

void ChunkCache::fill(uint32_t s, int j) {
  Slot& x = slots_[s];
  x.key = keys_[j];
  x.last_use = -1;
  x.ready[0] = x.ready[1] = Token{};
}

void ChunkCache::used(uint32_t s, int j, Token release) {
  slots_[s].last_use = j;
  slots_[s].release = release;
}

}  // namespace neuronsim::kernels
