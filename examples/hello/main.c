/* The bundled example: a program whose ThinLTO backends import across objects and archives. */
#include <stdio.h>

int add(int a, int b);     /* plain object: add.c */
int mul(int a, int b);     /* regular archive: libmul.a(mul.o) */
int square(int a);         /* thin archive: libsq.a -> sq.o, which imports mul */
const char *greeting(void); /* object with an awkward file name */

int main(void) {
  printf("%s: add=%d mul=%d square=%d\n", greeting(), add(2, 3), mul(4, 5), square(6));
  return add(2, 3) == 5 && mul(4, 5) == 20 && square(6) == 36 ? 0 : 1;
}
