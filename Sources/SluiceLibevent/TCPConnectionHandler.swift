/// What a server (or client) does with one connection's bytes. Every method is called on the
/// connection's loop thread.
///
/// The connection hands over what it has read as one contiguous run of bytes; the handler
/// consumes a prefix of it (whole frames: lines, HTTP messages) and returns how many bytes it
/// consumed. What it leaves is handed over again, with whatever arrives next behind it. A
/// handler that wants to stop (its requests in flight are at their cap) calls
/// ``TCPConnection/pauseReading()``; one that has worked long enough calls
/// ``TCPConnection/yieldTurn()``. Either way it returns what it consumed so far.
///
/// The handler times its incomplete frame with ``TCPConnection/timeFrame(_:restart:)``: the
/// connection calls ``connectionFrameTimedOut(_:)`` when it does not complete in time, then
/// closes once what the handler wrote has been sent.
public protocol TCPConnectionHandler: AnyObject {
    /// The connection is open; nothing has been read yet.
    func connectionOpened(_ connection: TCPConnection)
    /// Bytes arrived (behind any the handler left last time). Returns how many of them, from
    /// the front, it consumed (0 to `bytes.count`). `bytes` is valid only during the call.
    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) -> Int
    /// The peer closed its sending side (a half-close): nothing more will be read, but replies
    /// can still be written. The default closes the connection once its output is written.
    func connectionInputEnded(_ connection: TCPConnection)
    /// The frame timed with ``TCPConnection/timeFrame(_:restart:)`` did not complete in time.
    /// The connection closes (reason ``TCPConnection/CloseReason/frameTimeout``) once what the
    /// handler writes now has been sent; the default writes nothing.
    func connectionFrameTimedOut(_ connection: TCPConnection)
    /// The connection is closed; nothing more will be read or written.
    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason)
}

extension TCPConnectionHandler {
    public func connectionInputEnded(_ connection: TCPConnection) {
        connection.closeAfterFlush()
    }

    public func connectionFrameTimedOut(_ connection: TCPConnection) {}
}
