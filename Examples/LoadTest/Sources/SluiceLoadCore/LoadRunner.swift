import SluiceCore
import SluiceLibevent
import SluiceLineProtocol
import Synchronization

/// One progress sample, reported once a second while a run sends.
public struct ProgressSample: Sendable, Hashable {
    /// Seconds since the run started sending.
    public var elapsedSeconds: Double
    /// Replies in the last interval, per second.
    public var repliesPerSecond: Double
    /// Failed or unexpected replies so far.
    public var errors: Int
    /// Requests sent and not answered.
    public var inFlight: Int

    /// `[  3s]  182345 req/s  errors=0  in-flight=128`
    public var line: String {
        "[\(pad(String(Int(elapsedSeconds.rounded())) + "s", 5))] \(pad(String(Int(repliesPerSecond.rounded())), 9)) req/s  errors=\(errors)  in-flight=\(inFlight)"
    }
}

/// Runs a load test: connects, sends, matches replies, and gathers the result.
public enum LoadRunner {
    /// Runs `configuration` against its server. `progress` is called about once a second while
    /// requests are outstanding.
    ///
    /// - Throws: ``LoadError`` when the loops cannot start or a connection cannot be opened;
    ///   failed checks are not errors (see ``LoadResult/passed``).
    public static func run(
        _ configuration: LoadConfiguration,
        progress: (@Sendable (ProgressSample) -> Void)? = nil
    ) async throws(LoadError) -> LoadResult {
        try configuration.validate()
        let group: SluiceLoopGroup
        do {
            group = try SluiceLoopGroup(loopCount: configuration.loops, namePrefix: "load")
        } catch {
            throw LoadError("cannot start the client loops: \(error.message)", input: "\(configuration.loops)")
        }
        defer { group.shutdownGracefully() }
        var seedSource = SplitMix64(seed: configuration.seed ^ 0x5EED)
        let nonce = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let shared = try LoadShared(configuration: configuration, nonce: nonce)
        let states = group.loops.map { LoopState(loop: $0, shared: shared, seed: seedSource.next()) }

        // STATS (HTTP: GET /metrics) before, on every instance; the echo baselines have neither.
        var probeNotes: [String] = []
        var instances: [InstanceStats] = []
        if !configuration.drivesEchoBaseline {
            for port in configuration.ports {
                let probe = await probe(configuration, port: port, on: group.loops[0], when: "before", notes: &probeNotes)
                if let unreachable = probe.unreachable {
                    throw LoadError("cannot connect to \(configuration.host):\(port): \(unreachable)", input: "")
                }
                instances.append(InstanceStats(port: port, before: probe.stats))
            }
        }

        for index in 0..<configuration.connections {
            let state = states[index % states.count]
            let port = configuration.port(forConnection: index)
            var failure: String?
            if configuration.http {
                failure = await HTTPLoadConnection.connect(index: index, port: port, state: state)
            } else {
                do {
                    _ = try await TCPClient.connect(host: configuration.host, port: port, on: state.loop) { _ in
                        LoadConnection(index: index, state: state)
                    }
                } catch {
                    failure = error.message
                }
            }
            if let failure {
                shared.finished.store(true, ordering: .relaxed)
                for state in states { _ = await state.loop.submit { state.finish() } }
                throw LoadError(
                    "cannot open connection \(index + 1) of \(configuration.connections) to \(configuration.host):\(port): \(failure)", input: "")
            }
        }

        let start = SluiceLoop.monotonicNow()
        if case .duration(let duration) = configuration.limit {
            shared.sendDeadline.store((start + duration).nanoseconds, ordering: .relaxed)
        }
        for state in states {
            state.loop.execute { state.start(at: start.nanoseconds) }
        }
        let ended = await waitForEnd(configuration: configuration, shared: shared, states: states, start: start, progress: progress)
        // STATS (HTTP: GET /metrics) after, on every instance probed before.
        for position in instances.indices {
            let probe = await probe(configuration, port: instances[position].port, on: group.loops[0], when: "after", notes: &probeNotes)
            instances[position].after = probe.stats
        }

        shared.finished.store(true, ordering: .relaxed)
        var stats = LatencyStats()
        var ledger = PaymentLedger()
        var outcome = LoadOutcome()
        var samples = probeNotes
        for state in states {
            let result = await state.loop.submit { state.finish() }
            stats.merge(result.stats)
            ledger.merge(result.ledger)
            outcome.add(result.outcome)
            samples.append(contentsOf: result.samples)
        }
        outcome.paySent = stats.sent(.pay)
        outcome.uniquePairs = ledger.uniquePairsSent
        outcome.chargedPairs = ledger.charges.count
        outcome.declinedPairs = ledger.declinedPairs.count
        outcome.conflictingPairs = ledger.conflictingPairs.count
        outcome.http = configuration.http
        outcome.instances = instances
        return LoadResult(
            configuration: configuration, elapsed: ended - start, stats: stats, ledger: ledger, outcome: outcome,
            checks: CorrectnessChecks.evaluate(outcome), samples: Array(samples.prefix(10)))
    }

    /// What one probe of an instance got: its counters, or `nil` when it did not answer (then,
    /// when it could not even be reached, why).
    private struct Probe {
        var stats: ServerStats?
        var unreachable: String?
    }

    /// Reads the counters of the instance on `port`: `STATS` on a connection of its own (one
    /// kept open through a long run would be closed by the server's idle timeout before the last
    /// probe), or `GET /metrics` over HTTP (a note says why, when it does not answer 200).
    private static func probe(
        _ configuration: LoadConfiguration, port: Int, on loop: SluiceLoop, when: String, notes: inout [String]
    ) async -> Probe {
        if configuration.http {
            let outcome = await HTTPProbe.send(.metrics, host: configuration.host, port: port, on: loop)
            switch outcome {
            case .answered(200, let body):
                return Probe(stats: ServerStats(metrics: body))
            case .answered(let status, let body):
                notes.append("GET /metrics on port \(port) \(when) the run: status \(status) \(body.prefix(120))")
                return Probe()
            case .unreachable(let reason):
                notes.append("GET /metrics on port \(port) \(when) the run: \(reason)")
                return Probe(unreachable: reason)
            case .failed(let reason):
                notes.append("GET /metrics on port \(port) \(when) the run: \(reason)")
                return Probe()
            }
        }
        let control: ControlConnection
        do {
            control = try await ControlConnection.connect(host: configuration.host, port: port, on: loop)
        } catch {
            return Probe(unreachable: error.message)
        }
        let stats = await control.stats()
        control.close()
        return Probe(stats: stats)
    }

    /// Waits until every request sent has its reply after sending stopped (or the drain timeout
    /// passed); reports progress each second. Returns when the last reply arrived.
    private static func waitForEnd(
        configuration: LoadConfiguration, shared: LoadShared, states: [LoopState], start: Instant,
        progress: (@Sendable (ProgressSample) -> Void)?
    ) async -> Instant {
        var deadline: Instant?
        if case .duration(let duration) = configuration.limit { deadline = start + duration }
        var stoppedAt: Instant?
        var synchronized = false
        var nextReport = start + .seconds(1)
        var lastReplies = 0
        var lastReportAt = start
        /// `settled`: replied, or abandoned (never to be answered).
        func totals() -> (sent: Int, settled: Int, replied: Int, errors: Int, open: Int) {
            states.reduce((0, 0, 0, 0, 0)) {
                let replied = $1.repliedCount.load(ordering: .relaxed)
                return ($0.0 + $1.sentCount.load(ordering: .relaxed), $0.1 + replied + $1.abandonedCount.load(ordering: .relaxed),
                 $0.2 + replied, $0.3 + $1.errorCount.load(ordering: .relaxed), $0.4 + $1.openConnections.load(ordering: .relaxed))
            }
        }
        while true {
            let now = SluiceLoop.monotonicNow()
            if let deadline, now >= deadline, !shared.stopSending.load(ordering: .relaxed) {
                for state in states { await state.loop.submit { state.sendEverythingDue() } }
                shared.stopSending.store(true, ordering: .relaxed)
            }
            if shared.stopSending.load(ordering: .relaxed) {
                if stoppedAt == nil { stoppedAt = now }
                if !synchronized {
                    // A loop may be between claiming a request and counting it: once each loop
                    // has run one more job, `sent` is final.
                    for state in states { await state.loop.submit {} }
                    synchronized = true
                }
            }
            var current = totals()
            if current.open == 0 && !shared.stopSending.load(ordering: .relaxed) {
                shared.stopSending.store(true, ordering: .relaxed)
                continue
            }
            if synchronized {
                current = totals()
                if current.settled >= current.sent { return SluiceLoop.monotonicNow() }
                if current.open == 0 { return now }
                if let stoppedAt, now - stoppedAt > configuration.drainTimeout { return now }
            }
            if now >= nextReport, let progress {
                let seconds = Double((now - lastReportAt).nanosecondsClamped) / 1e9
                progress(
                    ProgressSample(
                        elapsedSeconds: Double((now - start).nanosecondsClamped) / 1e9,
                        repliesPerSecond: Double(current.replied - lastReplies) / max(seconds, 1e-9),
                        errors: current.errors, inFlight: current.sent - current.settled))
                lastReplies = current.replied
                lastReportAt = now
                nextReport = nextReport + .seconds(1)
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }
}

extension LoadOutcome {
    /// Adds another loop's tallies (the fields loops count).
    mutating func add(_ other: LoadOutcome) {
        sent += other.sent
        replies += other.replies
        unmatchedReplies += other.unmatchedReplies
        missingReplies += other.missingReplies
        connectionErrors += other.connectionErrors
        errorReplies += other.errorReplies
        busyReplies += other.busyReplies
        unexpectedReplies += other.unexpectedReplies
        badReplies += other.badReplies
        connectionsClosedEarly += other.connectionsClosedEarly
        reconnects += other.reconnects
        httpStatuses.merge(other.httpStatuses, uniquingKeysWith: +)
    }
}

private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}
