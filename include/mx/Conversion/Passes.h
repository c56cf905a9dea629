//===- Passes.h - mx conversion passes --------------------------*- C++ -*-===//
//
// Declares the mx conversion passes and their registration; their `chip`
// options take the Chip values of Target.h.
//
//===----------------------------------------------------------------------===//

#ifndef MX_CONVERSION_PASSES_H
#define MX_CONVERSION_PASSES_H

#include "mx/Conversion/ExportSignatures.h"
#include "mx/Conversion/MXToCublas/MXToCublas.h"
#include "mx/Conversion/MXToGPU/MXToGPU.h"
#include "mx/Conversion/MXToLinalg/MXToLinalg.h"
#include "mx/Conversion/Target.h"

#include "mlir/Pass/Pass.h"

namespace mx {

#define GEN_PASS_DECL
#include "mx/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mx/Conversion/Passes.h.inc"

} // namespace mx

#endif // MX_CONVERSION_PASSES_H
