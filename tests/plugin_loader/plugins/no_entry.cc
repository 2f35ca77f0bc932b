// A shared library that is not a reel plugin: no entry symbol.
extern "C" __attribute__((visibility("default"))) int some_other_function() { return 7; }
