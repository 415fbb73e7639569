// LeakSanitizer asks the program for suppressions at exit through this function. The leak
// suppressed here is not Sluice's, and no test can free it: XCTest's own. `swift test` starts the
// bundle's XCTest runner even when, as here, every test is a Swift Testing test, and it leaves a
// few hundred bytes of its bookkeeping allocated.
__attribute__((used, visibility("default")))
const char *__lsan_default_suppressions(void) {
    return "leak:libXCTest.so\n";
}
