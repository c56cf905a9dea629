//===- MXOpsTest.cpp - Unit tests of the mx shape arithmetic --------------===//
//
// The scale shapes of MXOps.h, which the verifiers, every lowering and the
// runtime's buffer sizes rely on: ragged blocks round up, and the swizzled
// layout pads rows to 128 and scale columns to 4.
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

} // namespace
