const char *word(int i) { return i == 2 ? "hello from a Windows program\n" : "wrong\n"; }
