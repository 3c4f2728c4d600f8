# A CMake toolchain file that cross-builds for Windows (x86_64-pc-windows-msvc) on Linux with
# clang and lld-link, linking through Integrated Distributed ThinLTO with dtlto-bridge:
#
#   cmake -G Ninja -DCMAKE_TOOLCHAIN_FILE=/path/to/windows-msvc.cmake -S src -B build
#   dtlto-bridge check -- cmake --build build
#
# clang's driver does not pass -fthinlto-distributor= to lld-link for MSVC targets (the link
# then runs in-process, with only an "argument unused" warning), so the distributor goes to
# lld-link itself: -Wl,/thinlto-distributor:ABS -Wl,/thinlto-remote-compiler:ABS. The C runtime
# and Windows SDK libraries are the project's to provide (the example in
# ../windows/msvc needs none: an llvm-dlltool import library is enough).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(CMAKE_C_COMPILER clang-22)
set(CMAKE_CXX_COMPILER clang++-22)
set(CMAKE_C_COMPILER_TARGET x86_64-pc-windows-msvc)
set(CMAKE_CXX_COMPILER_TARGET x86_64-pc-windows-msvc)
set(CMAKE_LINKER lld-link-22 CACHE FILEPATH "")
# Archives of bitcode need LLVM's archiver.
set(CMAKE_AR llvm-ar-22 CACHE FILEPATH "")
set(CMAKE_RANLIB llvm-ranlib-22 CACHE FILEPATH "")
set(CMAKE_RC_COMPILER llvm-rc-22 CACHE FILEPATH "")
set(CMAKE_MT llvm-mt-22 CACHE FILEPATH "")
set(CMAKE_DLLTOOL llvm-dlltool-22 CACHE FILEPATH "")
# No C runtime to link a test program against: check the compiler by building a library.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

if(NOT DTLTO_BRIDGE AND DEFINED ENV{DTLTO_BRIDGE})
  set(DTLTO_BRIDGE "$ENV{DTLTO_BRIDGE}")
endif()
find_program(DTLTO_BRIDGE dtlto-bridge REQUIRED)
find_program(DTLTO_CLANG clang-22 REQUIRED)

# The target in the flags as well: CMake 3.25 identifies the compiler without
# CMAKE_<LANG>_COMPILER_TARGET, and would take it for a GNU-ABI (MinGW) clang.
set(CMAKE_C_FLAGS_INIT "--target=x86_64-pc-windows-msvc -flto=thin")
set(CMAKE_CXX_FLAGS_INIT "--target=x86_64-pc-windows-msvc -flto=thin")
set(_dtlto_link
  "-fuse-ld=lld-link -Wl,/thinlto-distributor:${DTLTO_BRIDGE} -Wl,/thinlto-remote-compiler:${DTLTO_CLANG}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_dtlto_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_dtlto_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_dtlto_link}")
