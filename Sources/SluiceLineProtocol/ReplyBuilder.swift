#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reply bytes assembled with `memcpy` in a buffer a session keeps for its life, then written
/// with one call: the `ECHO` and `PING` paths allocate nothing per line.
@usableFromInline
struct ReplyBuilder: ~Copyable {
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    private var length = 0

    init(capacity: Int = 256) {
        self.capacity = capacity
        self.storage = .allocate(byteCount: capacity, alignment: 1)
    }

    deinit {
        storage.deallocate()
    }

    /// Starts a new reply.
    mutating func reset() {
        length = 0
    }

    /// Appends `bytes`.
    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        memcpy(storage + length, base, bytes.count)
        length += bytes.count
    }

    /// Appends a static string's UTF-8 bytes.
    @inline(__always)
    mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends one byte.
    @inline(__always)
    mutating func append(byte: UInt8) {
        reserve(1)
        storage.storeBytes(of: byte, toByteOffset: length, as: UInt8.self)
        length += 1
    }

    /// The bytes appended since the last reset.
    var count: Int { length }

    /// Drops every byte after the first `count`.
    mutating func truncate(to count: Int) {
        length = min(length, max(0, count))
    }

    /// The reply so far, valid until the next mutation.
    var bytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: storage, count: length)
    }

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if length + extra > capacity { grow(toHold: extra) }
    }

    /// The rare path: a reply longer than any before it on this session.
    @inline(never)
    private mutating func grow(toHold extra: Int) {
        let newCapacity = max(capacity * 2, length + extra)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 1)
        grown.copyMemory(from: storage, byteCount: length)
        storage.deallocate()
        storage = grown
        capacity = newCapacity
    }
}
