/* Compiled by the cc crate with CC=clang-22 CFLAGS=-flto=thin: ThinLTO bitcode in libmix.a. */
int mix(int a, int b) { return a * 31 + b; }
