import Sluice
import SluiceCore
import SluiceLibevent

/// Chains decided by Redis: the stages a request's key puts in one hash slot are decided by one
/// script, all or nothing; stages in different slots one slot after another, a refusal giving
/// back what the earlier slots took (``SharedStore/admitChain(_:cost:owner:on:_:)``).
extension RedisStore {
    /// A stage's key, `<prefix>:{<key>}:<scope>:<kind>`: the hash tag is the stage's key alone,
    /// so the stages of one request counted under the same key (an account's rate and its
    /// concurrency) share a hash slot and are decided in one script.
    func stageKey(_ stage: StoreStage) -> [UInt8] {
        var bytes = Array(epochKey.dropLast("epoch".utf8.count))
        bytes.append(UInt8(ascii: "{"))
        bytes.append(contentsOf: stage.key.utf8)
        bytes.append(contentsOf: "}:".utf8)
        bytes.append(contentsOf: stage.scope.utf8)
        bytes.append(UInt8(ascii: ":"))
        switch stage.limit {
        case .throttle: bytes.append(UInt8(ascii: "t"))
        case .rate: bytes.append(UInt8(ascii: "g"))
        case .concurrency: bytes.append(UInt8(ascii: "c"))
        }
        return bytes
    }

    /// The Redis Cluster hash slot of `stage`'s key.
    public func place(of stage: StoreStage) -> Int? {
        RedisHashSlot.slot(of: stageKey(stage))
    }

    public func admit(
        _ stages: [StoreStage], cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void
    ) {
        var arguments: [[UInt8]] = [Self.argument(max(0, cost)), Array(owner.utf8)]
        for stage in stages { arguments += Self.admitArguments(stage) }
        run(RedisChainScripts.admit, keys: stages.map(stageKey), arguments: arguments, on: caller, completion) { reply in
            Self.admission(reply, stages: stages)
        }
    }

    /// The admit script's four arguments for `stage`: its kind, two parameters, and shadow mode.
    static func admitArguments(_ stage: StoreStage) -> [[UInt8]] {
        var arguments: [[UInt8]]
        switch stage.limit {
        case .throttle(let interval):
            arguments = [Array("t".utf8), argument(microseconds(interval)), Array("0".utf8)]
        case .rate(let options):
            let (emission, tolerance) = gcraArguments(options)
            arguments = [Array("g".utf8), emission, tolerance]
        case .concurrency(let limit, let lease):
            arguments = [Array("c".utf8), argument(limit), argument(milliseconds(lease))]
        }
        arguments.append(Array((stage.shadow ? "1" : "0").utf8))
        return arguments
    }

    /// Decides one stage, a plugin's own throttle or rate limit, under `key` (the plugin's
    /// key: `<prefix>:{<plugin>:<key>}:<kind>`) with the admit script: the verdict, whether it
    /// admits or refuses.
    func decide(
        _ stage: StoreStage, key: [UInt8], cost: Int, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreVerdict, StoreError>) -> Void
    ) {
        let arguments = [Self.argument(max(0, cost)), []] + Self.admitArguments(stage)
        run(RedisChainScripts.admit, keys: [key], arguments: arguments, on: caller, completion) { reply in
            Self.admission(reply, stages: [stage])?.verdicts.first
        }
    }

    /// The admit script's reply as an admission, or `nil` when it is not one.
    static func admission(_ reply: RedisReply, stages: [StoreStage]) -> StoreAdmission? {
        guard let fields = reply.array, fields.count == 3, let refusing = fields[0].int, let answers = fields[1].array,
            let shadows = fields[2].array, refusing >= 0, refusing <= stages.count,
            answers.count == (refusing == 0 ? stages.count : refusing)
        else { return nil }
        var admission = StoreAdmission(result: refusing == 0 ? .admitted : .refused(stage: refusing - 1), verdicts: [])
        for (index, answer) in answers.enumerated() {
            guard let values = answer.array?.compactMap(\.int), let allowed = values.first else { return nil }
            let verdict: StoreVerdict
            switch (stages[index].limit, values.count) {
            case (.throttle, 3):
                verdict = .throttle(wait: allowed == 1 ? nil : .microseconds(max(1, values[1])), windowStart: Int64(values[2]))
            case (.rate(let options), 4):
                verdict = .stage(
                    .rate(
                        RateLimitDecision(
                            allowed: allowed == 1, limit: options.limit, remaining: values[1],
                            retryAfter: values[2] >= 0 && allowed != 1 ? .microseconds(values[2]) : nil,
                            resetAfter: .microseconds(max(0, values[3])))))
            case (.concurrency(let limit, _), 2):
                verdict = .stage(.concurrency(limit: limit, inFlight: values[1], allowed: allowed == 1))
            default:
                return nil
            }
            admission.verdicts.append(verdict)
            if allowed == 1, refusing == 0 { admission.hold.insert(index) }
        }
        for shadow in shadows {
            guard let index = shadow.int, index >= 0, index < stages.count else { return nil }
            admission.shadowRefusals.append(index)
        }
        return admission
    }

    public func giveBack(
        _ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        var keys: [[UInt8]] = []
        var arguments: [[UInt8]] = [Self.argument(max(0, cost)), Array(owner.utf8)]
        for (index, stage) in stages.enumerated() where admission.hold.contains(index) {
            switch stage.limit {
            case .throttle:
                guard let start = admission.windowStart(of: index) else { continue }
                arguments += [Array("t".utf8), Self.argument(start)]
            case .rate(let options):
                arguments += [Array("g".utf8), Self.gcraArguments(options).emission]
            case .concurrency:
                arguments += [Array("c".utf8), Array("0".utf8)]
            }
            keys.append(stageKey(stage))
        }
        guard !keys.isEmpty else {
            caller.execute { completion(.success(())) }
            return
        }
        run(RedisChainScripts.giveBack, keys: keys, arguments: arguments, on: caller, completion) { reply in
            reply.int == 1 ? () : nil
        }
    }

    public func renewSlots(
        _ stages: [StoreStage], owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        var keys: [[UInt8]] = []
        var arguments: [[UInt8]] = [Array(owner.utf8)]
        for stage in stages {
            guard case .concurrency(_, let lease) = stage.limit else { continue }
            keys.append(stageKey(stage))
            arguments.append(Self.argument(Self.milliseconds(lease)))
        }
        guard !keys.isEmpty else {
            caller.execute { completion(.success(0)) }
            return
        }
        run(RedisChainScripts.renewSlots, keys: keys, arguments: arguments, on: caller, completion) { $0.int }
    }
}
