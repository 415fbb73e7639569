import Metrics
import SluiceCore
import SluiceLibevent
import Synchronization

/// A plugin: a verb of the line protocol, the policy that governs it, and the effect it runs
/// when the policy lets a request through.
///
/// The gate decides synchronously on the key's loop (DESIGN §1); only ``handle(_:context:)`` is
/// `async`, and it runs as a task on that loop, inside the request's cancellation scope.
///
/// ```swift
/// struct Hello: GatePlugin {
///     let name = "hello"
///     let verb = "HELLO"
///     let policy = GatePolicy.throttle(.buttonTap)
///     func parse(_ arguments: Substring) throws(RequestError) -> String {
///         guard let key = RequestLine.key(arguments) else { throw .usage }
///         return key
///     }
///     func key(for input: String) -> String { input }
///     func handle(_ input: String, context: EffectContext) async throws -> String { "hi \(input)" }
///     func reply(for output: String) -> PluginReply { PluginReply("OK \(output)") }
/// }
/// ```
public protocol GatePlugin: Sendable {
    /// What ``parse(_:)`` makes of a request's arguments.
    associatedtype Input: Sendable
    /// What ``handle(_:context:)`` returns.
    associatedtype Output: Sendable

    /// A lower-case name; also the effect ID its effects are registered under, which `CANCEL`
    /// names (`tap`, `pay`, `search`).
    var name: String { get }
    /// The verb it answers, upper case (matched case-insensitively).
    var verb: String { get }
    /// The policy that decides about each request.
    var policy: GatePolicy { get }

    /// Parses the arguments (the rest of the line after the verb, without the separating
    /// space; empty when there are none).
    func parse(_ arguments: Substring) throws(RequestError) -> Input
    /// The key the policy's state is kept under (and the loop that owns it).
    func key(for input: Input) -> String
    /// For ``GatePolicy/idempotent(_:)`` plugins: the record and the payload fingerprint. The
    /// default uses the key as the record and no fingerprint.
    func idempotency(for input: Input) -> IdempotencyIdentity
    /// Runs the effect. Throw `CancellationError` (or let `context.sleep` throw it) when
    /// cancelled.
    func handle(_ input: Input, context: EffectContext) async throws -> Output
    /// The reply line's status and details for an output, e.g. `OK tap=3`.
    func reply(for output: Output) -> PluginReply
    /// Counters this plugin reports in `STATS`, in order.
    var counters: [PluginCounter] { get }
    /// Whether `CANCEL <key> <name>` names this plugin's effects. The default is `true`; a
    /// plugin whose effects finish at once (a tap) says `false`, and `CANCEL` with its name is a
    /// usage error.
    var isCancellable: Bool { get }
}

extension GatePlugin {
    public func idempotency(for input: Input) -> IdempotencyIdentity {
        IdempotencyIdentity(record: key(for: input), fingerprint: "")
    }

    public var counters: [PluginCounter] { [] }

    public var isCancellable: Bool { true }
}

/// Which policy governs a plugin's requests.
public enum GatePolicy: Sendable, Hashable {
    /// At most one run per window per key; other requests reply `THROTTLED retry-after-ms=<n>`
    /// (or wait for the trailing run when the options say so).
    case throttle(ThrottleOptions)
    /// Run a key's latest request once it has been quiet; a replaced request replies
    /// `SUPERSEDED`. With `cancelInFlight`, a newer request also cancels the key's running
    /// effect (switch-latest), which replies `CANCELLED`.
    case debounce(DebounceOptions, cancelInFlight: Bool)
    /// Run once per record; duplicates join the running execution or get the stored reply with
    /// ` replayed=true`; a different fingerprint replies `MISMATCH`. Effects live in the key's
    /// scope, so a client that disconnects does not cancel them.
    case idempotent(IdempotencyOptions)
    /// Run every request.
    case unrestricted
}

/// The record and fingerprint of an idempotent request.
public struct IdempotencyIdentity: Sendable, Hashable {
    /// The record (the full value, never a hash of it), e.g. the key and the idempotency key.
    public var record: String
    /// The payload's fingerprint: the same record with another fingerprint is a mismatch.
    public var fingerprint: String

    /// Creates an identity.
    public init(record: String, fingerprint: String) {
        self.record = record
        self.fingerprint = fingerprint
    }
}

/// The status and details of a reply line (the server adds the request id and the LF).
public struct PluginReply: Sendable, Hashable, ExpressibleByStringLiteral {
    /// E.g. `OK charge=ch_1` or `DECLINED reason=amount-limit`.
    public var text: String
    /// Whether the outcome is an error for ``IdempotencyOptions/cacheErrors``.
    public var isError: Bool

    /// A reply with the given text.
    public init(_ text: String, isError: Bool = false) {
        self.text = text
        self.isError = isError
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }
}

/// A request the plugin could not parse: replied as `<id> ERR usage <VERB>` or
/// `<id> ERR <code>`.
public struct RequestError: Error, Sendable, Hashable {
    /// The code after `ERR`, or `nil` for a usage error.
    public let code: String?
    /// A human-readable explanation, for logs.
    public let message: String

    /// The arguments do not fit the verb's usage: `ERR usage <VERB>`.
    public static let usage = RequestError(code: nil, message: "usage")

    /// A specific error: `ERR <code>` (lower-case, dash-separated, e.g. `bad-amount`).
    public static func invalid(_ code: String, message: String) -> RequestError {
        RequestError(code: code, message: message)
    }
}

/// A counter a plugin reports in `STATS` as `<name>=<value>`; also exported to swift-metrics as
/// `sluice_<name>_total`.
public final class PluginCounter: Sendable {
    /// The name in `STATS`.
    public let name: String
    private let value = Atomic<Int>(0)
    private let metric: Counter

    /// A counter starting at 0.
    public init(_ name: String) {
        self.name = name
        self.metric = Counter(label: "sluice_\(name)_total")
    }

    /// Adds `amount`.
    public func increment(by amount: Int = 1) {
        value.add(amount, ordering: .relaxed)
        metric.increment(by: amount)
    }

    /// The current value.
    public var current: Int { value.load(ordering: .relaxed) }
}
