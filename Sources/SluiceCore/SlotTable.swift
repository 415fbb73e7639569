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
    @usableFromInline var slots: ContiguousArray<Slot?> = []
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
        return slots[Int(slot)]?.value
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
            slots.withUnsafeMutableBufferPointer { $0[Int(existing)] = Slot(value: value) }
        } else if fresh < slots.count {
            slots.withUnsafeMutableBufferPointer { $0[Int(fresh)] = Slot(value: value) }
        } else {
            slots.append(Slot(value: value))
        }
    }

    /// Changes the value for `key` in place; returns `nil` (and changes nothing) when there is
    /// none.
    @inlinable
    @discardableResult
    public mutating func update<Result>(_ key: Key, _ change: (inout Value) -> Result) -> Result? {
        guard let slot = index[key] else { return nil }
        // Optional chaining on the slot changes the value where it lies: taking it out and
        // putting it back would copy a large value twice.
        return slots.withUnsafeMutableBufferPointer { buffer -> Result? in
            buffer[Int(slot)]?.change(change)
        }
    }

    /// Removes and returns the value for `key`.
    @inlinable
    @discardableResult
    public mutating func remove(_ key: Key) -> Value? {
        guard let slot = index.removeValue(forKey: key) else { return nil }
        free.append(slot)
        return slots.withUnsafeMutableBufferPointer { $0[Int(slot)].take()?.value }
    }

    /// Removes the value for `key`, destroying it where it lies; returns whether there was one.
    @inlinable
    @discardableResult
    public mutating func delete(_ key: Key) -> Bool {
        guard let slot = index.removeValue(forKey: key) else { return false }
        free.append(slot)
        slots.withUnsafeMutableBufferPointer { $0[Int(slot)] = nil }
        return true
    }

    /// Every key held, in no particular order.
    @inlinable
    public var keys: Dictionary<Key, Int32>.Keys { index.keys }
}

extension SlotTable {
    /// A value in its slot. Optional chaining on an occupied slot (`slot?.change(…)`) reaches
    /// the value where it lies, which a method on `Value` itself could not do for any `Value`.
    @usableFromInline
    struct Slot {
        @usableFromInline var value: Value

        @inlinable
        init(value: Value) { self.value = value }

        @inlinable
        mutating func change<Result>(_ change: (inout Value) -> Result) -> Result { change(&value) }
    }
}

extension SlotTable.Slot: Sendable where Value: Sendable {}

extension SlotTable: Sendable where Key: Sendable, Value: Sendable {}
