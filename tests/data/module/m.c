int g = 1;
static int s = 2;
int f(int x) { return x + g + s; }
