//===- ExportSignatures.cpp - Self-describing compiled modules ------------===//
//
// Runs in both pipelines right after bufferization (and
// mx-drop-in-place-results), while function types are still the shapes and
// element types the user wrote, as memrefs: after the LLVM lowering they are
// descriptors and pointers that no longer say the element type (an FP8
// tensor and an i8 one look the same) or which results a function has. The
// JSON is built with llvm::json::OStream, which escapes names and keeps the
// keys in the order they are written, so the format stays byte-stable for
// the Python reader.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/ExportSignatures.h"
#include "mx/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/JSON.h"

namespace mx {
#define GEN_PASS_DEF_EXPORTSIGNATURES
#include "mx/Conversion/Passes.h.inc"
} // namespace mx

using namespace mlir;

namespace {

std::string printType(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

/// One argument or result: {"kind":...,"shape":[...],"dtype":...}.
void writeValueType(llvm::json::OStream &json, Type type) {
  StringRef kind = "other";
  ArrayRef<int64_t> shape;
  Type dtype = type;
  // Ranked tensors and memrefs alike: bufferized callers see the same data.
  if (auto shaped = dyn_cast<ShapedType>(type);
      shaped && isa<TensorType, BaseMemRefType>(type) && shaped.hasRank()) {
    kind = "tensor";
    shape = shaped.getShape();
    dtype = shaped.getElementType();
  } else if (isa<IntegerType, IndexType, FloatType>(type)) {
    kind = "scalar";
  }
  json.object([&] {
    json.attribute("kind", kind);
    json.attributeArray("shape", [&] {
      for (int64_t size : shape)
        json.value(ShapedType::isDynamic(size) ? int64_t(-1) : size);
    });
    json.attribute("dtype", printType(dtype));
  });
}

void writeFunction(llvm::json::OStream &json, func::FuncOp func) {
  FunctionType type = func.getFunctionType();
  json.object([&] {
    json.attribute("name", func.getSymName());
    json.attributeArray("args", [&] {
      for (Type arg : type.getInputs())
        writeValueType(json, arg);
    });
    json.attributeArray("results", [&] {
      for (Type result : type.getResults())
        writeValueType(json, result);
    });
    SmallVector<int64_t> updated;
    for (unsigned index = 0; index < func.getNumArguments(); ++index)
      if (func.getArgAttr(index, mx::kUpdatedAttrName))
        updated.push_back(index);
    if (!updated.empty())
      json.attributeArray("updated", [&] {
        for (int64_t index : updated)
          json.value(index);
      });
  });
}

} // namespace

std::optional<std::string> mx::getSignaturesJson(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isDeclaration())
      functions.push_back(func);
  if (functions.empty())
    return std::nullopt;

  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os); // No indentation: compact, no spaces.
  json.object([&] {
    json.attribute("version", 1);
    json.attributeArray("functions", [&] {
      for (func::FuncOp func : functions)
        writeFunction(json, func);
    });
  });
  return text;
}

LogicalResult mx::exportSignatures(ModuleOp module) {
  if (Operation *existing =
          SymbolTable::lookupSymbolIn(module, kSignaturesSymbol))
    return existing->emitError()
           << "symbol '" << kSignaturesSymbol
           << "' is reserved for the function signatures that "
              "mx-export-signatures records; rename it";
  std::optional<std::string> json = getSignaturesJson(module);
  // The marks are read: the LLVM functions that follow have no tensor or
  // memref arguments for them (the C interface's descriptor pointers).
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned index = 0; index < func.getNumArguments(); ++index)
      func.removeArgAttr(index, kUpdatedAttrName);
  if (!json)
    return success();

  // NUL-terminated, so that C (and ctypes.string_at) can read it in place.
  std::string value = *json;
  value.push_back('\0');
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto type = LLVM::LLVMArrayType::get(b.getI8Type(), value.size());
  LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true,
                         LLVM::Linkage::External, kSignaturesSymbol,
                         b.getStringAttr(value));
  return success();
}

namespace {

struct ExportSignaturesPass
    : mx::impl::ExportSignaturesBase<ExportSignaturesPass> {
  void runOnOperation() override {
    if (failed(mx::exportSignatures(getOperation())))
      signalPassFailure();
  }
};

} // namespace
