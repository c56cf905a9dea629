//===- ExportSignatures.h - Self-describing compiled modules ----*- C++ -*-===//
//
// Records the signatures of a module's public functions as a JSON string in
// an LLVM global, `_mx_signatures`, so that a shared library compiled from
// the module tells a caller (the Python binding) what each entry point takes
// and returns without the source at hand.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_EXPORTSIGNATURES_H
#define MX_CONVERSION_EXPORTSIGNATURES_H

#include "mx/Dialect/MX/IR/MXDialect.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace mx {

/// The name of the global that exportSignatures adds.
inline constexpr llvm::StringLiteral kSignaturesSymbol = "_mx_signatures";

/// The argument attribute of a public function whose caller's buffer takes
/// the argument's new value (the mx dialect's, which verifies it): set by
/// the source, kept by mx-drop-in-place-results where the function updates
/// the argument in place; the signature lists such arguments, and
/// exportSignatures removes the mark, which the LLVM functions' arguments
/// could not carry.
inline constexpr llvm::StringLiteral kUpdatedAttrName =
    MXDialect::getUpdatedAttrName();

/// The JSON description of the public, defined `func.func`s of `module`
/// (declarations and private functions are skipped), or nothing when there
/// is none. The format is documented at the mx-export-signatures pass
/// (Passes.td).
std::optional<std::string> getSignaturesJson(mlir::ModuleOp module);

/// Adds the NUL-terminated getSignaturesJson string to `module` as an
/// external constant `!llvm.array<N x i8>` global named kSignaturesSymbol,
/// or nothing when the module has no public function, and removes every
/// kUpdatedAttrName from the module's functions. Fails, with an error on the
/// existing symbol, when the module already has one of that name.
mlir::LogicalResult exportSignatures(mlir::ModuleOp module);

} // namespace mx

#endif // MX_CONVERSION_EXPORTSIGNATURES_H
