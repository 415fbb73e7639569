import CSluiceCacheHints

/// Starts loading the index slot of a key in a ``KeyTable`` before the lookup that reads it, from
/// any thread, without access to the table.
///
/// At a million keys a lookup misses the cache twice, once on the key's index slot and once on
/// its entry, and the second load needs the first. A caller that knows the key early (the gate,
/// before it takes its shard's lock, reads the clock and checks the request's scope) hashes it
/// with ``hash(_:)``, calls ``prefetch(hash:)``, does that other work while the slot arrives, and
/// then looks the key up with the same hash (``KeyTable/lookup(_:hash:now:orInsert:)``).
///
/// It holds the address of the table's index as a number, never dereferenced: the prefetch is
/// a hint to the processor, which ignores an address that is not (or no longer) mapped. A table
/// keeps its index where it was made; a copy of the table that is then written to gets an index
/// of its own, and the prefetcher of the original no longer helps it (it stays harmless).
public struct KeySlotPrefetcher: Sendable {
    @usableFromInline let base: UInt
    @usableFromInline let mask: Int

    @inlinable
    init(base: UInt, mask: Int) {
        self.base = base
        self.mask = mask
    }

    /// The hash a ``KeyTable`` files `key` under (Swift's seeded hash, truncated to 32 bits).
    @inlinable
    public static func hash<Key: Hashable>(_ key: Key) -> UInt32 {
        UInt32(truncatingIfNeeded: key.hashValue)
    }

    /// Starts loading the index slot where the table's probe for a key with hash `hash` begins.
    @inlinable
    public func prefetch(hash: UInt32) {
        sluice_prefetch(base &+ UInt(Int(hash) & mask) &* UInt(MemoryLayout<UInt32>.stride))
    }
}
