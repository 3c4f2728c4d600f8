# A CMake toolchain file that cross-builds for Windows with the MinGW-w64 runtime
# (x86_64-w64-mingw32; Debian: mingw-w64-x86-64-dev and gcc-mingw-w64-x86-64-win32) on Linux
# with clang and lld, linking through Integrated Distributed ThinLTO with dtlto-bridge:
#
#   cmake -G Ninja -DCMAKE_TOOLCHAIN_FILE=/path/to/windows-mingw.cmake -S src -B build
#   dtlto-bridge check -- cmake --build build
#
# lld's MinGW driver has no --thinlto-distributor= (lld 22: "unknown argument"): the options go
# to the COFF linker behind it with --Xlink=/thinlto-distributor:ABS.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(CMAKE_C_COMPILER clang-22)
set(CMAKE_CXX_COMPILER clang++-22)
set(CMAKE_C_COMPILER_TARGET x86_64-w64-mingw32)
set(CMAKE_CXX_COMPILER_TARGET x86_64-w64-mingw32)
set(CMAKE_RC_COMPILER llvm-rc-22 CACHE FILEPATH "")
# Archives of bitcode need LLVM's archiver.
set(CMAKE_AR llvm-ar-22 CACHE FILEPATH "")
set(CMAKE_RANLIB llvm-ranlib-22 CACHE FILEPATH "")
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)

if(NOT DTLTO_BRIDGE AND DEFINED ENV{DTLTO_BRIDGE})
  set(DTLTO_BRIDGE "$ENV{DTLTO_BRIDGE}")
endif()
find_program(DTLTO_BRIDGE dtlto-bridge REQUIRED)
find_program(DTLTO_CLANG clang-22 REQUIRED)

set(CMAKE_C_FLAGS_INIT "--target=x86_64-w64-mingw32 -flto=thin")
set(CMAKE_CXX_FLAGS_INIT "--target=x86_64-w64-mingw32 -flto=thin")
set(_dtlto_link "-fuse-ld=lld-22 -Wl,--Xlink=/thinlto-distributor:${DTLTO_BRIDGE}")
string(APPEND _dtlto_link " -Wl,--Xlink=/thinlto-remote-compiler:${DTLTO_CLANG}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_dtlto_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_dtlto_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_dtlto_link}")
