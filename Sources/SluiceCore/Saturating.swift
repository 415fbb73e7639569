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
