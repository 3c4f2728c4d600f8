const char *greeting(void) { return "hello from dtlto-bridge"; }
