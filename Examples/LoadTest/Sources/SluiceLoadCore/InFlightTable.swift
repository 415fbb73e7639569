/// Requests in flight on one connection, by id: a power-of-two array indexed by `id & mask`.
///
/// Ids are the connection's sequence numbers (1, 2, 3, …), so the live ids form a sliding
/// window and rarely collide; when a new id lands on a slot still held by an older request the
/// table doubles. Cheaper than a `Dictionary` on the reply path (no hashing).
public struct InFlightTable<Entry> {
    private struct Slot {
        /// 0: empty (ids start at 1).
        var id: UInt64
        var entry: Entry?
    }

    private var slots: [Slot]
    private var mask: UInt64
    /// Requests in flight.
    public private(set) var count = 0

    /// A table for about `capacity` requests in flight (it grows as needed).
    public init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size *= 2 }
        slots = Array(repeating: Slot(id: 0, entry: nil), count: size)
        mask = UInt64(size - 1)
    }

    /// How many slots the table has (a power of two).
    public var slotCount: Int { slots.count }

    /// Adds request `id` (never 0, not already in flight).
    public mutating func insert(_ entry: Entry, id: UInt64) {
        precondition(id != 0, "id 0 is reserved for empty slots")
        while slots[Int(id & mask)].id != 0 {
            grow()
        }
        slots[Int(id & mask)] = Slot(id: id, entry: entry)
        count += 1
    }

    /// Removes and returns request `id`, or `nil` when it is not in flight.
    public mutating func remove(id: UInt64) -> Entry? {
        let index = Int(id & mask)
        guard id != 0, slots[index].id == id else { return nil }
        let entry = slots[index].entry
        slots[index] = Slot(id: 0, entry: nil)
        count -= 1
        return entry
    }

    /// Doubles the slots until every live id has its own.
    private mutating func grow() {
        var size = slots.count * 2
        while true {
            let newMask = UInt64(size - 1)
            var fresh = Array(repeating: Slot(id: 0, entry: nil), count: size)
            var collided = false
            for slot in slots where slot.id != 0 {
                let index = Int(slot.id & newMask)
                if fresh[index].id != 0 {
                    collided = true
                    break
                }
                fresh[index] = slot
            }
            if !collided {
                slots = fresh
                mask = newMask
                return
            }
            size *= 2
        }
    }
}
