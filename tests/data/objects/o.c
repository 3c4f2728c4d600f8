static const char s[] = "a string";
int g(const char *);
int main(void) { return g(s); }
