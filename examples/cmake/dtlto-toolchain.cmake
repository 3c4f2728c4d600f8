# A CMake toolchain file that links every executable and shared library of an unmodified project
# through Integrated Distributed ThinLTO with dtlto-bridge:
#
#   cmake -G Ninja -DCMAKE_TOOLCHAIN_FILE=/path/to/dtlto-toolchain.cmake -S src -B build
#   dtlto-bridge check -- cmake --build build
#
# dtlto-bridge is found on PATH, or named by the DTLTO_BRIDGE variable (of CMake or of the
# environment); lld needs its absolute path. Its options come from the environment at build
# time (DTLTO_BRIDGE_BACKEND, DTLTO_BRIDGE_JOBS, DTLTO_BRIDGE_WRAPPER, ...), so they can change
# without reconfiguring.
set(CMAKE_C_COMPILER clang-22)
set(CMAKE_CXX_COMPILER clang++-22)
# Archives of bitcode need LLVM's archiver: GNU ar cannot index their symbols.
set(CMAKE_AR llvm-ar-22 CACHE FILEPATH "")
set(CMAKE_RANLIB llvm-ranlib-22 CACHE FILEPATH "")

if(NOT DTLTO_BRIDGE AND DEFINED ENV{DTLTO_BRIDGE})
  set(DTLTO_BRIDGE "$ENV{DTLTO_BRIDGE}")
endif()
find_program(DTLTO_BRIDGE dtlto-bridge REQUIRED)

# -flto=thin on compiles makes bitcode; on links it keeps clang from dropping the distributor.
set(CMAKE_C_FLAGS_INIT "-flto=thin")
set(CMAKE_CXX_FLAGS_INIT "-flto=thin")
set(_dtlto_link "-flto=thin -fuse-ld=lld-22 -fthinlto-distributor=${DTLTO_BRIDGE}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_dtlto_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_dtlto_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_dtlto_link}")
