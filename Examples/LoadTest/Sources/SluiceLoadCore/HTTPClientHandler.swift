/// What an ``HTTPClientConnection`` tells its owner, on the connection's loop thread.
protocol HTTPClientHandler: AnyObject {
    /// The TCP connection is established: requests may be written.
    func httpConnectionOpened(_ connection: HTTPClientConnection)
    /// A whole response arrived. Its bytes are valid only during the call. The handler may
    /// write or close the connection from here.
    func httpConnection(_ connection: HTTPClientConnection, received response: HTTPResponseView)
    /// The connection closed, or never opened (``HTTPClientConnection/CloseReason/connectFailed(_:)``);
    /// nothing more will be read or written.
    func httpConnectionClosed(_ connection: HTTPClientConnection, reason: HTTPClientConnection.CloseReason)
}
