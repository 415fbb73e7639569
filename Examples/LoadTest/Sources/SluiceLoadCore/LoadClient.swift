/// One load connection as its loop drives it, whatever the protocol: ``LoadConnection`` (the
/// line protocol) or ``HTTPLoadConnection`` (HTTP/1.1). Every member is used on the loop's
/// thread.
protocol LoadClient: AnyObject {
    /// The connection's number, `0..<connections`.
    var index: Int { get }
    /// Open loop: when the next request is due (monotonic ns).
    var nextIntendedSend: Int64 { get set }
    /// Requests counted as sent that have no reply yet.
    var outstanding: Int { get }
    /// Closed loop: sends the first requests (up to the depth).
    func startClosedLoop()
    /// Open loop: sends every request due by `now`, one every `interval` ns.
    func sendDue(now: Int64, interval: Int64)
    /// Closes the connection (the run is over).
    func close()
}
