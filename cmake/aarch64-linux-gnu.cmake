# Cross-compiles smax for 64-bit Arm Linux (Debian's g++-aarch64-linux-gnu and the
# arm64 packages of its dependencies), to run under qemu-aarch64: see
# scripts/test-aarch64.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# No -L /usr/aarch64-linux-gnu: the tests run on the arm64 packages' own libraries at
# their multiarch paths (libc6:arm64, libgomp1:arm64, libstdc++6:arm64), whose
# loader is /lib/ld-linux-aarch64.so.1; the cross toolchain's loader in that prefix
# is another build of glibc than libc6:arm64, and the mix hangs in thread creation.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
