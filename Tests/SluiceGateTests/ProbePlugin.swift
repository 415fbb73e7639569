import Sluice
import Synchronization

/// A request to a ``ProbePlugin``: the key, a payload, the fingerprint (for idempotent probes)
/// and the cost (for rate-limited ones).
struct Probe: Sendable, Hashable {
    var key: String
    var payload: String = ""
    var fingerprint: String = ""
    var cost: Int = 1
    /// For single-flight probes: the record the execution is shared under.
    var record: String?
}

/// An error an effect throws on purpose.
struct ProbeError: Error, Hashable {
    var code: Int
}

/// A plugin for gate tests: any policy, and an effect the test writes. It counts the effects
/// that started, ended and were cancelled.
struct ProbePlugin<Output: Sendable>: GatePlugin {
    let name: String
    let policy: GatePolicy
    let body: @Sendable (Probe, EffectContext) async throws -> Output
    let failure: @Sendable (Output) -> Bool
    let limits: [LimitStage<Probe>]
    let counts = ProbeCounts()

    init(
        _ name: String = "probe", policy: GatePolicy, limits: [LimitStage<Probe>] = [],
        failure: @escaping @Sendable (Output) -> Bool = { _ in false },
        _ body: @escaping @Sendable (Probe, EffectContext) async throws -> Output
    ) {
        self.name = name
        self.policy = policy
        self.limits = limits
        self.failure = failure
        self.body = body
    }

    func key(for input: Probe) -> String { input.key }

    func identity(for input: Probe) -> RequestIdentity {
        RequestIdentity(record: input.record ?? input.key + "/" + input.payload, fingerprint: input.fingerprint)
    }

    func cost(for input: Probe) -> Int { input.cost }

    func isFailure(_ output: Output) -> Bool { failure(output) }

    func run(_ input: Probe, context: EffectContext) async throws -> Output {
        counts.started.add(1, ordering: .relaxed)
        do {
            let output = try await body(input, context)
            counts.finished.add(1, ordering: .relaxed)
            return output
        } catch {
            if error is CancellationError { counts.cancelled.add(1, ordering: .relaxed) }
            throw error
        }
    }
}

/// What a ``ProbePlugin``'s effects did.
final class ProbeCounts: Sendable {
    let started = Atomic<Int>(0)
    let finished = Atomic<Int>(0)
    let cancelled = Atomic<Int>(0)

    var startedCount: Int { started.load(ordering: .relaxed) }
    var finishedCount: Int { finished.load(ordering: .relaxed) }
    var cancelledCount: Int { cancelled.load(ordering: .relaxed) }
}

/// An effect that sleeps `duration` on the gate's clock, then returns the payload.
func sleeping(_ duration: Duration) -> @Sendable (Probe, EffectContext) async throws -> String {
    { probe, context in
        try await context.sleep(for: duration)
        return probe.payload
    }
}

/// An effect that returns the payload at once.
let immediate: @Sendable (Probe, EffectContext) async throws -> String = { probe, _ in probe.payload }

extension GateOutcome {
    /// A short, comparable description of the outcome's case.
    var kind: String {
        switch self {
        case .ran(_, let info):
            switch info.source {
            case .executed: "ran"
            case .replayed: "replayed"
            case .joined: "joined"
            }
        case .failed: "failed"
        case .throttled: "throttled"
        case .limited: "limited"
        case .superseded: "superseded"
        case .cancelled(let reason): "cancelled(\(reason))"
        case .mismatch: "mismatch"
        case .conflict: "conflict"
        case .busy: "busy"
        case .shuttingDown: "shuttingDown"
        case .unavailable: "unavailable"
        }
    }
}
