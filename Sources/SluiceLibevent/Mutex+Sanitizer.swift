import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// ThreadSanitizer's happens-before annotations, looked up once: `nil` unless the process runs
/// with ThreadSanitizer's runtime loaded (`swift test --sanitize=thread`).
///
/// The standard library's `Mutex` locks with futexes inside the uninstrumented Synchronization
/// library on Linux, so ThreadSanitizer sees no ordering between two critical sections of one
/// `Mutex` and reports every access in them as a race. ``Synchronization/Mutex/withSanitizedLock(_:)``
/// tells it about the ordering the lock gives; in a normal build it costs one load and one
/// branch per lock.
enum SanitizerHooks {
    typealias Annotation = @convention(c) (UnsafeMutableRawPointer?) -> Void

    /// `__tsan_acquire`: what was released at this address before happens before what follows.
    static let acquire: Annotation? = lookUp("__tsan_acquire")
    /// `__tsan_release`: what came before happens before a later acquire of this address.
    static let release: Annotation? = lookUp("__tsan_release")

    private static func lookUp(_ symbol: String) -> Annotation? {
        #if os(Linux)
        // RTLD_DEFAULT is a null handle on glibc and musl.
        guard let address = dlsym(nil, symbol) else { return nil }
        return unsafeBitCast(address, to: Annotation.self)
        #else
        return nil
        #endif
    }
}

extension Mutex where Value: ~Copyable {
    /// `withLock`, with the lock's ordering made visible to ThreadSanitizer (see
    /// ``SanitizerHooks``). Use it for every critical section in this package.
    @inlinable
    package borrowing func withSanitizedLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // The mutex's own address names it: taken before the lock and without touching the
        // value, so no access to the value comes before the acquire.
        let address = withUnsafePointer(to: self) { UnsafeMutableRawPointer(mutating: $0) }
        return try withLock { (value: inout sending Value) throws(E) -> sending Result in
            sanitizerAcquire(address)
            defer { sanitizerRelease(address) }
            return try body(&value)
        }
    }
}

@usableFromInline
func sanitizerAcquire(_ address: UnsafeMutableRawPointer) {
    SanitizerHooks.acquire?(address)
}

@usableFromInline
func sanitizerRelease(_ address: UnsafeMutableRawPointer) {
    SanitizerHooks.release?(address)
}
