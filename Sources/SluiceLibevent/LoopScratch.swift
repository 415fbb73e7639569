/// Buffers a loop lends to the one connection it is serving at a time (loop thread only).
///
/// A connection reads into ``read`` and hands those bytes to its handler; only what the handler
/// leaves is copied into the connection's own buffer. What the handler writes meanwhile collects
/// in ``staging`` and goes to the socket in one write when the handler returns. A connection
/// whose requests arrive whole, and whose answers the socket takes at once, so allocates
/// nothing per request and holds no buffer between requests.
final class LoopScratch {
    /// Where connections read.
    let read: UnsafeMutableRawBufferPointer
    private let stagingStorage: UnsafeMutablePointer<ByteBuffer>

    /// Answers written while a connection's handler works (kept at up to the read size between
    /// uses).
    var staging: ByteBuffer {
        _read { yield stagingStorage.pointee }
        _modify { yield &stagingStorage.pointee }
    }

    /// Connections that stopped reading because their accounting is over its budget, woken
    /// by one timer of the loop.
    var budgetWaiters: [TCPConnection] = []
    /// Whether the loop's budget timer is armed.
    var budgetTimerArmed = false
    /// How many times the budget timer has fired.
    var budgetChecks = 0

    /// Connections that used up their turn, or read a full buffer (so more is waiting): the
    /// loop serves them in this order, a bounded slice of time per pass, after the sockets that
    /// became ready (see `SluiceLoop.waitForTurn(_:)`).
    var turnWaiters: [TCPConnection] = []
    /// The first waiter not served yet.
    var turnHead = 0
    /// Whether a pass over the waiters is due.
    var turnPassArmed = false

    init(readSize: Int) {
        read = .allocate(byteCount: readSize, alignment: 16)
        stagingStorage = .allocate(capacity: 1)
        stagingStorage.initialize(to: ByteBuffer(retainedCapacity: readSize))
    }

    deinit {
        read.deallocate()
        stagingStorage.pointee.release()
        stagingStorage.deinitialize(count: 1)
        stagingStorage.deallocate()
    }
}
