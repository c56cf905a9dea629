//===- ElementFormatTest.cpp - Unit tests of the element-format model -----===//
//
// Every fact that getElementFormat derives from APFloat semantics (or from
// i8 for MXINT8), checked field by field against the numbers of the OCP MX
// spec and spec sections 1, 10 and 11, written down here independently; and
// the types outside the model, which must be rejected rather than computed
// as some other format.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/ElementFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mx;

namespace {

/// Checks every field of the format of `expected.type` against `expected`,
/// the spec's numbers.
void expectFormat(const ElementFormat &expected) {
  std::optional<ElementFormat> format = getElementFormat(expected.type);
  ASSERT_TRUE(format.has_value());
  EXPECT_EQ(format->isInteger, expected.isInteger);
  EXPECT_EQ(format->bitWidth, expected.bitWidth);
  EXPECT_EQ(format->exponentBits, expected.exponentBits);
  EXPECT_EQ(format->mantissaBits, expected.mantissaBits);
  EXPECT_EQ(format->bias, expected.bias);
  EXPECT_EQ(format->maxFinite, expected.maxFinite);
  EXPECT_EQ(format->maxFiniteCode, expected.maxFiniteCode);
  EXPECT_EQ(format->emax, expected.emax);
  EXPECT_EQ(format->nanCode, expected.nanCode);
  EXPECT_EQ(format->hasInfinity, expected.hasInfinity);
  EXPECT_EQ(format->packedElements, expected.packedElements);
  EXPECT_EQ(format->packedBytes, expected.packedBytes);
}

TEST(ElementFormat, FloatFormats) {
  mlir::MLIRContext context;
  mlir::Builder b(&context);
  // type, bits, integer, exponent and mantissa bits, bias, max finite, its
  // code, emax, NaN code, Inf, packing.
  expectFormat({b.getType<mlir::Float8E4M3FNType>(), 8, false, 4, 3, 7, 448.0,
                0x7E, 8, 0x7F, false, 1, 1});
  expectFormat({b.getType<mlir::Float8E5M2Type>(), 8, false, 5, 2, 15, 57344.0,
                0x7B, 15, 0x7F, true, 1, 1});
  expectFormat({b.getType<mlir::Float6E3M2FNType>(), 6, false, 3, 2, 3, 28.0,
                0x1F, 4, std::nullopt, false, 4, 3});
  expectFormat({b.getType<mlir::Float6E2M3FNType>(), 6, false, 2, 3, 1, 7.5,
                0x1F, 2, std::nullopt, false, 4, 3});
  expectFormat({b.getType<mlir::Float4E2M1FNType>(), 4, false, 2, 1, 1, 6.0,
                0x7, 2, std::nullopt, false, 2, 1});
}

TEST(ElementFormat, MXINT8) {
  mlir::MLIRContext context;
  mlir::Builder b(&context);
  std::optional<ElementFormat> format = getElementFormat(b.getI8Type());
  ASSERT_TRUE(format.has_value());
  EXPECT_TRUE(format->isInteger);
  EXPECT_EQ(format->bitWidth, 8u);
  EXPECT_EQ(format->mantissaBits, 6u); // code c means c * 2^-6
  EXPECT_EQ(format->maxFinite, 127.0 / 64.0);
  EXPECT_EQ(format->maxFiniteCode, 127u);
  EXPECT_EQ(format->emax, 0);
  EXPECT_FALSE(format->nanCode.has_value());
  EXPECT_EQ(format->getNaNBlockCode(), 0u);
  EXPECT_FALSE(format->isPacked());
  EXPECT_FALSE(format->takesFP8Recipes());
}

TEST(ElementFormat, RecipesAndStorage) {
  mlir::MLIRContext context;
  mlir::Builder b(&context);
  ElementFormat e4m3 =
      getVerifiedElementFormat(b.getType<mlir::Float8E4M3FNType>());
  ElementFormat e3m2 =
      getVerifiedElementFormat(b.getType<mlir::Float6E3M2FNType>());
  ElementFormat e2m1 =
      getVerifiedElementFormat(b.getType<mlir::Float4E2M1FNType>());
  EXPECT_TRUE(e4m3.takesFP8Recipes() && !e4m3.takesNVFP4Scales());
  EXPECT_TRUE(!e3m2.takesFP8Recipes() && !e3m2.takesNVFP4Scales());
  EXPECT_TRUE(!e2m1.takesFP8Recipes() && e2m1.takesNVFP4Scales());
  EXPECT_EQ(e4m3.getNaNBlockCode(), 0x7Fu);
  EXPECT_EQ(e3m2.getNaNBlockCode(), 0u);
  EXPECT_EQ(e4m3.getStoredBytes(64), 64);
  EXPECT_EQ(e3m2.getStoredBytes(64), 48);
  EXPECT_EQ(e2m1.getStoredBytes(64), 32);
  EXPECT_TRUE(isFP8ElementType(e4m3.type));
  EXPECT_FALSE(isFP8ElementType(b.getI8Type()));
}

TEST(ElementFormat, OtherTypesAreNotFormats) {
  mlir::MLIRContext context;
  mlir::Builder b(&context);
  mlir::Type others[] = {b.getType<mlir::Float8E4M3Type>(),
                         b.getType<mlir::Float8E4M3FNUZType>(),
                         b.getType<mlir::Float8E5M2FNUZType>(),
                         b.getType<mlir::Float8E8M0FNUType>(),
                         b.getBF16Type(),
                         b.getF32Type(),
                         b.getIntegerType(4),
                         b.getIntegerType(8, /*isSigned=*/true),
                         b.getIntegerType(16),
                         b.getIndexType()};
  for (mlir::Type type : others) {
    EXPECT_FALSE(getElementFormat(type).has_value());
    EXPECT_FALSE(isElementType(type));
  }
}

} // namespace
