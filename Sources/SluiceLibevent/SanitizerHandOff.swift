/// A value handed from one thread to another through a channel whose ordering ThreadSanitizer
/// cannot see, made visible to it: the sender calls ``release()`` before the hand-off and the
/// receiver ``acquire()`` after it.
///
/// A continuation resumed on a loop thread wakes its task on Swift's global executor, which is
/// libdispatch on Linux: the resume and the dispatch queue order the two threads (the Swift
/// memory model guarantees that what the resuming thread wrote before `resume` is visible to the
/// resumed task), but both run in uninstrumented libraries, so ThreadSanitizer sees no edge and
/// reports the task's first read of a value made on the loop as a race. Outside a
/// ThreadSanitizer run ``make()`` returns `nil` and nothing is allocated.
final class SanitizerHandOff: Sendable {
    /// A hand-off to annotate, or `nil` when ThreadSanitizer is not loaded.
    static func make() -> SanitizerHandOff? {
        SanitizerHooks.release == nil ? nil : SanitizerHandOff()
    }

    private init() {}

    private var address: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// The sender's side: what this thread did so far happens before the receiver's ``acquire()``.
    func release() {
        sanitizerRelease(address)
    }

    /// The receiver's side.
    func acquire() {
        sanitizerAcquire(address)
    }
}
