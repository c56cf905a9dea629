//===- GemmConfig.cpp - Parse the gemm-config option ----------------------===//
//
// `key=value` pairs separated by commas; each key once. Values are checked
// for their form here and for what the kernel can do by the planner.
//
//===----------------------------------------------------------------------===//

#include "mx/Conversion/MXToGPU/Gemm/GemmGenerator.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

using namespace mx::gemm;

namespace {

/// The largest integer a key takes. Far above what any kernel can build (the
/// planner says which are), it keeps the planner's tile and register
/// arithmetic (products of a few of them) inside int64.
constexpr int64_t kMaxValue = 65535;

bool parsePositive(llvm::StringRef value, std::optional<int64_t> &out) {
  int64_t v;
  if (value.getAsInteger(10, v) || v < 1 || v > kMaxValue)
    return false;
  out = v;
  return true;
}

} // namespace

llvm::FailureOr<GemmConfig> mx::gemm::parseGemmConfig(llvm::StringRef text,
                                                      std::string &error) {
  GemmConfig config;
  llvm::StringSet<> seen;
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    key = key.trim();
    value = value.trim();
    if (!seen.insert(key).second) {
      error = ("gemm-config sets '" + llvm::Twine(key) + "' twice").str();
      return llvm::failure();
    }
    bool ok = true;
    if (key == "consumers") {
      ok = parsePositive(value, config.consumers);
    } else if (key == "waves") {
      ok = parsePositive(value, config.waves);
    } else if (key == "tile_n") {
      ok = parsePositive(value, config.tileN);
    } else if (key == "overlap") {
      ok = value == "on" || value == "off";
      config.overlap = value == "on";
    } else if (key == "products") {
      ok = value == "on" || value == "off";
      config.scaleProducts = value == "on";
    } else if (key == "stages") {
      ok = parsePositive(value, config.stages);
    } else if (key == "cluster") {
      auto [m, n] = value.split('x');
      ok = parsePositive(m, config.clusterM) && parsePositive(n, config.clusterN);
    } else if (key == "epilogue") {
      ok = value == "tma" || value == "registers";
      config.tmaStore = value == "tma";
    } else if (key == "mx") {
      ok = value == "staged" || value == "fused";
      config.mxStaged = value == "staged";
    } else {
      error = ("gemm-config has no key '" + llvm::Twine(key) +
               "' (expected consumers, waves, tile_n, overlap, products, "
               "stages, cluster, epilogue, mx)")
                  .str();
      return llvm::failure();
    }
    if (!ok) {
      error =
          ("gemm-config: bad value '" + llvm::Twine(value) + "' for '" + key +
           "' (expected a positive integer up to " + llvm::Twine(kMaxValue) +
           ", MxN for cluster, tma or "
           "registers for epilogue, staged or fused for mx, on or off for "
           "overlap and products)")
              .str();
      return llvm::failure();
    }
  }
  return config;
}
