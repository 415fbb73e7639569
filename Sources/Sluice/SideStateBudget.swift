import SluiceCore

/// The budget of a plugin whose policy keeps no key table (single-flight, switch-latest,
/// unrestricted): it bounds the side state of its waiting and running requests, as a table's own
/// budget does for the other policies (see ``KeyTable/charge(bytes:now:)``).
@usableFromInline
struct SideStateBudget {
    @usableFromInline let byteLimit: Int?
    @usableFromInline let countLimit: Int
    @usableFromInline var bytes = 0
    @usableFromInline var count = 0

    /// A budget of `budget.bytes` bytes; without a byte limit, of as many charges as a key table
    /// of `budget.entries` keys holds (``KeyTable/chargeLimit(capacity:)``).
    init(_ budget: MemoryBudget) {
        byteLimit = budget.bytes
        countLimit = budget.entries.map { KeyTable<String, TallyState>.chargeLimit(capacity: $0) } ?? Int.max
    }

    /// Takes a charge; `false` when the budget is spent.
    @inlinable
    mutating func charge(bytes amount: Int) -> Bool {
        guard count < countLimit, byteLimit.map({ bytes + amount <= $0 }) ?? true else { return false }
        bytes += amount
        count += 1
        return true
    }

    /// Returns a charge.
    @inlinable
    mutating func release(bytes amount: Int) {
        bytes -= amount
        count -= 1
    }
}
