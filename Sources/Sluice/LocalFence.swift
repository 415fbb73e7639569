import SluiceLibevent

/// Fencing tokens of idempotency records kept in this process's memory: the millisecond the
/// process first asked for one (the epoch, so that a restarted process's tokens are greater)
/// and the execution's token, which grows with every execution of the shard that owns the
/// record (past the counter's bits it carries into the epoch's: still growing).
enum LocalFence {
    /// The wall clock's millisecond at first use.
    static let epoch = UInt64(clamping: SluiceLoop.wallClockMilliseconds())

    /// The fence of execution `token`.
    static func of(_ token: EventToken) -> FencingToken {
        FencingToken(value: (epoch << UInt64(FencingToken.counterBits)) &+ token.rawValue)
    }
}
