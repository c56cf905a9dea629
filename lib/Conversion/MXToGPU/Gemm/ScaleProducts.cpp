//===- ScaleProducts.cpp - tf32 operands of the scale products ------------===//
//
// The kernel of ScaleProducts.h: one thread per scale, one 4-byte load and
// one 16-byte store, so that a warp reads 128 and writes 512 contiguous
// bytes. NaN becomes the canonical quiet NaN before the split (a payload in
// the 13 bits that tf32 drops would read as infinity), and lo is 0 where s
// is not finite (s - hi would be NaN for an infinity).
//
//===----------------------------------------------------------------------===//

#include "ScaleProducts.h"
#include "PointerKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mx;
using namespace mx::gemm;

namespace {

constexpr int64_t kThreads = 256;
/// tf32 keeps 10 of f32's 23 mantissa bits: the mask of a value's high part.
constexpr int64_t kTf32Mask = ~int64_t(0x1FFF);
constexpr int64_t kCanonicalNaN = 0x7FC00000;
constexpr int64_t kMagnitude = 0x7FFFFFFF, kInfinity = 0x7F800000;

/// The tf32 high and low parts of the f32 scale `x`.
std::pair<Value, Value> splitTf32(ImplicitLocOpBuilder &b, Value x) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, i32, v).getResult();
  };
  Value bits = arith::BitcastOp::create(b, i32, x);
  Value isNaN = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, x, x);
  Value high = arith::BitcastOp::create(
      b, f32,
      arith::SelectOp::create(
          b, isNaN, constant(kCanonicalNaN),
          arith::AndIOp::create(b, bits, constant(kTf32Mask))));
  Value finite = arith::CmpIOp::create(
      b, arith::CmpIPredicate::ult,
      arith::AndIOp::create(b, bits, constant(kMagnitude)),
      constant(kInfinity));
  Value low = arith::SelectOp::create(
      b, finite, arith::SubFOp::create(b, x, high),
      arith::ConstantFloatOp::create(b, cast<FloatType>(f32),
                                     APFloat::getZero(APFloat::IEEEsingle())));
  return {high, low};
}

/// The kernel's shape: kBlocks K-blocks of scales laid out as `layout` to
/// [kBlocks, productPitch] rows.
struct ProductsShape {
  bool lhs;
  int64_t kBlocks;
  ScalesLayout layout;
  int64_t productPitch;

  int64_t rows() const { return kBlocks * productPitch; }
};

/// The kernel body on its two pointer arguments (scales, rows): thread i
/// writes row i, from the scale of (row i % P, K-block i / P), or 0 past the
/// scales' rows.
void buildBody(ImplicitLocOpBuilder &b, const ProductsShape &shape,
               ValueRange arguments) {
  auto globalPtr = LLVM::LLVMPointerType::get(
      b.getContext(), unsigned(NVVM::NVVMMemorySpace::Global));
  Value scales = LLVM::AddrSpaceCastOp::create(b, globalPtr, arguments[0]);
  Value rows = LLVM::AddrSpaceCastOp::create(b, globalPtr, arguments[1]);
  Type i64 = b.getI64Type();
  Value thread = arith::AddIOp::create(
      b,
      arith::MulIOp::create(
          b, NVVM::BlockIdXOp::create(b, b.getI32Type()),
          arith::ConstantIntOp::create(b, b.getI32Type(), kThreads)),
      NVVM::ThreadIdXOp::create(b, b.getI32Type()));
  auto c = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, b.getI32Type(), v).getResult();
  };
  auto inside =
      scf::IfOp::create(b,
                        arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                              thread, c(shape.rows())),
                        /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&inside.getThenRegion().front());
  Value kBlock = arith::DivUIOp::create(b, thread, c(shape.productPitch));
  Value row = arith::RemUIOp::create(b, thread, c(shape.productPitch));
  Value inScales = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row,
                                         c(shape.layout.rows));
  Value source = arith::AddIOp::create(
      b, arith::MulIOp::create(b, kBlock, c(shape.layout.blockStride)),
      arith::MulIOp::create(b, arith::SelectOp::create(b, inScales, row, c(0)),
                            c(shape.layout.rowStride)));
  Value loaded = LLVM::LoadOp::create(
      b, b.getF32Type(),
      LLVM::GEPOp::create(b, globalPtr, b.getF32Type(), scales,
                          ArrayRef<LLVM::GEPArg>{
                              Value(arith::ExtUIOp::create(b, i64, source))}),
      /*alignment=*/4);
  Value scale = arith::SelectOp::create(
      b, inScales, loaded,
      arith::ConstantFloatOp::create(b, cast<FloatType>(b.getF32Type()),
                                     APFloat::getZero(APFloat::IEEEsingle())));
  Value index = arith::ExtUIOp::create(b, i64, thread);
  auto [high, low] = splitTf32(b, scale);
  SmallVector<Value> parts = shape.lhs
                                 ? SmallVector<Value>{high, high, low, low}
                                 : SmallVector<Value>{high, low, high, low};
  auto rowType = VectorType::get({kScaleProductRowValues}, b.getF32Type());
  LLVM::StoreOp::create(b, vector::FromElementsOp::create(b, rowType, parts),
                        LLVM::GEPOp::create(b, globalPtr, rowType, rows,
                                            ArrayRef<LLVM::GEPArg>{index}),
                        /*alignment=*/16);
}

} // namespace

void gemm::launchScaleProductsKernel(ImplicitLocOpBuilder &b, ModuleOp module,
                                     bool lhs, int64_t kBlocks,
                                     ScalesLayout layout, int64_t productPitch,
                                     Value scales, Value rows) {
  ProductsShape shape{lhs, kBlocks, layout, productPitch};
  std::string name =
      (Twine("mx_scale_products_") + (lhs ? "lhs_" : "rhs_") + Twine(kBlocks) +
       "x" + Twine(layout.rows) + "_" + Twine(layout.rowStride) + "_" +
       Twine(layout.blockStride) + "_" + Twine(productPitch))
          .str();
  gpu::GPUFuncOp kernel =
      getPointerKernel(b, b.getLoc(), module, name, /*arguments=*/2, kThreads,
                       [&](ImplicitLocOpBuilder &kb, ValueRange arguments) {
                         buildBody(kb, shape, arguments);
                       });
  launchPointerKernel(b, kernel, shape.rows(), kThreads,
                      ValueRange{scales, rows});
}
