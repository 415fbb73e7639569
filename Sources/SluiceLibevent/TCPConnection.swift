import CLibevent
import SluiceCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One TCP connection on its loop: a bounded byte stream.
///
/// It reads the socket itself (one `read` per readable event, into the loop's scratch buffer,
/// so a connection whose frames arrive whole holds no input memory between reads), hands the
/// bytes to its ``TCPConnectionHandler`` and keeps only what the handler left. Writes made while
/// the handler works collect in the loop's staging buffer and go out with one `write` when it
/// returns; only what the socket does not take stays with the connection. Its bounds:
///
/// - output: past ``TCPConfiguration/outputHighWatermark`` unsent bytes it stops reading, and
///   reads again at the low watermark (a peer that does not read cannot make it buffer more);
/// - the process's budget: every connection reports the buffer memory it holds to its
///   ``ConnectionAccounting``; while the total is over the budget, the connections holding
///   more than a little (16 KiB) stop reading, so that the clients that fill it wait
///   and the others are still served;
/// - turns: a connection with more to do than one turn (its handler yielded, or its read
///   filled the read buffer) waits in the loop's queue of busy connections, served a slice of
///   time per pass after the sockets that became ready, so it delays the others by no more
///   than that slice;
/// - time: a frame the handler times (``timeFrame(_:restart:)``) must complete in time; a
///   connection that sends nothing, or takes none of its pending output, for the idle timeout
///   is closed.
///
/// Closing after a last answer (``closeAfterFlush()``) shuts the socket's sending side once the
/// output is written and reads what the peer still sends for up to two seconds before it
/// closes, so that closing never resets a connection whose peer has not yet read that answer.
///
/// All methods must be called on ``loop``'s thread, except ``write(_:)-(String)`` and
/// ``close()``, which hop there when called from elsewhere.
public final class TCPConnection: LoopResource, CustomStringConvertible, @unchecked Sendable {
    // @unchecked Sendable: the mutable state (all of it in `state`) is touched on `loop`'s
    // thread only — the loop-only methods assert it, and the two methods that may be called
    // elsewhere (`write(String)`, `close()`) hop to the loop first.

    /// Why a connection closed.
    public enum CloseReason: Sendable, Hashable {
        /// The peer closed its side.
        case endOfStream
        /// A socket error (errno).
        case error(Int32)
        /// Nothing arrived, or none of the output was taken, for the configured idle timeout.
        case idleTimeout
        /// A frame (a line, an HTTP head or body) did not complete within its timeout.
        case frameTimeout
        /// ``close()`` or ``closeAfterFlush()`` was called.
        case closedLocally
        /// The loop shut down.
        case shutdown
    }

    /// The loop that owns this connection.
    public let loop: SluiceLoop
    /// A process-unique id (per loop, mixed with the loop's index by the server).
    public let id: UInt64
    /// The peer's address, e.g. `127.0.0.1:53422`.
    public let remoteAddress: String
    /// The configuration it was opened with.
    public let configuration: TCPConfiguration

    /// Everything that changes, behind a pointer: a class's stored `var` pays a dynamic
    /// exclusivity check on every access, and the hot path touches several per request.
    private let state: UnsafeMutablePointer<State>
    private let accounting: ConnectionAccounting?
    private let onClose: (TCPConnection) -> Void

    /// How long a closing connection reads (and drops) what its peer still sends.
    static let lingerDuration: Duration = .seconds(2)
    /// How many bytes a closing connection reads and drops before it closes anyway.
    static let lingerBytes = 1 << 20
    /// The most one `read` takes.
    static let readSize = 64 << 10

    private struct State {
        var socket: Int32
        var handler: (any TCPConnectionHandler)?
        var readEvent: OpaquePointer?
        var writeEvent: OpaquePointer?
        var timerEvent: OpaquePointer?
        /// Bytes read and left by the handler.
        var input = ByteBuffer()
        /// Bytes written and not yet taken by the socket.
        var output = ByteBuffer()
        var open = true
        /// The handler is being handed bytes: writes go to the loop's staging buffer.
        var offering = false
        /// Whether `readEvent` is added.
        var readEnabled = false
        /// Whether `writeEvent` is added.
        var writeEnabled = false
        var inputEnded = false
        var pausedByHandler = false
        var pausedForBackpressure = false
        var pausedForBudget = false
        /// The handler yielded its turn; the rest of its input waits for the loop's next pass.
        var pausedForTurn = false
        /// A job that hands over input left when reading resumed is queued.
        var resumeQueued = false
        /// The input is at its cap and the handler consumed none of it.
        var inputFull = false
        /// ``closeAfterFlush()`` was called: nothing more is handed over, and the connection
        /// closes once its output is written.
        var closeWhenFlushed = false
        var closeReason: CloseReason?
        /// The output is written and the sending side shut: reading and dropping until the
        /// peer closes or the linger ends.
        var lingering = false
        var lingerBytes = 0
        var lingerUntil: Instant = .zero
        /// The handler has requests in flight: silence from the peer is not idleness.
        var awaitingReplies = false
        /// Buffer bytes last added to the accounting's total.
        var reportedBytes = 0
        /// The timed frame: its timeout and when it began (nil: none, or paused).
        var frameTimeout: Duration?
        var frameSince: Instant?
        /// When the last bytes were read, and when the socket last took output.
        var lastRead: Instant = .zero
        var lastWritten: Instant = .zero
        /// The instant the timer event is armed for, if it is.
        var timerArmedAt: Instant?
    }

    /// Whether the connection is open (loop thread only).
    public var isOpen: Bool { state.pointee.open }

    init(
        loop: SluiceLoop,
        id: UInt64,
        socket: Int32,
        remoteAddress: String,
        configuration: TCPConfiguration,
        accounting: ConnectionAccounting? = nil,
        onClose: @escaping (TCPConnection) -> Void
    ) throws(SluiceError) {
        loop.assertInEventLoop()
        self.loop = loop
        self.id = id
        self.remoteAddress = remoteAddress
        self.configuration = configuration
        self.onClose = onClose
        self.accounting = accounting
        Self.setConnectionOptions(socket, unsentLimit: configuration.socketUnsentLimit)
        evutil_make_socket_nonblocking(socket)
        evutil_make_socket_closeonexec(socket)
        self.state = .allocate(capacity: 1)
        state.initialize(to: State(socket: socket))
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let read = event_new(loop.base, socket, Int16(EV_READ | EV_PERSIST), tcpConnectionReadCallback, context),
            let write = event_new(loop.base, socket, Int16(EV_WRITE | EV_PERSIST), tcpConnectionWriteCallback, context)
        else {
            systemClose(socket)
            state.deinitialize(count: 1)
            state.deallocate()
            throw SluiceError(code: .baseCreationFailed, message: "event_new failed for a connection", value: remoteAddress)
        }
        state.pointee.readEvent = read
        state.pointee.writeEvent = write
    }

    /// The options every connection's socket gets, accepted or opened: `TCP_NODELAY` (an answer
    /// is one small write and must not wait for an ACK), `TCP_NOTSENT_LOWAT` at
    /// ``TCPConfiguration/socketUnsentLimit`` (a peer that does not read cannot park megabytes
    /// of answers in the kernel's send buffer), and on Darwin `SO_NOSIGPIPE`, because Darwin
    /// sends SIGPIPE to the process rather than to the writing thread, so the loop threads'
    /// blocked mask does not cover it there.
    private static func setConnectionOptions(_ socket: Int32, unsentLimit: Int?) {
        var one: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let unsentLimit {
            // The kernel takes no more once this much is unsent: output then waits in the
            // connection's buffer, where the high watermark and the budget see it.
            var limit = Int32(clamping: unsentLimit)
            setsockopt(socket, Int32(IPPROTO_TCP), TCP_NOTSENT_LOWAT, &limit, socklen_t(MemoryLayout<Int32>.size))
        }
        #if canImport(Darwin)
        setsockopt(socket, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    deinit {
        state.pointee.input.release()
        state.pointee.output.release()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    public var description: String { "TCPConnection(\(id), \(remoteAddress))" }

    /// Starts reading and tells the handler the connection is open.
    func start(handler: any TCPConnectionHandler) {
        guard isOpen else { return }
        state.pointee.handler = handler
        let now = loop.now
        state.pointee.lastRead = now
        state.pointee.lastWritten = now
        loop.registerForShutdown(self)
        handler.connectionOpened(self)
        guard isOpen else { return }
        updateReading()
        armTimerIfNeeded()
    }

    // MARK: - Writing

    /// Appends `bytes` to the output (loop thread only). Returns `false` if the connection is
    /// closed.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        loop.assertInEventLoop()
        guard state.pointee.open else { return false }
        if state.pointee.lingering { return true }
        if state.pointee.offering {
            loop.scratch.staging.append(bytes)
        } else if state.pointee.output.isEmpty {
            let written = send(bytes)
            guard state.pointee.open else { return false }
            if written < bytes.count {
                state.pointee.output.append(UnsafeRawBufferPointer(rebasing: bytes[written...]))
                enableWriting()
            }
        } else {
            state.pointee.output.append(bytes)
        }
        applyBackpressure()
        if !state.pointee.offering { accountBuffers() }
        return true
    }

    /// Appends `text`'s UTF-8 bytes to the output; from any thread (hops to the loop).
    public func write(_ text: String) {
        guard loop.inEventLoop else {
            loop.executeIfRunning { self.write(text) }
            return
        }
        var text = text
        text.withUTF8 { _ = write(UnsafeRawBufferPointer($0)) }
    }

    /// Output bytes not yet written to the socket.
    public var pendingOutputBytes: Int {
        state.pointee.output.count + (state.pointee.offering ? loop.scratch.staging.count : 0)
    }

    /// Writes what it can of `bytes` to the socket now; returns how many it took. A failed
    /// write (other than a full socket) closes the connection.
    private func send(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        var written = 0
        while written < bytes.count {
            let result = systemWrite(state.pointee.socket, base + written, bytes.count - written)
            if result > 0 {
                written += result
                continue
            }
            let failure = errno
            if result < 0 && failure == EINTR { continue }
            if result < 0 && (failure == EAGAIN || failure == EWOULDBLOCK) { break }
            finish(.error(result < 0 ? failure : EPIPE))
            return written
        }
        if written > 0 { state.pointee.lastWritten = loop.now }
        return written
    }

    /// Sends what the handler wrote while it was handed bytes: straight to the socket when
    /// nothing older waits, else behind the older output.
    private func flushStaging() {
        let staging = loop.scratch.staging.readable
        guard !staging.isEmpty else { return }
        defer { loop.scratch.staging.removeAll() }
        guard state.pointee.open, !state.pointee.lingering else { return }
        if state.pointee.output.isEmpty {
            let written = send(staging)
            guard state.pointee.open else { return }
            if written < staging.count {
                state.pointee.output.append(UnsafeRawBufferPointer(rebasing: staging[written...]))
                enableWriting()
            }
        } else {
            state.pointee.output.append(staging)
        }
    }

    /// Output is waiting: watches for the socket to take more, and starts the clock of a peer
    /// that takes none of it.
    private func enableWriting() {
        guard !state.pointee.writeEnabled, let event = state.pointee.writeEvent else { return }
        state.pointee.writeEnabled = true
        state.pointee.lastWritten = loop.now
        event_add(event, nil)
        armTimerIfNeeded()
    }

    private func disableWriting() {
        guard state.pointee.writeEnabled, let event = state.pointee.writeEvent else { return }
        state.pointee.writeEnabled = false
        event_del(event)
    }

    /// Pauses reading once the output is over the high watermark; resumes it (and hands over
    /// what was read meanwhile, from a job of its own) once it is at or below the low one.
    private func applyBackpressure() {
        if state.pointee.pausedForBackpressure {
            guard !state.pointee.offering, pendingOutputBytes <= configuration.outputLowWatermark else { return }
            state.pointee.pausedForBackpressure = false
            updateReading()
            offerInputLater()
        } else if pendingOutputBytes > configuration.outputHighWatermark {
            state.pointee.pausedForBackpressure = true
            updateReading()
        }
    }

    // MARK: - Pausing

    /// Stops handing bytes to the handler and reading the socket until ``resumeReading()``
    /// (loop thread only); bytes already read wait. A handler pauses, for example, while its
    /// requests in flight are at their cap.
    public func pauseReading() {
        loop.assertInEventLoop()
        guard isOpen, !state.pointee.pausedByHandler else { return }
        state.pointee.pausedByHandler = true
        updateReading()
    }

    /// Undoes ``pauseReading()``: bytes already read are handed over (from a job of their own,
    /// never from inside this call), then reading goes on.
    public func resumeReading() {
        loop.assertInEventLoop()
        guard isOpen, state.pointee.pausedByHandler else { return }
        state.pointee.pausedByHandler = false
        updateReading()
        offerInputLater()
    }

    /// Ends the handler's turn: what it has not consumed waits, unread, for the loop's next
    /// pass, after the loop has served its other connections. A handler calls it when it has
    /// handled input for ``TCPConfiguration/turnDuration`` and more is left.
    public func yieldTurn() {
        loop.assertInEventLoop()
        waitForTurn()
    }

    /// Stops reading and joins the loop's queue of connections that have more to do than one
    /// turn: the loop serves that queue a bounded slice of time per pass, so that connections
    /// sending a little are answered between the turns of those sending much.
    private func waitForTurn() {
        guard isOpen, !state.pointee.pausedForTurn else { return }
        state.pointee.pausedForTurn = true
        updateReading()
        loop.waitForTurn(self)
    }

    /// The loop's queue has come to this connection: it handles the input it left, or reads
    /// again (and rejoins the queue if it again has more than a turn's worth).
    func resumeTurn() {
        guard state.pointee.pausedForTurn else { return }
        state.pointee.pausedForTurn = false
        guard isOpen else { return }
        updateReading()
        guard !readingPaused else { return }
        if !state.pointee.input.isEmpty {
            offerInput()
        } else if !socketReadingPaused, !state.pointee.inputEnded {
            readable()
        }
    }

    /// Whether reading is paused because the peer is not taking its output.
    public var isReadingPaused: Bool { state.pointee.pausedForBackpressure }

    /// Whether the handler paused reading.
    public var isReadingPausedByHandler: Bool { state.pointee.pausedByHandler }

    /// Whether the socket is not read now, for any reason (loop thread only).
    var isSocketReadingPaused: Bool { socketReadingPaused }

    /// Whether the handler should go on consuming the bytes it was handed: the connection is
    /// open, nothing paused it and it is not closing.
    public var acceptsInput: Bool { state.pointee.open && !readingPaused }

    /// While set, a peer that sends nothing is not idle: the handler owes it answers (its
    /// requests are in flight). The idle timeout still closes a connection that takes none of
    /// its pending output.
    public var isAwaitingReplies: Bool {
        get { state.pointee.awaitingReplies }
        set {
            guard state.pointee.awaitingReplies != newValue else { return }
            state.pointee.awaitingReplies = newValue
            // Silence counts from now, not from the last read before the replies were due.
            if !newValue { state.pointee.lastRead = loop.now }
        }
    }

    /// Whether the handler is not handed bytes now (what was read waits).
    private var readingPaused: Bool {
        let s = state.pointee
        return s.pausedByHandler || s.pausedForBackpressure || s.pausedForTurn || s.closeWhenFlushed
    }

    /// Whether the socket is not read now: the handler is paused, or the process is over its
    /// buffer budget, or the input is full. Over the budget the handler still gets what was
    /// read (which turns input into answers and lets the answers' own bounds apply); only new
    /// bytes wait.
    private var socketReadingPaused: Bool {
        readingPaused || state.pointee.pausedForBudget || state.pointee.inputFull
    }

    /// Adds the read event exactly when nothing pauses reading the socket and input has not
    /// ended (or when lingering, to drop what the peer still sends).
    private func updateReading() {
        guard state.pointee.open, let event = state.pointee.readEvent else { return }
        let wanted = state.pointee.lingering || (!socketReadingPaused && !state.pointee.inputEnded)
        guard wanted != state.pointee.readEnabled else { return }
        state.pointee.readEnabled = wanted
        if wanted {
            event_add(event, nil)
            // Silence is measured while reading.
            state.pointee.lastRead = loop.now
            armTimerIfNeeded()
        } else {
            event_del(event)
            // Time paused is not the peer's: the frame's clock restarts when reading does.
            state.pointee.frameSince = nil
        }
    }

    /// Hands over input already read, which no read event will announce, from a job of its
    /// own once reading has resumed.
    private func offerInputLater() {
        guard isOpen, !state.pointee.resumeQueued, !state.pointee.input.isEmpty else { return }
        state.pointee.resumeQueued = true
        loop.execute { [self] in
            state.pointee.resumeQueued = false
            if isOpen, !readingPaused { offerInput() }
        }
    }

    // MARK: - Reading

    fileprivate func readable() {
        guard state.pointee.open else { return }
        if state.pointee.lingering {
            drainWhileLingering()
            return
        }
        guard !socketReadingPaused, !state.pointee.inputEnded else { return }
        guard let limit = readLimit() else { return }
        let fromScratch = state.pointee.input.isEmpty
        let space: UnsafeMutableRawBufferPointer
        let count: Int
        if fromScratch {
            space = loop.scratch.read
            count = min(space.count, limit)
        } else {
            let room = configuration.maximumBufferedInput - state.pointee.input.count
            guard room > 0 else {
                // The handler left a full buffer and consumed none of it: wait for it.
                state.pointee.inputFull = true
                updateReading()
                return
            }
            space = state.pointee.input.writableSpace(minimum: min(room, limit))
            count = min(space.count, room, limit)
        }
        var result: Int
        repeat {
            result = systemRead(state.pointee.socket, space.baseAddress, count)
        } while result < 0 && errno == EINTR
        if result > 0 {
            state.pointee.lastRead = loop.now
            if fromScratch {
                offer(UnsafeRawBufferPointer(start: space.baseAddress, count: result), fromScratch: true)
            } else {
                state.pointee.input.commit(result)
                offerInput()
            }
            // A full read: the peer has likely sent more. It is read from the loop's queue of
            // busy connections, not as soon as the socket is ready again.
            if result == count { waitForTurn() }
            return
        }
        if result == 0 {
            state.pointee.inputEnded = true
            updateReading()
            state.pointee.handler?.connectionInputEnded(self)
            return
        }
        let failure = errno
        if failure == EAGAIN || failure == EWOULDBLOCK { return }
        finish(.error(failure))
    }

    /// Hands the input left from earlier to the handler.
    private func offerInput() {
        guard isOpen, !state.pointee.input.isEmpty else { return }
        offer(state.pointee.input.readable, fromScratch: false)
    }

    /// Hands `window` to the handler and keeps what it leaves.
    private func offer(_ window: UnsafeRawBufferPointer, fromScratch: Bool) {
        guard let handler = state.pointee.handler else { return }
        state.pointee.offering = true
        let consumed = min(max(handler.connection(self, received: window), 0), window.count)
        state.pointee.offering = false
        guard state.pointee.open else {
            // Closed while the handler worked: what it wrote and what it left go.
            loop.scratch.staging.removeAll()
            state.pointee.input.release()
            return
        }
        if fromScratch {
            if consumed < window.count {
                state.pointee.input.append(UnsafeRawBufferPointer(rebasing: window[consumed...]))
            }
        } else {
            state.pointee.input.consume(consumed)
        }
        if state.pointee.inputFull == false, consumed == 0, state.pointee.input.count >= configuration.maximumBufferedInput {
            state.pointee.inputFull = true
            updateReading()
        } else if state.pointee.inputFull, consumed > 0 {
            state.pointee.inputFull = false
            updateReading()
        }
        flushStaging()
        guard state.pointee.open else { return }
        applyBackpressure()
        accountBuffers()
        armTimerIfNeeded()
    }

    // MARK: - Frames and timers

    /// Times the frame the handler has begun and not finished (a line, an HTTP head or body):
    /// it must complete within `timeout` of its first byte, or the handler hears
    /// ``TCPConnectionHandler/connectionFrameTimedOut(_:)`` and the connection closes. `nil`
    /// says no frame is pending. `restart` starts the clock again (a new frame began). Time
    /// spent with reading paused does not count.
    public func timeFrame(_ timeout: Duration?, restart: Bool = false) {
        guard let timeout else {
            state.pointee.frameTimeout = nil
            state.pointee.frameSince = nil
            return
        }
        state.pointee.frameTimeout = timeout
        if restart || state.pointee.frameSince == nil {
            state.pointee.frameSince = readingPaused ? nil : loop.now
        }
        armTimerIfNeeded()
    }

    /// The earliest instant one of the connection's clocks runs out: its frame, its silence,
    /// its stalled output or its linger.
    private var nextDeadline: Instant? {
        let s = state.pointee
        var next: Instant?
        func consider(_ instant: Instant) {
            if next.map({ instant < $0 }) ?? true { next = instant }
        }
        if s.lingering {
            consider(s.lingerUntil)
            return next
        }
        if let timeout = s.frameTimeout, let since = s.frameSince { consider(since + timeout) }
        if let idle = configuration.idleTimeout {
            if s.readEnabled && !s.awaitingReplies { consider(s.lastRead + idle) }
            if !s.output.isEmpty { consider(s.lastWritten + idle) }
        }
        return next
    }

    /// Arms the timer for the next deadline when it is not armed for that instant or earlier.
    /// A timer that fires early (its deadline moved later) only re-arms.
    private func armTimerIfNeeded() {
        guard state.pointee.open, let deadline = nextDeadline else { return }
        if let armed = state.pointee.timerArmedAt, armed <= deadline { return }
        if let manualClock = loop.manualClock {
            state.pointee.timerArmedAt = deadline
            manualClock.schedule(at: deadline, owner: loop, key: ObjectIdentifier(self)) { [self] in
                loop.executeIfRunning { self.timerFired() }
            }
            return
        }
        if state.pointee.timerEvent == nil {
            state.pointee.timerEvent = event_new(loop.base, -1, 0, tcpConnectionTimerCallback, Unmanaged.passUnretained(self).toOpaque())
        }
        guard let event = state.pointee.timerEvent else { return }
        let delay = max(.zero, deadline - loop.currentTime)
        var tv = timeval(duration: delay)
        event_add(event, &tv)
        state.pointee.timerArmedAt = deadline
    }

    fileprivate func timerFired() {
        state.pointee.timerArmedAt = nil
        guard state.pointee.open else { return }
        let now = loop.currentTime
        let s = state.pointee
        if s.lingering {
            if now >= s.lingerUntil {
                finish(flushedCloseReason)
                return
            }
        } else {
            if let timeout = s.frameTimeout, let since = s.frameSince, now >= since + timeout {
                state.pointee.frameTimeout = nil
                state.pointee.frameSince = nil
                state.pointee.handler?.connectionFrameTimedOut(self)
                close(afterFlushWith: .frameTimeout)
                return
            }
            if let idle = configuration.idleTimeout {
                let silent = s.readEnabled && !s.awaitingReplies && now >= s.lastRead + idle
                let stalled = !s.output.isEmpty && now >= s.lastWritten + idle
                if silent || stalled {
                    finish(.idleTimeout)
                    return
                }
            }
        }
        armTimerIfNeeded()
    }

    // MARK: - The process's buffer budget

    /// A connection holding at most this much buffer memory is read even while the process is
    /// over its budget: the clients that fill the budget stop being read, the others go on.
    static let budgetFloor = 16 << 10

    /// Reports the memory this connection's buffers hold to the accounting's total; while the
    /// total is over the budget, a connection holding more than 16 KiB stops reading
    /// its socket until the total is back under it (its loop checks every few milliseconds,
    /// one timer for all its waiting connections). What it has read is still handed over.
    private func accountBuffers() {
        guard let accounting else { return }
        let held = state.pointee.input.capacity + state.pointee.output.capacity
        let delta = held - state.pointee.reportedBytes
        state.pointee.reportedBytes = held
        guard accounting.addBufferBytes(delta), held > Self.budgetFloor else { return }
        pauseForBudget()
    }

    /// How many bytes the next `read` may take: ``readSize``, or while the process is over its
    /// budget, only what keeps this connection's buffers within ``budgetFloor`` (a connection
    /// that is not yet paused must not take a whole read's worth past the budget). `nil`: none,
    /// and the connection now waits for the budget.
    private func readLimit() -> Int? {
        guard let accounting, accounting.isOverBufferBudget else { return Self.readSize }
        let room = Self.budgetFloor - state.pointee.reportedBytes
        guard room > 0 else {
            pauseForBudget()
            return nil
        }
        return min(room, Self.readSize)
    }

    /// Stops reading the socket until the loop finds the process back under its budget.
    private func pauseForBudget() {
        guard !state.pointee.pausedForBudget else { return }
        state.pointee.pausedForBudget = true
        updateReading()
        loop.waitForBudget(self)
        if !readingPaused { offerInputLater() }
    }

    /// Called by the loop once the accounting is back under its budget.
    func budgetAvailable() {
        guard isOpen, state.pointee.pausedForBudget else { return }
        state.pointee.pausedForBudget = false
        updateReading()
        offerInputLater()
    }

    /// Whether this connection's accounting is over its budget.
    var isOverBudget: Bool { accounting?.isOverBufferBudget == true }

    /// A connection waiting for the budget with no output pending watches nothing on its
    /// socket (a reset would show on a write or a read): the loop asks now and then whether
    /// its peer has reset it, and closes it if so, so that a client that left gives its slot
    /// and its memory back.
    func closeIfReset() {
        guard isOpen, state.pointee.output.isEmpty else { return }
        var failure: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(state.pointee.socket, SOL_SOCKET, SO_ERROR, &failure, &size) == 0, failure != 0 {
            finish(.error(failure))
        }
    }

    private func releaseBuffers() {
        guard let accounting, state.pointee.reportedBytes != 0 else { return }
        _ = accounting.addBufferBytes(-state.pointee.reportedBytes)
        state.pointee.reportedBytes = 0
    }

    // MARK: - Writable

    fileprivate func writable() {
        guard state.pointee.open else { return }
        let pending = state.pointee.output.readable
        if !pending.isEmpty {
            let written = send(pending)
            guard state.pointee.open else { return }
            state.pointee.output.consume(written)
        }
        if state.pointee.output.isEmpty {
            disableWriting()
            if state.pointee.closeWhenFlushed {
                beginLingering()
                return
            }
        }
        applyBackpressure()
        accountBuffers()
    }

    // MARK: - Closing

    /// Closes the connection now; unwritten output is dropped. From any thread (hops to the
    /// loop).
    public func close() {
        guard loop.inEventLoop else {
            loop.executeIfRunning { self.close() }
            return
        }
        finish(.closedLocally)
    }

    /// Stops handing bytes to the handler and closes the connection once its output has been
    /// written. Bytes already read but not yet consumed are dropped.
    public func closeAfterFlush() {
        loop.assertInEventLoop()
        close(afterFlushWith: nil)
    }

    private func close(afterFlushWith reason: CloseReason?) {
        guard state.pointee.open, !state.pointee.closeWhenFlushed else { return }
        state.pointee.closeWhenFlushed = true
        if let reason { state.pointee.closeReason = reason }
        updateReading()
        if state.pointee.offering {
            // The handler is still working: its writes are flushed when it returns, and the
            // write event finishes the close.
            enableWriting()
            return
        }
        if state.pointee.output.isEmpty {
            beginLingering()
        } else {
            enableWriting()
        }
    }

    /// The output is written: shuts the sending side and drops what the peer still sends for
    /// a short while, so the peer reads the last answer before it sees the connection close.
    /// A peer that has already closed its side is closed at once.
    private func beginLingering() {
        guard state.pointee.open else { return }
        if state.pointee.inputEnded {
            finish(flushedCloseReason)
            return
        }
        _ = shutdown(state.pointee.socket, Int32(SHUT_WR))
        state.pointee.lingering = true
        state.pointee.lingerUntil = loop.currentTime + Self.lingerDuration
        state.pointee.input.release()
        accountBuffers()
        updateReading()
        armTimerIfNeeded()
    }

    private func drainWhileLingering() {
        let space = loop.scratch.read
        while true {
            let result = systemRead(state.pointee.socket, space.baseAddress, space.count)
            if result > 0 {
                state.pointee.lingerBytes += result
                if state.pointee.lingerBytes > Self.lingerBytes {
                    finish(flushedCloseReason)
                    return
                }
                continue
            }
            if result < 0 && errno == EINTR { continue }
            if result < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            // End of stream or an error (a reset): the peer has what it will read.
            finish(flushedCloseReason)
            return
        }
    }

    /// Why a connection closing after its output was written closes.
    private var flushedCloseReason: CloseReason {
        state.pointee.closeReason ?? (state.pointee.inputEnded ? .endOfStream : .closedLocally)
    }

    public func closeForShutdown() {
        finish(.shutdown)
    }

    private func finish(_ reason: CloseReason) {
        guard state.pointee.open else { return }
        state.pointee.open = false
        for event in [state.pointee.readEvent, state.pointee.writeEvent, state.pointee.timerEvent] {
            if let event {
                event_del(event)
                event_free(event)
            }
        }
        state.pointee.readEvent = nil
        state.pointee.writeEvent = nil
        state.pointee.timerEvent = nil
        loop.manualClock?.cancel(ObjectIdentifier(self))
        systemClose(state.pointee.socket)
        state.pointee.socket = -1
        if !state.pointee.offering {
            // While the handler is being handed bytes, they are its input: freed when it returns.
            state.pointee.input.release()
        }
        state.pointee.output.release()
        releaseBuffers()
        loop.unregisterForShutdown(self)
        let handler = state.pointee.handler
        state.pointee.handler = nil
        onClose(self)
        handler?.connectionClosed(self, reason: reason)
    }
}

extension timeval {
    /// A `timeval` holding `duration` (microsecond resolution).
    init(duration: Duration) {
        let nanoseconds = duration.nanosecondsClamped
        self.init(tv_sec: Int(nanoseconds / 1_000_000_000), tv_usec: Int((nanoseconds % 1_000_000_000) / 1_000))
    }
}

private func tcpConnectionReadCallback(_ socket: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().readable()
}

private func tcpConnectionWriteCallback(_ socket: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().writable()
}

private func tcpConnectionTimerCallback(_ socket: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().timerFired()
}

// The libc calls under names that `TCPConnection`'s own methods do not shadow.
private func systemRead(_ socket: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(socket, buffer, count)
}

private func systemWrite(_ socket: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(socket, buffer, count)
}

private func systemClose(_ socket: Int32) {
    _ = close(socket)
}
