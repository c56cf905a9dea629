//===- ElementFormat.cpp - The element formats of mx data -----------------===//
//
// The mx element types are the OCP MX element types that MLIR has builtin
// types for, plus `i8` for MXINT8, listed once in getElementTypes. Every fact
// of a float format is read from its APFloat semantics, so that no number is
// written twice.
//
//===----------------------------------------------------------------------===//

#include "mx/Dialect/MX/IR/ElementFormat.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mx;

/// MXINT8's implicit scale: code c means c * 2^-6 (spec section 11).
constexpr unsigned kInt8FractionBits = 6;

/// Elements and bytes of the smallest whole-byte group of `bitWidth`-bit
/// elements.
static std::pair<int64_t, int64_t> getPacking(unsigned bitWidth) {
  int64_t bits = std::lcm<int64_t>(bitWidth, 8);
  return {bits / bitWidth, bits / 8};
}

static ElementFormat getIntegerFormat(Type type) {
  ElementFormat format{};
  format.type = type;
  format.bitWidth = 8;
  format.isInteger = true;
  format.mantissaBits = kInt8FractionBits;
  // -128 is never produced: the codes are symmetric (spec section 11).
  format.maxFiniteCode = 127;
  format.maxFinite = std::ldexp(127.0, -static_cast<int>(kInt8FractionBits));
  format.emax = std::ilogb(format.maxFinite);
  std::tie(format.packedElements, format.packedBytes) = getPacking(8);
  return format;
}

static ElementFormat getFloatFormat(FloatType type) {
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  ElementFormat format{};
  format.type = type;
  format.bitWidth = llvm::APFloat::semanticsSizeInBits(semantics);
  format.mantissaBits = llvm::APFloat::semanticsPrecision(semantics) - 1;
  format.exponentBits = format.bitWidth - 1 - format.mantissaBits;
  format.bias = 1 - llvm::APFloat::semanticsMinExponent(semantics);
  llvm::APFloat largest = llvm::APFloat::getLargest(semantics);
  format.maxFinite = largest.convertToDouble();
  format.maxFiniteCode = largest.bitcastToAPInt().getZExtValue();
  format.emax = llvm::ilogb(largest);
  // The contract's NaN is the positive code with every other bit set, where
  // the format has one there (E4M3FN's only NaN, one of E5M2's).
  uint32_t allOnes = (1u << (format.bitWidth - 1)) - 1;
  if (llvm::APFloat(semantics, llvm::APInt(format.bitWidth, allOnes)).isNaN())
    format.nanCode = allOnes;
  format.hasInfinity = llvm::APFloat::semanticsHasInf(semantics);
  std::tie(format.packedElements, format.packedBytes) =
      getPacking(format.bitWidth);
  return format;
}

SmallVector<Type> mx::getElementTypes(MLIRContext *context) {
  Builder b(context);
  return {b.getType<Float8E4M3FNType>(), b.getType<Float8E5M2Type>(),
          b.getType<Float6E3M2FNType>(), b.getType<Float6E2M3FNType>(),
          b.getType<Float4E2M1FNType>(), b.getI8Type()};
}

std::optional<ElementFormat> mx::getElementFormat(Type type) {
  if (!llvm::is_contained(getElementTypes(type.getContext()), type))
    return std::nullopt;
  if (auto floatType = dyn_cast<FloatType>(type))
    return getFloatFormat(floatType);
  return getIntegerFormat(type);
}

bool mx::isElementType(Type type) { return getElementFormat(type).has_value(); }

bool mx::isFP8ElementType(Type type) {
  std::optional<ElementFormat> format = getElementFormat(type);
  return format && format->takesFP8Recipes();
}

ElementFormat mx::getVerifiedElementFormat(Type type) {
  std::optional<ElementFormat> format = getElementFormat(type);
  if (!format)
    llvm::report_fatal_error("not an mx element type; the op verifiers admit "
                             "only the types of ElementFormat.h");
  return *format;
}

double mx::getMaxFinite(Type elementType) {
  return getVerifiedElementFormat(elementType).maxFinite;
}

int64_t mx::getEmax(Type elementType) {
  return getVerifiedElementFormat(elementType).emax;
}
