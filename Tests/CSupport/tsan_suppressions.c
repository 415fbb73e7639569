// ThreadSanitizer asks the program for suppressions at start-up through this function.
//
// The one race suppressed here is a false one inside the Swift concurrency runtime, between a
// continuation's `resume` and the task it resumes. `swift_continuation_resume` tells the
// sanitizer it releases the task before it marks the continuation resumed, and a task that was
// already suspended is woken through the executor, which acquires it. But when `resume` runs
// before the awaiting task has suspended (the resuming thread wins the race),
// `swift_continuation_await` sees the "resumed" mark with an atomic acquire load inside the
// uninstrumented runtime and goes on at once, without the matching `_swift_tsan_acquire`. The
// resumed task then reuses its frame's memory, which `resume` read on the other thread, and the
// sanitizer reports that as a race. The suppression matches only races where one side is inside
// a continuation's `resume` (`CheckedContinuation` `Scc`, `UnsafeContinuation` `ScC`, mangled),
// which touches nothing but the continuation's own context and the value it hands over.
//
// Values that Sluice's own code hands from a loop thread to a task are annotated where they are
// handed over (`SanitizerHandOff`), so races in them are still reported.
__attribute__((used, visibility("default")))
const char *__tsan_default_suppressions(void) {
    return "race:Scc6resume\n"
           "race:ScC6resume\n";
}
