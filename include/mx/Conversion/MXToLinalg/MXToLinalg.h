//===- MXToLinalg.h - Lower mx to linalg ------------------------*- C++ -*-===//
//
// Patterns that lower mx ops to portable tensor-level linalg/arith code.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_MXTOLINALG_MXTOLINALG_H
#define MX_CONVERSION_MXTOLINALG_MXTOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mx {

/// Adds the patterns that rewrite every mx op into linalg, tensor, arith and
/// math ops.
void populateMXToLinalgConversionPatterns(mlir::RewritePatternSet &patterns);

} // namespace mx

#endif // MX_CONVERSION_MXTOLINALG_MXTOLINALG_H
