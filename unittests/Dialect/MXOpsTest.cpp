//===- MXOpsTest.cpp - Unit tests of the mx shape arithmetic --------------===//
//
// The scale shapes and the 128x4 tile index map of MXOps.h, which the
// verifiers, every lowering and the runtime's buffer sizes rely on: ragged
// blocks round up, the swizzled layout pads rows to 128 and scale columns to
// 4, and the map meets the spec's worked checks and inverts.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/MXOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mx;

namespace {

using Shape = llvm::SmallVector<int64_t>;

TEST(ScalesShape, OneScalePerBlock) {
  EXPECT_EQ(getScalesShape({128, 96}, {1, 32}), Shape({128, 3}));
  EXPECT_EQ(getScalesShape({256, 512}, {128, 128}), Shape({2, 4}));
  EXPECT_EQ(getScalesShape({4, 64, 96}, {1, 1, 32}), Shape({4, 64, 3}));
}

TEST(ScalesShape, RaggedBlocksRoundUp) {
  EXPECT_EQ(getScalesShape({70, 200}, {1, 32}), Shape({70, 7}));
  EXPECT_EQ(getScalesShape({300, 260}, {128, 128}), Shape({3, 3}));
  EXPECT_EQ(getScalesShape({1, 1}, {32, 32}), Shape({1, 1}));
}

TEST(ScalesShape, WholeTensorBlock) {
  EXPECT_EQ(getScalesShape({70, 200}, {70, 200}), Shape({1, 1}));
}

TEST(SwizzledShape, PadsToWholeTiles) {
  // [rows/128, cols/4, 32, 4, 4]: one 512-byte tile per 128 rows x 4 columns.
  EXPECT_EQ(getSwizzledShape(128, 4), Shape({1, 1, 32, 4, 4}));
  EXPECT_EQ(getSwizzledShape(128, 3), Shape({1, 1, 32, 4, 4}));
  EXPECT_EQ(getSwizzledShape(129, 5), Shape({2, 2, 32, 4, 4}));
  EXPECT_EQ(getSwizzledShape(1, 1), Shape({1, 1, 32, 4, 4}));
  EXPECT_EQ(getSwizzledShape(512, 16), Shape({4, 4, 32, 4, 4}));
}

/// SwizzleTiles' arithmetic on integers.
struct IntegerArith {
  int64_t div(int64_t x, int64_t d) const { return x / d; }
  int64_t rem(int64_t x, int64_t d) const { return x % d; }
  int64_t fma(int64_t x, int64_t m, int64_t y) const { return x * m + y; }
};

/// The byte offset of a tiled index in swizzled scales of `tileCols` tile
/// columns: tiles row-major, 512 bytes each.
int64_t getTiledOffset(const std::array<int64_t, 5> &index, int64_t tileCols) {
  return (index[0] * tileCols + index[1]) * 512 + index[2] * 16 + index[3] * 4 +
         index[4];
}

TEST(SwizzleTiles, WorkedChecksOfTheSpec) {
  // Scales [4, 2] = a..h: a, b at offsets 0, 1; c, d at 16, 17; e, f at 32,
  // 33; g, h at 48, 49.
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 2; ++c)
      EXPECT_EQ(
          getTiledOffset(SwizzleTiles::getTiledIndex(r, c, IntegerArith{}), 1),
          r * 16 + c);
  // [256, 8] scales: tile order A (rows 0-127, cols 0-3), B (cols 4-7), C, D.
  EXPECT_EQ(getTiledOffset(
                SwizzleTiles::getTiledIndex<int64_t>(0, 4, IntegerArith{}), 2),
            512);
  EXPECT_EQ(
      getTiledOffset(
          SwizzleTiles::getTiledIndex<int64_t>(128, 0, IntegerArith{}), 2),
      1024);
  // Row r of a tile sits at (r % 32) * 16 + (r / 32) * 4.
  EXPECT_EQ(getTiledOffset(
                SwizzleTiles::getTiledIndex<int64_t>(97, 3, IntegerArith{}), 1),
            1 * 16 + 3 * 4 + 3);
}

TEST(SwizzleTiles, CompactIndexInvertsTiledIndex) {
  // Every position of M = 500, K = 192 MX scales padded to [512, 8].
  for (int64_t r = 0; r < 512; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      std::array<int64_t, 5> tiled =
          SwizzleTiles::getTiledIndex(r, c, IntegerArith{});
      Shape shape = getSwizzledShape(500, 6);
      for (auto [index, extent] : llvm::zip_equal(tiled, shape))
        EXPECT_LT(index, extent);
      EXPECT_EQ(SwizzleTiles::getCompactIndex(llvm::ArrayRef<int64_t>(tiled),
                                              IntegerArith{}),
                std::make_pair(r, c));
    }
}

} // namespace
