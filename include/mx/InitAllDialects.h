//===- InitAllDialects.h - Every dialect of an mx compilation ---*- C++ -*-===//
//
// The one call that makes a DialectRegistry ready for mx programs, as
// upstream's mlir::registerAllDialects does for MLIR: the mx dialect and the
// upstream dialects that mx programs are written in (func, arith, tensor) or
// that the mx pipelines produce on their way to the LLVM dialect. A compiler
// that emits mx ops calls it next to its own registrations.
//
//===----------------------------------------------------------------------===//

#ifndef MX_INITALLDIALECTS_H
#define MX_INITALLDIALECTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mx {

/// Adds every dialect an mx compilation involves to `registry`.
void registerAllDialects(mlir::DialectRegistry &registry);

} // namespace mx

#endif // MX_INITALLDIALECTS_H
