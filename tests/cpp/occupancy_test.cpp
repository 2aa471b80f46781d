// The SBUF/PSUM occupancy behind the trace's counter rows: the bytes written by a program, the
// union over partitions of the byte ranges its instructions wrote, against a byte map.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../../device_model/src/occupancy.h"

namespace neuronsim::device_model {
namespace {

TEST(Occupancy, UnionOfRandomWritesMatchesAByteMap) {
  std::mt19937 rng(7);
  constexpr uint32_t kPartitions = 16, kBytes = 256;
  OccupancyTracker occ(kPartitions);
  for (int round = 0; round < 20; ++round) {
    occ.reset();
    std::vector<std::vector<bool>> written(kPartitions, std::vector<bool>(kBytes, false));
    for (int w = 0; w < 60; ++w) {
      // Mostly wide partition ranges (as instructions write), sometimes narrow or empty.
      uint32_t p0 = rng() % kPartitions, p1 = p0 + 1 + rng() % (kPartitions - p0);
      if (rng() % 3 == 0) p0 = 0, p1 = kPartitions + 4;  // past the end: clipped
      const uint64_t lo = rng() % kBytes, hi = lo + rng() % (kBytes - lo + 1);
      uint64_t want = 0;
      for (uint32_t p = 0; p < kPartitions; ++p) {
        for (uint64_t b = 0; b < kBytes; ++b) {
          if (p >= p0 && p < p1 && b >= lo && b < hi) written[p][b] = true;
          want += written[p][b];
        }
      }
      ASSERT_EQ(occ.add(p0, p1, lo, hi), want) << "round " << round << " write " << w;
      ASSERT_EQ(occ.total(), want);
    }
  }
}

}  // namespace
}  // namespace neuronsim::device_model
