/* A Windows program with no C runtime: it calls kernel32 through an import library that
   llvm-dlltool makes from kernel32.def, so it cross-builds on Linux with LLVM alone. */
typedef void *HANDLE;
__declspec(dllimport) HANDLE __stdcall GetStdHandle(unsigned long);
__declspec(dllimport) int __stdcall WriteFile(HANDLE, const void *, unsigned long,
                                              unsigned long *, void *);
__declspec(dllimport) void __stdcall ExitProcess(unsigned);

int twice(int x);           /* in the library (a bitcode archive): twice.c */
const char *word(int i);    /* in the library: word.c */

static unsigned long length(const char *s) {
  unsigned long n = 0;
  while (s[n])
    n++;
  return n;
}

void start(void) {
  const char *w = word(twice(1));
  unsigned long written;
  WriteFile(GetStdHandle((unsigned long)-11), w, length(w), &written, 0);
  ExitProcess(twice(21) == 42 ? 0 : 1);
}
