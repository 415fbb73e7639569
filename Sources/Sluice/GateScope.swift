import Synchronization

/// A cancellation scope: a node of the tree server → connection or session → … that effects
/// are registered in.
///
/// The ``Gate`` has a root scope (the server); an embedder opens a scope per connection, session
/// or screen with ``Gate/openScope(in:)`` and closes it with ``Gate/close(_:)``, which cancels
/// every request still waiting in it and below it, on every loop. Effect IDs are cancelled within
/// a scope with ``Gate/cancel(id:in:)-(EffectID,_)``. Idempotent executions live in the key's scope under the
/// root: a closing connection leaves them, it does not cancel them.
public final class GateScope: Sendable, Hashable, CustomStringConvertible {
    /// A process-unique number (64 bits: never reused).
    public let id: UInt64
    /// The scope this one was opened in (`nil` for the root).
    public let parent: GateScope?
    private let closedFlag = Atomic<Bool>(false)
    /// The shards that hold requests of this scope (bit `i` for shard `i`; shards past 63 share
    /// the last bit, which then means "every shard from 63 on").
    private let shardBits = Atomic<UInt64>(0)

    init(id: UInt64, parent: GateScope?) {
        self.id = id
        self.parent = parent
    }

    /// Whether this scope or one of its ancestors has been closed.
    public var isClosed: Bool {
        // Asked for every request: recursing through the `let` parent borrows each scope, where
        // a loop over an optional variable retains and releases every one it visits.
        if closedFlag.load(ordering: .sequentiallyConsistent) { return true }
        return parent?.isClosed ?? false
    }

    /// Whether this is a gate's root scope.
    public var isRoot: Bool { parent == nil }

    public var description: String { isRoot ? "GateScope(root)" : "GateScope(\(id))" }

    public static func == (lhs: GateScope, rhs: GateScope) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }

    // MARK: - Shards that hold it

    /// Records that `shard` holds requests of this scope, then reports whether the scope is
    /// still open. A closer sets the flag before it reads the bits (both sequentially
    /// consistent), so either the closer sees this shard or this shard sees the scope closed.
    func markHeld(byShard shard: Int) -> Bool {
        shardBits.bitwiseOr(Self.bit(forShard: shard), ordering: .sequentiallyConsistent)
        return !isClosed
    }

    /// Marks the scope closed; returns the shards that may hold its requests.
    func markClosed() -> UInt64 {
        closedFlag.store(true, ordering: .sequentiallyConsistent)
        return shardBits.load(ordering: .sequentiallyConsistent)
    }

    /// The shards that may hold requests of this scope.
    var heldBy: UInt64 { shardBits.load(ordering: .sequentiallyConsistent) }

    static func bit(forShard shard: Int) -> UInt64 {
        1 << UInt64(min(shard, 63))
    }

    /// Whether `bits` may include `shard`.
    static func bits(_ bits: UInt64, include shard: Int) -> Bool {
        bits & bit(forShard: shard) != 0
    }
}
