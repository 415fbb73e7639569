#if Hummingbird
import Testing

/// How a test serves its app.
enum ServingMode: String, Sendable, CaseIterable, CustomTestStringConvertible {
    /// Through the router's responder, in process: a request is a call the test's task makes, so
    /// cancelling that task cancels the request (``InProcessServer``).
    case router
    /// On a Hummingbird server bound to a loopback port, read by a real HTTP/1.1 client over a
    /// keep-alive connection (``LiveServer``).
    case live

    var testDescription: String { rawValue }
}
#endif
