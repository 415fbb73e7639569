import Sluice

/// How one verb of the line protocol maps to a plugin: it decodes a request's arguments into
/// the plugin's input and renders the plugin's typed outcome as a reply's status and details.
///
/// ```swift
/// struct LikeLineCodec: LineCodec {
///     let verb = "LIKE"
///     func decode(_ arguments: Substring) throws(RequestError) -> String {
///         guard let key = RequestLine.key(arguments) else { throw .usage }
///         return key
///     }
///     func encode(_ output: Int, _ info: RunInfo, into reply: inout LineReply) {
///         reply.append("OK likes=")
///         reply.append(output)
///     }
/// }
/// ```
///
/// Outcomes other than `GateOutcome/ran(_:_:)` get the standard replies unless the codec
/// renders them itself (see ``LineReply/appendStandard(_:)``).
public protocol LineCodec: Sendable {
    /// The plugin whose requests this verb carries.
    associatedtype Plugin: GatePlugin

    /// The verb, matched case-insensitively: one or more visible ASCII characters.
    var verb: String { get }
    /// Decodes the arguments (the rest of the line after the verb and one space; empty when
    /// there are none).
    func decode(_ arguments: Substring) throws(RequestError) -> Plugin.Input
    /// Writes the reply to a request whose effect ran.
    func encode(_ output: Plugin.Output, _ info: RunInfo, into reply: inout LineReply)
    /// Writes the reply for any outcome. The default renders `GateOutcome/ran(_:_:)` with
    /// ``encode(_:_:into:)`` and the others with ``LineReply/appendStandard(_:)``.
    func encode(_ outcome: GateOutcome<Plugin.Output>, into reply: inout LineReply)
    /// Counters the server's `STATS` reports for this verb, in order.
    var counters: [PluginCounter] { get }
    /// Whether `CANCEL <key> <name>` names this verb's effects (by the plugin's name). The
    /// default is `true`; a verb whose effects finish at once says `false`, and `CANCEL` with
    /// its name is a usage error.
    var isCancellable: Bool { get }
}

extension LineCodec {
    public func encode(_ outcome: GateOutcome<Plugin.Output>, into reply: inout LineReply) {
        if case .ran(let output, let info) = outcome {
            encode(output, info, into: &reply)
        } else {
            reply.appendStandard(outcome)
        }
    }

    public var counters: [PluginCounter] { [] }

    public var isCancellable: Bool { true }
}

extension LineReply {
    /// The standard replies: `THROTTLED retry-after-ms=<n>` · `LIMITED policy=<stage> …` (see
    /// ``appendLimited(_:)``) · `SUPERSEDED` ·
    /// `CANCELLED` · `MISMATCH` · `ERR conflict` · `ERR busy` · `ERR internal` (an effect that
    /// failed) · `ERR shutting-down` · `ERR unavailable` (a shared store did not answer). A `GateOutcome/ran(_:_:)` outcome, which only the codec
    /// can render, becomes `OK`.
    public mutating func appendStandard<Output>(_ outcome: GateOutcome<Output>) {
        switch outcome {
        case .ran:
            append("OK")
        case .throttled(let retryAfter):
            append("THROTTLED retry-after-ms=")
            append(milliseconds: retryAfter)
        case .limited(let refusal):
            appendLimited(refusal)
        case .superseded:
            append("SUPERSEDED")
        case .cancelled:
            append("CANCELLED")
        case .mismatch:
            append("MISMATCH")
        case .conflict:
            append("ERR conflict")
        case .busy:
            append("ERR busy")
        case .failed:
            append("ERR internal")
        case .shuttingDown:
            append("ERR shutting-down")
        case .unavailable:
            append("ERR unavailable")
        }
    }

    /// Appends a limit's refusal, naming the refusing stage (the plugin's name for its own
    /// rate limit): `LIMITED policy=<stage> retry-after-ms=<n> limit=<n> remaining=0 reset-ms=<n>`
    /// for a rate stage (`retry-after-ms=-1` when the cost can never fit; `remaining=0`: what is
    /// left is less than the cost), `LIMITED policy=<stage> limit=<n>` for a concurrency stage,
    /// whose slot frees when a running effect ends.
    public mutating func appendLimited(_ refusal: LimitRefusal) {
        append("LIMITED policy=")
        append(refusal.stage)
        switch refusal.verdict {
        case .rate(let decision):
            append(" retry-after-ms=")
            if let retryAfter = decision.retryAfter { append(milliseconds: retryAfter) } else { append(-1) }
            append(" limit=")
            append(decision.limit)
            append(" remaining=0 reset-ms=")
            append(milliseconds: decision.resetAfter)
        case .concurrency(let limit, _, _):
            append(" limit=")
            append(limit)
        }
    }

    /// Appends ` limit=<n> remaining=<n> reset-ms=<n>`.
    public mutating func appendLimit(_ decision: RateLimitDecision) {
        append(" limit=")
        append(decision.limit)
        append(" remaining=")
        append(decision.remaining)
        append(" reset-ms=")
        append(milliseconds: decision.resetAfter)
    }
}
