# Source this (. examples/cargo-dtlto.sh) before `cargo build` to link through DTLTO with
# dtlto-bridge: Rust code as ThinLTO bitcode (-C linker-plugin-lto), linked by clang-22 and
# lld-22 with -flto=thin (without it clang silently drops -fthinlto-distributor=), and C code from
# the cc crate compiled to bitcode too. -W linker-messages shows what the linker prints, which
# cargo hides; DTLTO_BRIDGE_SUMMARY=1 makes each link print its summary line there.
# Then `dtlto-bridge check -- cargo build --release` proves the links went through DTLTO.
# DTLTO_BRIDGE names the distributor; it must be an absolute path (lld does not search PATH).
# It overwrites, rather than extends, RUSTFLAGS, CC, CXX, AR, CFLAGS and CXXFLAGS: add your own
# flags after sourcing it.
bridge=${DTLTO_BRIDGE:-$(command -v dtlto-bridge)}
case $bridge in
  /*) ;;
  *) echo "cargo-dtlto.sh: set DTLTO_BRIDGE to dtlto-bridge's absolute path" >&2; return 1 ;;
esac
export RUSTFLAGS="-C linker-plugin-lto -C linker=clang-22 -C link-arg=-fuse-ld=lld-22 \
-C link-arg=-flto=thin -C link-arg=-fthinlto-distributor=$bridge -W linker-messages"
export CC=clang-22 CXX=clang++-22 AR=llvm-ar-22 CFLAGS=-flto=thin CXXFLAGS=-flto=thin
export DTLTO_BRIDGE_SUMMARY=1
