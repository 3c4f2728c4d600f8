__attribute__((target_clones("avx2","default"))) int tc(int x) { return x * 3; }
int use(int x) { return tc(x) + 1; }
