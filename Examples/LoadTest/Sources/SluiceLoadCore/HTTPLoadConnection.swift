import DequeModule
import SluiceCore
import SluiceLibevent
import Synchronization

/// One load connection of the HTTP mode (`--http`): the mix's requests over one HTTP/1.1
/// keep-alive connection to `sluice-echo`'s HTTP front, responses matched to requests in order,
/// each judged by ``HTTPReplyJudgement``. All methods run on its loop's thread.
///
/// At most `--depth` requests are on the wire at once (1 by default in HTTP mode: one request,
/// its response, the next request). A depth above 1 pipelines, which HTTP/1.1 allows: the server
/// answers in order, so responses are still matched first in, first out; the server handles
/// them one at a time, so pipelining saves round trips, not server work. In open loop
/// (`--rate`), a request whose time has come while the pipeline is full waits in a backlog and
/// its latency still counts from its intended send time.
///
/// After a response with `Connection: close` the connection opens a new one and goes on
/// (requests pipelined behind that response are lost: counted as missing). A server closing an
/// idle connection (nothing outstanding) is allowed too. Losing the connection with requests
/// outstanding, a malformed response, or failing to reconnect gives the connection up.
final class HTTPLoadConnection: HTTPClientHandler, LoadClient, @unchecked Sendable {
    // @unchecked Sendable: every `var` is touched on `state.loop`'s thread only (the transport's
    // callbacks, the loop's ticker and jobs queued there); the reference crosses threads only to
    // be created on that loop.

    /// A request claimed from the run's budget: on the wire, or waiting in the backlog.
    struct Request {
        var verb: Verb
        /// The (intended) send time, ns on the monotonic clock.
        var start: Int64
        /// TAP, PAY, SEARCH: the key number.
        var key: UInt64
        /// PAY: the pair number; SEARCH: the query number.
        var tag: UInt64
    }

    /// What every response is parsed with: heads up to 32 KiB, bodies up to 4 MiB (a large
    /// `/metrics` page fits), so a connection buffers at most about 4 MiB.
    static let parser = HTTPResponseParser()

    let index: Int
    /// The port of the instance this connection drives (and reconnects to).
    private let port: Int
    private let state: LoopState
    private let shared: LoadShared
    private var encoder: HTTPRequestEncoder
    private var transport: HTTPClientConnection?
    /// Whether `transport` is connected.
    private var connected = false
    /// Requests written, in order, awaiting their responses.
    private var onTheWire = Deque<Request>()
    /// Open loop: requests due and claimed, waiting for room on the wire.
    private var backlog = Deque<Request>()
    private var searchNumber: UInt64 = 0
    /// Open loop: when the next request is due.
    var nextIntendedSend: Int64 = 0
    /// Set once the connection opened for the first time (it then counts as open).
    private var everOpened = false
    /// Set once the connection is given up or the run closed it: no more reconnects.
    private var retired = false
    /// Whether the report already has a line about requests lost behind `Connection: close`.
    private var notedPipelineLoss = false
    /// Until the first connection opens: where to say whether it did (`nil`) or why not.
    private var reportFirstOpen: (@Sendable (String?) -> Void)?

    private init(index: Int, port: Int, state: LoopState) {
        self.index = index
        self.port = port
        self.state = state
        self.shared = state.shared
        let configuration = state.shared.configuration
        self.encoder = HTTPRequestEncoder(
            host: configuration.host, port: port,
            keyPrefix: String(decoding: state.shared.keyPrefix, as: UTF8.self),
            idemPrefix: String(decoding: state.shared.idemPrefix, as: UTF8.self), echoBody: state.shared.payload)
    }

    /// Opens connection `index` to `port` on `state`'s loop. Returns once it is connected (it is
    /// then one of `state.connections`), or why it could not be.
    static func connect(index: Int, port: Int, state: LoopState) async -> String? {
        await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            state.loop.execute {
                let connection = HTTPLoadConnection(index: index, port: port, state: state)
                connection.reportFirstOpen = { continuation.resume(returning: $0) }
                connection.open()
            }
        }
    }

    /// Requests claimed and not answered: on the wire or in the backlog.
    var outstanding: Int { onTheWire.count + backlog.count }

    /// Ends the connection (the run is over); what is outstanding is the runner's to count.
    func close() {
        retired = true
        transport?.close()
    }

    // MARK: Sending

    func startClosedLoop() {
        pump()
    }

    func sendDue(now: Int64, interval: Int64) {
        guard !retired else { return }
        let deadline = shared.sendDeadline.load(ordering: .relaxed)
        while nextIntendedSend <= now && nextIntendedSend < deadline {
            guard let request = claim(start: nextIntendedSend) else { return }
            backlog.append(request)
            nextIntendedSend += interval
        }
        pump()
    }

    /// Writes requests while the wire has room: the backlog's first (open loop), or new ones
    /// (closed loop).
    private func pump() {
        guard connected, let transport else { return }
        let depth = shared.configuration.depth
        let closedLoop = shared.configuration.rate == nil
        while onTheWire.count < depth {
            let request: Request
            if let waiting = backlog.popFirst() {
                request = waiting
            } else if closedLoop, let fresh = claim(start: SluiceLoop.monotonicNow().nanoseconds) {
                request = fresh
            } else {
                return
            }
            encoder.encode(Self.httpRequest(request))
            onTheWire.append(request)
            guard encoder.bytes.withUnsafeBytes({ transport.write($0) }) else { return }
        }
    }

    /// Claims one request from the run's budget and chooses it; counted as sent from here.
    private func claim(start: Int64) -> Request? {
        guard shared.claim() else { return nil }
        let verb = shared.configuration.mix.pick(using: &state.random)
        var request = Request(verb: verb, start: start, key: 0, tag: 0)
        switch verb {
        case .echo:
            break
        case .tap:
            request.key = shared.sampler.next(using: &state.random)
        case .pay:
            let payment = state.nextPayment(connection: index)
            request.key = payment.key
            request.tag = payment.pair
        case .search:
            searchNumber += 1
            request.key = shared.sampler.next(using: &state.random)
            request.tag = searchNumber
        }
        state.stats.recordSent(verb)
        state.sentCount.add(1, ordering: .relaxed)
        return request
    }

    /// The route a request takes.
    static func httpRequest(_ request: Request) -> HTTPRequest {
        switch request.verb {
        case .echo: .echo
        case .tap: .tap(key: request.key)
        case .pay: .pay(key: request.key, pair: request.tag, amount: PaymentRecord.amount(ofPair: request.tag))
        case .search: .search(key: request.key, tag: request.tag)
        }
    }

    /// What the response to `request` must show.
    private func expectation(_ request: Request) -> HTTPReplyJudgement.Expectation {
        switch request.verb {
        case .echo: .echo(body: shared.payload)
        case .tap: .tap
        case .pay: .pay(amount: PaymentRecord.amount(ofPair: request.tag))
        case .search: .search(query: HTTPRequestEncoder.searchQuery(tag: request.tag))
        }
    }

    // MARK: Connecting

    private func open() {
        let configuration = shared.configuration
        connected = false
        transport = HTTPClientConnection.open(
            host: configuration.host, port: port, on: state.loop, parser: Self.parser, handler: self)
        guard transport == nil else { return }
        if everOpened {
            lost(reason: "cannot create a bufferevent")
        } else {
            retired = true
            reportFirstOpen?("cannot create a bufferevent")
            reportFirstOpen = nil
        }
    }

    func httpConnectionOpened(_ connection: HTTPClientConnection) {
        guard connection === transport else { return }
        connected = true
        if everOpened {
            pump()
            return
        }
        everOpened = true
        state.connections.append(self)
        state.openConnections.add(1, ordering: .relaxed)
        reportFirstOpen?(nil)
        reportFirstOpen = nil
    }

    /// Opens a new connection in place of one the server closes, unless nothing is left to send.
    private func reopen() {
        if shared.stopSending.load(ordering: .relaxed) && backlog.isEmpty {
            return
        }
        state.outcome.reconnects += 1
        open()
    }

    func httpConnectionClosed(_ connection: HTTPClientConnection, reason: HTTPClientConnection.CloseReason) {
        // A transport replaced after `Connection: close` reports its close too.
        guard connection === transport else { return }
        transport = nil
        let wasConnected = connected
        connected = false
        if !everOpened {
            retired = true
            reportFirstOpen?(reason.description)
            reportFirstOpen = nil
            return
        }
        if retired || shared.finished.load(ordering: .relaxed) { return }
        switch reason {
        case .endOfStream where onTheWire.isEmpty && wasConnected:
            // HTTP lets a server close a keep-alive connection that has nothing outstanding.
            reopen()
        case .malformed(let error):
            state.outcome.unexpectedReplies += 1
            note("malformed response on connection \(index): \(error)")
            lost(reason: "\(reason)")
        default:
            lost(reason: "\(reason)")
        }
    }

    /// Gives the connection up: what it had outstanding will never be answered.
    private func lost(reason: String) {
        let unanswered = outstanding
        retired = true
        state.outcome.connectionsClosedEarly += 1
        state.outcome.missingReplies += unanswered
        state.abandonedCount.add(unanswered, ordering: .relaxed)
        state.errorCount.add(1, ordering: .relaxed)
        note("connection \(index) lost with \(unanswered) requests outstanding: \(reason)")
        onTheWire.removeAll()
        backlog.removeAll()
        if everOpened { state.openConnections.subtract(1, ordering: .relaxed) }
        transport?.close()
    }

    // MARK: Responses

    func httpConnection(_ connection: HTTPClientConnection, received response: HTTPResponseView) {
        let now = SluiceLoop.monotonicNow().nanoseconds
        state.countStatus(response.status)
        guard let request = onTheWire.popFirst() else {
            state.outcome.unmatchedReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            note("a response with no request outstanding on connection \(index): status \(response.status)")
            lost(reason: "responses out of step with requests")
            return
        }
        let judgement = HTTPReplyJudgement.judge(response, expecting: expectation(request))
        state.stats.record(request.verb, judgement.kind, latencyNanoseconds: now - request.start)
        state.repliedCount.add(1, ordering: .relaxed)
        switch judgement.verdict {
        case .accepted:
            if let charge = judgement.charge {
                state.ledger.recordCharge(pair: request.tag, chargeID: charge)
            } else if judgement.kind == .declined || judgement.kind == .declinedReplayed {
                state.ledger.recordDecline(pair: request.tag)
            }
        case .busy:
            state.outcome.busyReplies += 1
        case .errorStatus:
            state.outcome.errorReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            note(response, "error status to \(request.verb.wireName)")
        case .unexpected(let why):
            state.outcome.unexpectedReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            note(response, "unexpected (\(why))")
        case .mismatched(let why):
            if let charge = judgement.charge { state.ledger.recordCharge(pair: request.tag, chargeID: charge) }
            state.outcome.badReplies += 1
            state.errorCount.add(1, ordering: .relaxed)
            note(response, "response differs from \(request.verb.wireName) (\(why))")
        }
        if response.closesConnection {
            closeAnnounced()
            return
        }
        pump()
    }

    /// The server closes after the response just read: requests pipelined behind it will not
    /// be answered; a new connection carries on.
    private func closeAnnounced() {
        let old = transport
        transport = nil
        connected = false
        if !onTheWire.isEmpty {
            state.outcome.missingReplies += onTheWire.count
            state.abandonedCount.add(onTheWire.count, ordering: .relaxed)
            state.errorCount.add(1, ordering: .relaxed)
            if !notedPipelineLoss {
                notedPipelineLoss = true
                note("\(onTheWire.count) requests pipelined behind a Connection: close response on connection \(index) were not answered")
            }
            onTheWire.removeAll()
        }
        old?.close()
        reopen()
    }

    /// Keeps a line for the report (at most 10).
    private func note(_ text: String) {
        if state.samples.count < 10 { state.samples.append(text) }
    }

    /// Keeps a response for the report: its status, reason and the start of its body.
    private func note(_ response: HTTPResponseView, _ what: String) {
        guard state.samples.count < 10 else { return }
        let reason = String(decoding: response.reason, as: UTF8.self)
        state.samples.append("\(what): \(response.status) \(reason) \(HTTPResponseError.excerpt(response.body))")
    }
}
