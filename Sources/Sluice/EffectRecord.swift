/// The idempotency record an effect runs for, and the fencing token of its current claim: what
/// an effect passes downstream so that the end it changes can take part in exactly-once.
///
/// The identity (``plugin``, ``key``, ``record``) is the same on every instance and after a
/// restart, for every retry of the same request; the ``fence`` grows with every takeover of the
/// record (another instance's claim after this one's lease ran out), and across a store that
/// lost its data. A downstream that keeps its changes by ``downstreamKey`` (as a payment
/// provider keeps charges by idempotency key) returns the change it already made for a record
/// instead of making a second one, and one that also keeps the greatest fence it has seen per
/// record refuses a call whose fence is older (a stale owner, paused past its lease): the only
/// way an external change becomes exactly-once. A lease alone never is.
public struct EffectRecord: Sendable, Hashable, CustomStringConvertible {
    /// The plugin's name.
    public let plugin: String
    /// The request's key (the account, the user).
    public let key: String
    /// The idempotency record: the plugin's identity of the request (for payments, the key and
    /// the client's idempotency key together).
    public let record: String
    /// The fencing token of the claim the effect runs under.
    public let fence: FencingToken

    /// A record of `plugin` for `key`, identified by `record`, claimed with `fence`.
    public init(plugin: String, key: String, record: String, fence: FencingToken) {
        self.plugin = plugin
        self.key = key
        self.record = record
        self.fence = fence
    }

    /// The record's identity as one string, meant as the idempotency key of a downstream call:
    /// `<plugin>:<record>`. The same for every owner of the record; the fence goes beside it.
    public var downstreamKey: String { "\(plugin):\(record)" }

    public var description: String { "\(downstreamKey)@\(fence)" }
}
