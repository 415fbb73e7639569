import SluiceLibevent

/// Where a ``SharedStore`` call comes from: the thread its completion must run on.
///
/// The gate calls a store from the loop of the shard that owns the key and passes that loop (a
/// `SluiceLoop` is a caller); a store keeps what it holds per caller (a connection per loop) by
/// the caller's identity. A simulation of a store, or a test, passes a caller of its own: a
/// queue it drains on one thread, so that the store protocol runs without a loop or a socket.
public protocol StoreCaller: AnyObject, Sendable {
    /// Runs `work` on the caller's thread, after everything queued before it, and never inside
    /// this call.
    func execute(_ work: @escaping @Sendable () -> Void)
}

extension SluiceLoop: StoreCaller {}
