#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011, as in cuRAND): the value of
// element i of a random op is a pure function of (seed, offset + i / 4), so the host kernels and
// the ISA `rng` instruction produce identical streams, and a generator's whole state is 16 bytes
// (seed, offset) as DTensor's RNG tracker expects.
#include <array>
#include <cmath>
#include <cstdint>

namespace neuronsim::device_model::philox {

inline std::array<uint32_t, 4> block(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

/// Raw 32 random bits for element `i` of a stream starting at block `offset`.
inline uint32_t bits(uint64_t seed, uint64_t offset, uint64_t i) {
  return block(seed, offset + i / 4)[i % 4];
}

/// Uniform in [0, 1) with 24 random bits.
inline float uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  return static_cast<float>(bits(seed, offset, i) >> 8) * (1.0f / 16777216.0f);
}

/// Standard normal by Box-Muller over the pair of words (2k, 2k+1) of element i's block.
inline float normal(uint64_t seed, uint64_t offset, uint64_t i) {
  const auto b = block(seed, offset + i / 4);
  const uint32_t k = static_cast<uint32_t>((i % 4) / 2) * 2;
  const float u1 = (static_cast<float>(b[k] >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = static_cast<float>(b[k + 1] >> 8) * (1.0f / 16777216.0f);
  const float r = std::sqrt(-2.0f * std::log(u1));
  const float t = 6.2831853071795865f * u2;
  return (i % 2 == 0) ? r * std::cos(t) : r * std::sin(t);
}

/// Blocks a stream of n elements consumes (the generator offset advances by this).
inline uint64_t blocks_for(uint64_t n) {
  return (n + 3) / 4;
}

}  // namespace neuronsim::device_model::philox
