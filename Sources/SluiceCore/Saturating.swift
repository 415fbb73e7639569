extension Int64 {
    /// `self + other`, pinned to `Int64.max` / `Int64.min` instead of overflowing.
    @inlinable
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if overflow { return other > 0 ? .max : .min }
        return sum
    }

    /// `self - other`, pinned to `Int64.max` / `Int64.min` instead of overflowing.
    @inlinable
    func saturatingSubtract(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        if overflow { return other < 0 ? .max : .min }
        return difference
    }
}

extension Instant {
    /// Marks "no instant" inside compact state structs.
    @usableFromInline
    static let noneNanos: Int64 = .min
}

extension String {
    /// The heap bytes this string owns: none when its UTF-8 fits inline (15 bytes or fewer on
    /// 64-bit platforms), else its storage object (a 32-byte header, the bytes and a NUL) as the
    /// allocator rounds it, to 16 bytes.
    @inlinable
    public var heapByteEstimate: Int {
        let count = utf8.count
        return count <= 15 ? 0 : (32 + count + 1 + 15) & ~15
    }
}
