"""Repository rules that find LibTorch (the PyPI torch wheel) and the CUDA toolkit on this machine.

Nothing is hard-coded: torch is located by asking python3 (without importing it, so the wheel's
CUDA dependency wheels need not be installed), CUDA by $CUDA_HOME or the nvcc on PATH.
"""

_TORCH_BUILD = """
package(default_visibility = ["//visibility:public"])

# Defines TorchConfig.cmake would give a C++17 consumer of the 2.11 wheel (built with the C++11 ABI).
_DEFINES = [
    "USE_DISTRIBUTED",
    "USE_C10D_GLOO",
    "USE_RPC",
    "USE_TENSORPIPE",
    "_GLIBCXX_USE_CXX11_ABI=1",
]

cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"],
                exclude = ["include/pybind11/**", "include/torch/csrc/api/include/torch/python/**"]),
    includes = ["include", "include/torch/csrc/api/include"],
    defines = _DEFINES,
)

cc_library(
    name = "torch_cpu",
    srcs = ["lib/libc10.so", "lib/libtorch_cpu.so"],
    deps = [":headers"],
    linkopts = [
        "-Wl,-rpath,{lib}",
        "-Wl,-rpath-link,{lib}",
        "-Wl,-rpath,{cuda_lib}",
        "-Wl,-rpath-link,{cuda_lib}",
        "-lpthread",
    ],
)

# The wheel's CUDA side. Some of libtorch_cuda's own dependencies (cuFile, cuSPARSELt, NVSHMEM) come
# only as nvidia-* wheels; they are needed to run on a GPU (./zpp setup --cuda), not to link.
cc_library(
    name = "torch_cuda",
    srcs = ["lib/libc10_cuda.so", "lib/libtorch_cuda.so"],
    deps = [":torch_cpu"],
    defines = ["USE_C10D_NCCL", "USE_CUDA"],
    linkopts = ["-Wl,--allow-shlib-undefined", "-Wl,--no-as-needed"],
)
"""

def _local_torch_impl(ctx):
    python = ctx.os.environ.get("ZEROPP_PYTHON", "python3")
    res = ctx.execute([python, "-c",
        "import importlib.util, os; s = importlib.util.find_spec('torch'); " +
        "print(os.path.dirname(s.origin) if s else '')"])
    root = res.stdout.strip()
    if res.return_code != 0 or not root:
        fail("local_torch: python3 cannot find the torch wheel (%s). Run ./zpp setup." % res.stderr)
    ver = ctx.execute([python, "-c",
        "import re; print(re.search(r\"__version__ = '([^']+)'\", open('%s/version.py').read()).group(1))" % root])
    ctx.symlink(root + "/include", "include")
    ctx.symlink(root + "/lib", "lib")
    cuda_lib = _cuda_home(ctx) + "/lib64"
    ctx.file("BUILD.bazel", _TORCH_BUILD.replace("{lib}", root + "/lib").replace("{cuda_lib}", cuda_lib))
    ctx.file("version.txt", ver.stdout)

local_torch = repository_rule(
    implementation = _local_torch_impl,
    environ = ["ZEROPP_PYTHON", "PATH", "CUDA_HOME"],
    local = True,
)

def _cuda_home(ctx):
    home = ctx.os.environ.get("CUDA_HOME", "")
    if home:
        return home
    nvcc = ctx.which("nvcc")
    if nvcc:
        return str(nvcc.dirname.dirname.realpath)
    return "/usr/local/cuda"

_CUDA_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/**/*.inl"], allow_empty = True),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    deps = [":cuda_headers"],
    linkopts = ["-L{home}/lib64", "-Wl,-rpath,{home}/lib64", "-lcudart"],
)

cc_library(
    name = "nccl",
    deps = [":cuda_headers"],
    linkopts = ["-L{nccl_lib}", "-Wl,-rpath,{nccl_lib}", "-lnccl"],
)

exports_files(["nvcc.sh"])
"""

def _local_cuda_impl(ctx):
    home = _cuda_home(ctx)
    nccl_lib = home + "/lib64"
    for cand in [home + "/lib64", home + "/lib", "/usr/lib/x86_64-linux-gnu"]:
        if ctx.path(cand + "/libnccl.so").exists:
            nccl_lib = cand
            break
    if ctx.path(home + "/include").exists:
        ctx.symlink(home + "/include", "include")
    else:
        ctx.file("include/README", "no CUDA toolkit found")
    ctx.file("BUILD.bazel", _CUDA_BUILD.replace("{home}", home).replace("{nccl_lib}", nccl_lib))
    ctx.file("nvcc.sh", "#!/bin/sh\nexec %s/bin/nvcc \"$@\"\n" % home, executable = True)

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    environ = ["PATH", "CUDA_HOME"],
    local = True,
)
