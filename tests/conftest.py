"""Process-wide settings of the test run."""
import sys

# torch imports triton (when installed, as torch's CUDA wheel installs it) to ask whether it may
# compile GPU kernels. triton's libtriton carries its own LLVM, and loading it into a process
# where MuJoCo's EGL rendering already loaded Mesa's llvmpipe (and its LLVM) segfaults (seen:
# a rendering DMC test, then a torchvision import, in one pytest worker). The tests use torch
# on the CPU only, where triton has nothing to do: make `import triton` fail cleanly.
sys.modules.setdefault("triton", None)
