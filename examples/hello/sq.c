int mul(int a, int b);
int square(int a) { return mul(a, a); }
