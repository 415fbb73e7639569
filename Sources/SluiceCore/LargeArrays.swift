#if canImport(Glibc)
import Glibc
#endif

/// What the big arrays of key tables and their summaries need from the system: zeroing tens of
/// mebibytes quickly and asking for huge pages. Memory hints and fills only: no I/O.
enum LargeArrays {
    /// Writes zeros over `buffer` (uninitialized or not) with `memset` where there is one: a
    /// loop over tens of mebibytes is slow in a debug or sanitizer build.
    static func zero(_ buffer: UnsafeMutableBufferPointer<UInt32>) {
        #if canImport(Glibc)
        if let base = buffer.baseAddress { memset(base, 0, buffer.count * MemoryLayout<UInt32>.stride) }
        #else
        buffer.initialize(repeating: 0)
        #endif
    }

    /// Gives the whole pages between byte `start` and byte `end` of the storage at `base` back to
    /// the system (Linux's `madvise(MADV_DONTNEED)`): they stop counting in the process's RSS,
    /// and read as zeros when next touched. Only for storage that holds no initialized value
    /// there (an array's reserved capacity past its count). Nothing elsewhere.
    static func release(_ base: UnsafeMutableRawPointer, from start: Int, to end: Int) {
        #if canImport(Glibc)
        let page = UInt(pageSize)
        let first = (UInt(bitPattern: base) + UInt(start) + page - 1) & ~(page - 1)
        let last = (UInt(bitPattern: base) + UInt(end)) & ~(page - 1)
        guard last > first, let address = UnsafeMutableRawPointer(bitPattern: first) else { return }
        _ = madvise(address, Int(last - first), MADV_DONTNEED)
        #endif
    }

    #if canImport(Glibc)
    /// The system's page size.
    static let pageSize: Int = max(4096, sysconf(Int32(_SC_PAGESIZE)))
    #endif

    /// The bytes past `used` to the end of the huge page that byte `used` of an array at
    /// `pointer` falls in, when ``adviseHugePages(_:bytes:skipping:)`` advised that part of the
    /// array (the kernel backs a huge page whole on its first touch, however little of it is
    /// used); 0 elsewhere.
    static func hugePageSlack<T>(_ pointer: UnsafePointer<T>?, used: Int, bytes: Int, skipping skipped: Int) -> Int {
        #if canImport(Glibc)
        guard let pointer, bytes >= 4 << 20, used > skipped else { return 0 }
        let huge = UInt(2 << 20)
        let start = (UInt(bitPattern: pointer) + UInt(skipped) + huge - 1) & ~(huge - 1)
        let end = (UInt(bitPattern: pointer) + UInt(bytes)) & ~(huge - 1)
        let usedEnd = UInt(bitPattern: pointer) + UInt(used)
        guard usedEnd > start, usedEnd < end else { return 0 }
        return Int(((usedEnd + huge - 1) & ~(huge - 1)) - usedEnd)
        #else
        return 0
        #endif
    }

    /// Asks the kernel to back the 2 MiB-aligned part of an array of at least 4 MiB at `pointer`
    /// with huge pages (Linux's `madvise(MADV_HUGEPAGE)`, a hint that may be ignored), leaving
    /// its first `skipped` bytes on small pages; nothing elsewhere.
    static func adviseHugePages<T>(_ pointer: UnsafeMutablePointer<T>?, bytes: Int, skipping skipped: Int = 0) {
        #if canImport(Glibc)
        guard let pointer, bytes >= 4 << 20, bytes > skipped else { return }
        let start = (UInt(bitPattern: pointer) + UInt(skipped) + (2 << 20) - 1) & ~UInt((2 << 20) - 1)
        let end = (UInt(bitPattern: pointer) + UInt(bytes)) & ~UInt((2 << 20) - 1)
        guard end > start, let address = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = madvise(address, Int(end - start), MADV_HUGEPAGE)
        #endif
    }
}
