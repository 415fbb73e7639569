// LeakSanitizer asks the program for suppressions at exit through this function. The leaks
// suppressed here are not Sluice's, and no test can free them:
//
// - XCTest's own: `swift test` starts the bundle's XCTest runner even when, as here, every test
//   is a Swift Testing test, and it leaves a few hundred bytes of its bookkeeping allocated.
// - HummingbirdTesting's router test client (`app.test(.router)`): it makes an
//   `NIOAsyncTestingChannel` for every request and never closes it, so each channel, its
//   pipeline and its testing event loop (with that loop's dispatch queue) stay in a reference
//   cycle. Suppressing the allocations made under the router test framework also covers what
//   only they reach.
__attribute__((used, visibility("default")))
const char *__lsan_default_suppressions(void) {
    return "leak:libXCTest.so\n"
           "leak:RouterTestFramework\n";
}
