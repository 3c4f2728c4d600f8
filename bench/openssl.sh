# Sourced by bench/remote.sh --openssl: builds OpenSSL 3 (the openssl-src crate from crates.io,
# fetched into cargo's registry cache, never committed) as ThinLTO bitcode with clang-22 into
# target/bench/openssl (static libraries, the `openssl` program linked once in-process), and sets
# $openssl to that directory. A second run reuses the build.
source "$root/bench/crate.sh"
src=$(crate_source openssl-src 300.6.1 openssl)
openssl="$root/target/bench/openssl"
if [ ! -x "$openssl/apps/openssl" ]; then
  rm -rf "$openssl"
  cp -r "$src" "$openssl"
  (cd "$openssl" &&
    ./Configure linux-x86_64 no-shared no-module no-legacy no-tests no-docs CC=clang-22 AR=llvm-ar-22 \
      RANLIB=llvm-ranlib-22 CFLAGS="-O2 -flto=thin" LDFLAGS="-fuse-ld=lld-22 -flto=thin" >/dev/null &&
    make -j"$(nproc)" build_sw >/dev/null)
fi
