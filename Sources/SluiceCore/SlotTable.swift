/// Values by key in a dense array of slots with a free list, found through a key → slot index.
///
/// For bookkeeping that is stored, changed in place and removed on every request (effects,
/// executions, waiting callers): a `Dictionary` whose values are large structs, mutated through
/// `dictionary[key]?.field = …`, runs its `_modify` coroutine, whose frame is too large for the
/// caller's inline buffer and is allocated on the heap each time — and in code generic over the
/// value type, unspecialised, it is allocated several times. Here the index maps keys to small
/// integers, and values are changed in place through a buffer pointer: storing, changing and
/// removing allocate nothing once the table has grown to its working set.
public struct SlotTable<Key: Hashable, Value> {
    @usableFromInline var index: [Key: Int32] = [:]
    @usableFromInline var slots: ContiguousArray<Value?> = []
    @usableFromInline var free: [Int32] = []

    /// An empty table.
    @inlinable
    public init() {}

    /// How many values it holds.
    @inlinable
    public var count: Int { index.count }

    /// Whether it holds no value.
    @inlinable
    public var isEmpty: Bool { index.isEmpty }

    /// The value for `key`.
    @inlinable
    public subscript(key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        return slots[Int(slot)]
    }

    /// Whether it holds a value for `key`.
    @inlinable
    public func contains(_ key: Key) -> Bool {
        index[key] != nil
    }

    /// Stores `value` for `key`, replacing any value it had.
    @inlinable
    public mutating func set(_ value: Value, for key: Key) {
        // One hash for a new key: claim a slot, then index it (giving the slot back if the key
        // had one already).
        let fresh = free.popLast() ?? Int32(slots.count)
        if let existing = index.updateValue(fresh, forKey: key) {
            index[key] = existing
            if fresh < slots.count { free.append(fresh) }
            slots.withUnsafeMutableBufferPointer { $0[Int(existing)] = value }
        } else if fresh < slots.count {
            slots.withUnsafeMutableBufferPointer { $0[Int(fresh)] = value }
        } else {
            slots.append(value)
        }
    }

    /// Changes the value for `key` in place; returns `nil` (and changes nothing) when there is
    /// none.
    @inlinable
    @discardableResult
    public mutating func update<Result>(_ key: Key, _ change: (inout Value) -> Result) -> Result? {
        guard let slot = index[key] else { return nil }
        return slots.withUnsafeMutableBufferPointer { buffer -> Result? in
            guard var value = buffer[Int(slot)].take() else { return nil }
            defer { buffer[Int(slot)] = value }
            return change(&value)
        }
    }

    /// Removes and returns the value for `key`.
    @inlinable
    @discardableResult
    public mutating func remove(_ key: Key) -> Value? {
        guard let slot = index.removeValue(forKey: key) else { return nil }
        free.append(slot)
        return slots.withUnsafeMutableBufferPointer { $0[Int(slot)].take() }
    }

    /// Every key held, in no particular order.
    @inlinable
    public var keys: Dictionary<Key, Int32>.Keys { index.keys }
}

extension SlotTable: Sendable where Key: Sendable, Value: Sendable {}
