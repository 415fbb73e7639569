#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A contiguous run of bytes with room at its end, owned by one connection (or one loop):
/// memory is taken on the first append and given back by ``release()`` or once it has been
/// consumed to empty while larger than ``retainedCapacity``, so an idle connection holds none.
///
/// Not thread-safe: its owner touches it on one thread. A value type over raw memory: it must
/// not be copied while both copies are used (its owner keeps it behind a pointer).
struct ByteBuffer {
    private var base: UnsafeMutableRawPointer?
    private var start = 0
    private var end = 0
    private(set) var capacity = 0
    /// Capacity kept when the buffer empties; more than this is freed at once.
    let retainedCapacity: Int

    init(retainedCapacity: Int = 0) {
        self.retainedCapacity = retainedCapacity
    }

    /// The bytes held.
    var count: Int { end - start }

    var isEmpty: Bool { end == start }

    /// The bytes held, valid until the next mutation.
    var readable: UnsafeRawBufferPointer {
        guard let base else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + start, count: end - start)
    }

    /// Free space after the bytes held, after making at least `minimum` bytes of it (moving
    /// the bytes to the front or growing the memory; never beyond what `minimum` asks).
    mutating func writableSpace(minimum: Int) -> UnsafeMutableRawBufferPointer {
        reserve(minimum)
        // `reserve` made `base` non-nil for any positive `minimum`.
        guard let base else { return UnsafeMutableRawBufferPointer(start: nil, count: 0) }
        return UnsafeMutableRawBufferPointer(start: base + end, count: capacity - end)
    }

    /// Counts `count` bytes written into ``writableSpace(minimum:)`` as held.
    mutating func commit(_ count: Int) {
        precondition(count >= 0 && end + count <= capacity, "ByteBuffer.commit past its capacity")
        end += count
    }

    /// Appends `bytes`.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        guard let base else { return }
        (base + end).copyMemory(from: source, byteCount: bytes.count)
        end += bytes.count
    }

    /// Drops the first `count` bytes (at most ``count``).
    mutating func consume(_ count: Int) {
        start += min(count, end - start)
        if start == end {
            start = 0
            end = 0
            if capacity > retainedCapacity { release() }
        }
    }

    /// Drops every byte but keeps up to ``retainedCapacity`` of memory.
    mutating func removeAll() {
        consume(count)
    }

    /// Gives the memory back.
    mutating func release() {
        if let base { Self.deallocate(base, capacity: capacity) }
        base = nil
        start = 0
        end = 0
        capacity = 0
    }

    /// Makes room for `extra` more bytes after the held ones.
    private mutating func reserve(_ extra: Int) {
        guard extra > 0 else { return }
        if capacity - end >= extra { return }
        let held = end - start
        if let base, start > 0, capacity - held >= extra {
            // Enough room once the held bytes move to the front.
            if held > 0 { base.copyMemory(from: base + start, byteCount: held) }
            start = 0
            end = held
            return
        }
        // Grow to the larger of double and what is needed, in whole KiB (whole pages once
        // mapped).
        let needed = held + extra
        let grown = max(needed, capacity * 2, 1024)
        let rounded = grown >= Self.mappedSize ? (grown + Self.pageSize - 1) & ~(Self.pageSize - 1) : (grown + 1023) & ~1023
        let memory = Self.allocate(rounded)
        if let base {
            if held > 0 { memory.copyMemory(from: base + start, byteCount: held) }
            Self.deallocate(base, capacity: capacity)
        }
        base = memory
        start = 0
        end = held
        capacity = rounded
    }

    /// Sizes from which memory is mapped from the system, and unmapped when given back: a
    /// large buffer (a connection that does not read its answers, a large body) returns its
    /// pages to the system when it empties, where the allocator would keep them for the
    /// process.
    static let mappedSize = 32 << 10
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    private static func allocate(_ size: Int) -> UnsafeMutableRawPointer {
        if size >= mappedSize {
            let memory = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            guard let memory, memory != MAP_FAILED else { fatalError("ByteBuffer: out of memory for \(size) bytes") }
            return memory
        }
        guard let memory = malloc(size) else { fatalError("ByteBuffer: out of memory for \(size) bytes") }
        return memory
    }

    private static func deallocate(_ memory: UnsafeMutableRawPointer, capacity: Int) {
        if capacity >= mappedSize {
            munmap(memory, capacity)
        } else {
            free(memory)
        }
    }
}
