import SluiceCore

/// A plugin: the domain side of one kind of event — the policy that governs it, the key its
/// state lives under, and the effect to run when the policy lets a request through.
///
/// A plugin knows nothing of wire formats: it takes a typed input and returns a typed output.
/// Fronts (the line protocol, HTTP, framework middleware) decode requests into inputs and render
/// the ``GateOutcome`` the ``Gate`` returns.
///
/// The gate decides synchronously where its caller is, under the lock of the key's shard; only
/// ``run(_:context:)`` is `async`, and it runs as a task on the key's loop, under the request's
/// effect ID and in its cancellation scope.
///
/// ```swift
/// struct Like: GatePlugin {
///     let name = "like"
///     let policy = GatePolicy.throttle(.buttonTap)  // SluiceButtonTap's preset: one a second
///     func key(for postID: String) -> String { postID }
///     func run(_ postID: String, context: EffectContext) async throws -> Int {
///         context.incrementTally()
///     }
/// }
/// ```
public protocol GatePlugin: Sendable {
    /// What a request carries.
    associatedtype Input: Sendable
    /// What ``run(_:context:)`` returns.
    associatedtype Output: Sendable

    /// A short lower-case name (`tap`, `pay`, `search`): the default effect ID of its requests,
    /// and the name metrics use.
    var name: String { get }
    /// The policy that decides about each request.
    var policy: GatePolicy { get }

    /// Limits decided after ``policy`` and before the effect runs, in order, each over its own
    /// key (a GCRA per account, a GCRA per client address, at most N in flight per account).
    /// A request runs only when every stage admits it; when one refuses, the stages before it
    /// give back exactly what this request took, and the outcome is ``GateOutcome/limited(_:)``
    /// naming the stage. A replay, a join, a mismatch or a conflict of an idempotent or
    /// single-flight plugin, and a request its policy refuses, reach no stage and spend nothing.
    /// A request held by a throttle or debounce is decided when it is held, and gives its part
    /// back if it is superseded or cancelled before it runs. Each stage keeps its keys in the
    /// shard of the request's key (``key(for:)``), in a table of its own an eighth the size of
    /// the plugin's budget. Empty by default.
    var limits: [LimitStage<Input>] { get }

    /// The key the policy's state is kept under (and whose loop decides). Keep it the full value
    /// (a user, an account, a search box): two requests share state exactly when their keys are
    /// equal.
    func key(for input: Input) -> String
    /// For ``GatePolicy/idempotent(_:)`` plugins, the record and the payload's fingerprint; for
    /// ``GatePolicy/singleFlight`` plugins, the record names the shared execution (`fingerprint`
    /// is ignored). The default uses the key as the record and no fingerprint.
    func identity(for input: Input) -> RequestIdentity
    /// For ``GatePolicy/rateLimit(_:)`` plugins and the rate stages of ``limits``, how many
    /// units the request spends. The default is 1.
    func cost(for input: Input) -> Int
    /// Runs the effect. Throw `CancellationError` (or let `context.sleep` throw it) when
    /// cancelled, until the effect commits.
    func run(_ input: Input, context: EffectContext) async throws -> Output
    /// For an effect that never suspends (it counts, records, answers from memory): runs it in
    /// place and returns its output, so that the gate starts no task and registers nothing for
    /// it. Return `nil`, having done nothing, to have the gate run ``run(_:context:)`` as a task
    /// instead; the default does. Used for requests that run at once (a throttle's leading run,
    /// a rate limit's allowed request, switch-latest and unrestricted plugins), never for
    /// idempotent or single-flight executions, which others may join. Nothing can cancel an
    /// effect run in place. It runs under the lock of the key's shard: it must not call into
    /// the gate other than through its `context` (another request could wait on this shard's
    /// lock while holding another's).
    func runImmediately(_ input: Input, context: EffectContext) throws -> Output?
    /// Whether an output counts as a failure for `IdempotencyOptions/cacheErrors` (a declined
    /// charge, say). The default is `false`.
    func isFailure(_ output: Output) -> Bool
}

extension GatePlugin {
    public func identity(for input: Input) -> RequestIdentity {
        RequestIdentity(record: key(for: input), fingerprint: "")
    }

    public func cost(for input: Input) -> Int { 1 }

    public var limits: [LimitStage<Input>] { [] }

    public func runImmediately(_ input: Input, context: EffectContext) throws -> Output? { nil }

    public func isFailure(_ output: Output) -> Bool { false }
}

/// The record and fingerprint of a request to an idempotent or single-flight plugin.
public struct RequestIdentity: Sendable, Hashable {
    /// The record (the full value, never a hash of it), e.g. the key and the idempotency key.
    public var record: String
    /// The payload's fingerprint: the same record with another fingerprint is a mismatch.
    public var fingerprint: String
    /// For idempotent plugins, whether this request joins a duplicate that is still running or
    /// is refused (``GateOutcome/conflict``); `nil` follows the plugin's options. A front can so
    /// choose per request (HTTP answers 409 by default where the line protocol joins).
    public var concurrent: IdempotencyOptions.Concurrent?

    /// Creates an identity.
    public init(record: String, fingerprint: String, concurrent: IdempotencyOptions.Concurrent? = nil) {
        self.record = record
        self.fingerprint = fingerprint
        self.concurrent = concurrent
    }
}
