/*===- mx-capi-test.c - The mx C API from a C program ---------------------===*\
|*                                                                            *|
|* Hosts the mx dialect through MLIR's C API alone, as a non-C++ compiler     *|
|* would: the dialect handle, one registration call for dialects and one for  *|
|* passes, a module with mx ops parsed from text, both pipelines (by name and *|
|* built with their options), a bad option string, and one conversion pass    *|
|* created through its generated entry point. Prints what it finds, for       *|
|* FileCheck.                                                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

/* RUN: mx-capi-test 2>&1 | FileCheck %s
 */

#include "mx-c/Dialects.h"
#include "mx-c/Passes.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kProgram =
    "func.func @quantize(%x: tensor<256x512xbf16>)\n"
    "    -> (tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>) {\n"
    "  %d, %s = mx.quantize %x block [1, 32]\n"
    "      : tensor<256x512xbf16> -> tensor<256x512xf8E4M3FN>,\n"
    "        tensor<256x16xf8E8M0FNU>\n"
    "  %t = mx.swizzle %s\n"
    "      : tensor<256x16xf8E8M0FNU> -> tensor<2x4x32x4x4xf8E8M0FNU>\n"
    "  return %d, %t : tensor<256x512xf8E4M3FN>, tensor<2x4x32x4x4xf8E8M0FNU>\n"
    "}\n";

static void printToStderr(MlirStringRef text, void *userData) {
  (void)userData;
  fprintf(stderr, "%.*s", (int)text.length, text.data);
}

/* Counts the ops of each kind a lowering leaves: mx ops, ops outside the
 * LLVM and GPU dialects (the host code keeps gpu.launch_func for
 * mlir-translate), gpu.binary ops. */
typedef struct {
  int mx, foreign, binaries;
} OpCounts;

static bool startsWith(MlirStringRef name, const char *prefix) {
  size_t length = strlen(prefix);
  return name.length >= length && !strncmp(name.data, prefix, length);
}

static bool isNamed(MlirStringRef name, const char *expected) {
  return name.length == strlen(expected) && startsWith(name, expected);
}

static MlirWalkResult countOp(MlirOperation op, void *userData) {
  OpCounts *counts = (OpCounts *)userData;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (startsWith(name, "mx."))
    ++counts->mx;
  else if (isNamed(name, "gpu.binary"))
    ++counts->binaries;
  else if (!startsWith(name, "llvm.") && !startsWith(name, "gpu.") &&
           !isNamed(name, "builtin.module"))
    ++counts->foreign;
  return MlirWalkResultAdvance;
}

static OpCounts countOps(MlirModule module) {
  OpCounts counts = {0, 0, 0};
  mlirOperationWalk(mlirModuleGetOperation(module), countOp, &counts,
                    MlirWalkPreOrder);
  return counts;
}

static MlirModule parse(MlirContext ctx) {
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kProgram));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "the program does not parse\n");
    exit(1);
  }
  return module;
}

/* Runs `pm` on a fresh parse of the program and prints what is left. */
static void runAndCount(MlirContext ctx, MlirPassManager pm, const char *what) {
  MlirModule module = parse(ctx);
  MlirLogicalResult result =
      mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  OpCounts counts = countOps(module);
  fprintf(stderr, "%s: %s, %d mx ops, %d ops outside llvm and gpu, %d gpu.binary\n",
          what, mlirLogicalResultIsSuccess(result) ? "success" : "failure",
          counts.mx, counts.foreign, counts.binaries);
  mlirModuleDestroy(module);
}

int main(void) {
  MlirStringRef ns = mlirDialectHandleGetNamespace(mlirGetDialectHandle__mx__());
  fprintf(stderr, "dialect: %.*s\n", (int)ns.length, ns.data);
  // CHECK: dialect: mx

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllMXDialects(registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllMXPasses();

  MlirPassManager cpu = mlirPassManagerCreate(ctx);
  if (mlirLogicalResultIsFailure(mlirParsePassPipeline(
          mlirPassManagerGetAsOpPassManager(cpu),
          mlirStringRefCreateFromCString("builtin.module(mx-lower-to-cpu)"),
          printToStderr, NULL)))
    return 1;
  runAndCount(ctx, cpu, "mx-lower-to-cpu");
  // CHECK: mx-lower-to-cpu: success, 0 mx ops, 0 ops outside llvm and gpu, 0 gpu.binary
  mlirPassManagerDestroy(cpu);

  /* PTX text (format=isa): no ptxas needed. */
  MlirPassManager nvvm = mlirPassManagerCreate(ctx);
  if (mlirLogicalResultIsFailure(mlirMXBuildLowerToNVVMPipeline(
          mlirPassManagerGetAsOpPassManager(nvvm),
          mlirStringRefCreateFromCString("chip=sm_100a format=isa"),
          printToStderr, NULL)))
    return 1;
  runAndCount(ctx, nvvm, "mx-lower-to-nvvm");
  // CHECK: mx-lower-to-nvvm: success, 0 mx ops, 0 ops outside llvm and gpu, 1 gpu.binary
  mlirPassManagerDestroy(nvvm);

  MlirPassManager bad = mlirPassManagerCreate(ctx);
  MlirLogicalResult parsed = mlirMXBuildLowerToNVVMPipeline(
      mlirPassManagerGetAsOpPassManager(bad),
      mlirStringRefCreateFromCString("chip=sm_80"), printToStderr, NULL);
  fprintf(stderr, "\nbad options: %s\n",
          mlirLogicalResultIsFailure(parsed) ? "rejected" : "accepted");
  // CHECK: Cannot find option named 'sm_80'
  // CHECK: bad options: rejected
  mlirPassManagerDestroy(bad);

  MlirPassManager linalg = mlirPassManagerCreate(ctx);
  mlirPassManagerAddOwnedPass(linalg, mlirCreateMXConversionConvertMXToLinalg());
  runAndCount(ctx, linalg, "convert-mx-to-linalg");
  // CHECK: convert-mx-to-linalg: success, 0 mx ops
  mlirPassManagerDestroy(linalg);

  mlirContextDestroy(ctx);
  return 0;
}
