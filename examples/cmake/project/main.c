#include <stdio.h>
int add(int a, int b);
int mul(int a, int b);
int main(void) { printf("calc: add=%d mul=%d\n", add(2, 3), mul(4, 5)); return 0; }
