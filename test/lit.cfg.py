# lit configuration of the mx regression tests: FileCheck tests of the IR and
# executed CPU tests through mlir-runner (substitution %mlir_runner_libs).
import glob
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "MX"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".c"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mx_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

runner_libs = ",".join(
    os.path.join(config.llvm_lib_dir, name)
    for name in ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so"))
config.substitutions.append(("%mlir_runner_libs", runner_libs))

tools = [
    "mx-capi-test",
    "mx-opt",
    "mlir-runner",
    "mlir-translate",
]
llvm_config.add_tool_substitutions(
    tools, [os.path.join(config.mx_obj_root, "bin"), config.llvm_tools_dir])

config.substitutions.append(("%python", config.python_executable))
config.environment["PYTHONPATH"] = os.path.join(config.mx_src_root, "python")

# mx-opt's NVVM serialization and the PTX checks call ptxas from the CUDA
# toolkit; without one those tests are reported UNSUPPORTED.
ptxas = os.path.join(config.cuda_toolkit_bin or "", "ptxas")
if config.cuda_toolkit_bin and os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    llvm_config.with_environment("PATH", config.cuda_toolkit_bin, append_path=True)

# SASS checks disassemble the cubins that ptxas makes with nvdisasm: the CUDA
# toolkit's if it has one, else that of the nvidia-cuda-nvdisasm wheel in the
# project's venv (python/requirements.txt); without either they are reported
# UNSUPPORTED.
venv = os.path.dirname(os.path.dirname(config.python_executable))
nvdisasm_candidates = [os.path.join(config.cuda_toolkit_bin or "", "nvdisasm")]
nvdisasm_candidates += sorted(glob.glob(os.path.join(
    venv, "lib", "python3*", "site-packages", "nvidia", "cu*", "bin",
    "nvdisasm")))
for nvdisasm in nvdisasm_candidates:
    if os.path.isfile(nvdisasm) and os.access(nvdisasm, os.X_OK):
        config.available_features.add("nvdisasm")
        config.substitutions.append(("%nvdisasm", nvdisasm))
        break
