import CLibevent
import SluiceCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a server does with one connection's lines. Every method is called on the connection's
/// loop thread.
public protocol TCPConnectionHandler: AnyObject {
    /// The connection is open; nothing has been read yet.
    func connectionOpened(_ connection: TCPConnection)
    /// A complete line arrived. `line` excludes the LF (and a CR before it) and is valid only
    /// during the call: copy what must outlive it.
    func connection(_ connection: TCPConnection, received line: UnsafeRawBufferPointer)
    /// A line longer than the configured maximum arrived; it is skipped up to its LF and the
    /// connection stays usable.
    func connectionReceivedOverlongLine(_ connection: TCPConnection)
    /// The peer closed its sending side (a half-close): nothing more will be read, but replies
    /// can still be written. The default closes the connection once its output is written;
    /// a handler with replies still to come closes it later with `closeAfterFlush()`.
    func connectionInputEnded(_ connection: TCPConnection)
    /// A line did not complete within the configured line timeout of its first byte. The
    /// connection closes (reason ``TCPConnection/CloseReason/lineTimeout``) once what the
    /// handler writes now has been sent; the default writes nothing.
    func connectionLineTimedOut(_ connection: TCPConnection)
    /// The connection is closed; nothing more will be read or written.
    func connectionClosed(_ connection: TCPConnection, reason: TCPConnection.CloseReason)
}

extension TCPConnectionHandler {
    public func connectionInputEnded(_ connection: TCPConnection) {
        connection.closeAfterFlush()
    }

    public func connectionLineTimedOut(_ connection: TCPConnection) {}
}

/// One accepted TCP connection, on a libevent bufferevent owned by its loop.
///
/// All methods must be called on ``loop``'s thread, except ``write(_:)-(String)`` and
/// ``close()``, which hop there when called from elsewhere.
public final class TCPConnection: LoopResource, CustomStringConvertible, @unchecked Sendable {
    // @unchecked Sendable: the mutable state (bufferevent, framer, handler, flags) is touched on
    // `loop`'s thread only — the loop-only methods assert it, and the two methods that may be
    // called elsewhere (`write(String)`, `close()`) hop to the loop first.

    /// Why a connection closed.
    public enum CloseReason: Sendable, Hashable {
        /// The peer closed its side.
        case endOfStream
        /// A socket error (errno).
        case error(Int32)
        /// Nothing arrived for the configured idle timeout.
        case idleTimeout
        /// A line did not complete within the configured line timeout of its first byte.
        case lineTimeout
        /// ``close()`` was called.
        case closedLocally
        /// The loop shut down.
        case shutdown
    }

    /// The loop that owns this connection.
    public let loop: EventLoop
    /// A process-unique id (per loop, mixed with the loop's index by the server).
    public let id: UInt64
    /// The peer's address, e.g. `127.0.0.1:53422`.
    public let remoteAddress: String

    /// The state every line touches, behind a pointer rather than stored `var`s: a class's
    /// stored `var` pays a dynamic exclusivity check on each access, several a line here.
    private let hot: UnsafeMutablePointer<HotState>

    private struct HotState {
        var bufferEvent: OpaquePointer?
        /// The socket under `bufferEvent` (kept here: `bufferevent_getfd` takes a lock).
        var socket: Int32
        var batching = false
        var readPausedForBackpressure = false
        /// ``closeAfterFlush()`` was called: no more lines are handled, and the connection
        /// closes once its output is written.
        var closeWhenFlushed = false
        /// The handler paused reading (``pauseReading()``).
        var readPausedByHandler = false
        /// Reading paused because the server's connections hold more buffer bytes than their
        /// budget.
        var readPausedForBudget = false
        /// Whether `EV_READ` is enabled on the bufferevent.
        var readEnabled = false
        /// Buffer bytes last added to the server's total.
        var reportedBufferBytes = 0
        /// When the first byte of the incomplete line in the input arrived, if there is one.
        var partialLineSince: Instant?
        /// Whether the line timer is pending.
        var lineTimerArmed = false
        /// A job that frames input left buffered when reading resumed is queued.
        var resumeQueued = false
        /// The connection used up its turn: reading waits for the loop's next pass, where a
        /// timer frames the rest of its input.
        var readPausedForTurn = false
        /// Why the connection closes once flushed, when not the default.
        var closeReason: CloseReason?
    }

    private var bufferEvent: OpaquePointer? {
        get { hot.pointee.bufferEvent }
        set { hot.pointee.bufferEvent = newValue }
    }
    /// Writes made while a read batch is being framed collect here and move to the
    /// bufferevent's output in one `evbuffer_add_buffer` when the batch ends: one lock and one
    /// output callback per batch instead of per write. An evbuffer of its own without a lock
    /// (loop thread only); empty outside ``readable()``.
    private let staging: OpaquePointer
    /// Whether ``readable()`` is framing a batch (writes go to `staging`).
    private var batching: Bool {
        get { hot.pointee.batching }
        set { hot.pointee.batching = newValue }
    }
    private var framer: LineFramer
    private var handler: (any TCPConnectionHandler)?
    private let configuration: TCPConfiguration
    private var readPausedForBackpressure: Bool {
        get { hot.pointee.readPausedForBackpressure }
        set { hot.pointee.readPausedForBackpressure = newValue }
    }
    private var closeWhenFlushed: Bool {
        get { hot.pointee.closeWhenFlushed }
        set { hot.pointee.closeWhenFlushed = newValue }
    }
    private var inputEnded = false
    private let onClose: (TCPConnection) -> Void
    private let accounting: ConnectionAccounting?
    /// The line-timeout timer (a libevent timer on the loop's base), made on first use.
    private var lineTimer: OpaquePointer?

    /// Whether the connection is open (loop thread only).
    public var isOpen: Bool { bufferEvent != nil }

    /// Whether reading is paused because the peer is not draining our output.
    public var isReadingPaused: Bool { readPausedForBackpressure }

    init(
        loop: EventLoop,
        id: UInt64,
        socket: Int32,
        remoteAddress: String,
        configuration: TCPConfiguration,
        accounting: ConnectionAccounting? = nil,
        onClose: @escaping (TCPConnection) -> Void
    ) throws(EventLoopError) {
        loop.assertInEventLoop()
        self.loop = loop
        self.id = id
        self.remoteAddress = remoteAddress
        self.configuration = configuration
        self.framer = LineFramer(maximumLineLength: configuration.maximumLineLength)
        self.onClose = onClose
        self.accounting = accounting
        Self.setConnectionOptions(socket)
        guard let staging = evbuffer_new() else {
            evutil_closesocket(socket)
            throw EventLoopError(code: .baseCreationFailed, message: "evbuffer_new failed", input: remoteAddress)
        }
        guard let bufferEvent = bufferevent_socket_new(loop.base, socket, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            evbuffer_free(staging)
            evutil_closesocket(socket)
            throw EventLoopError(code: .baseCreationFailed, message: "bufferevent_socket_new failed", input: remoteAddress)
        }
        self.staging = staging
        self.hot = .allocate(capacity: 1)
        hot.initialize(to: HotState(bufferEvent: bufferEvent, socket: socket))
    }

    /// The options every connection's socket gets, accepted or opened: `TCP_NODELAY` (a reply
    /// is one small write and must not wait for an ACK), and on Darwin `SO_NOSIGPIPE`, because
    /// Darwin sends SIGPIPE to the process rather than to the writing thread, so the loop
    /// threads' blocked mask does not cover it there.
    private static func setConnectionOptions(_ socket: Int32) {
        var one: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(socket, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    deinit {
        evbuffer_free(staging)
        hot.deinitialize(count: 1)
        hot.deallocate()
    }

    public var description: String { "TCPConnection(\(id), \(remoteAddress))" }

    /// Starts reading and tells the handler the connection is open.
    func start(handler: any TCPConnectionHandler) {
        guard let bufferEvent else { return }
        self.handler = handler
        let context = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bufferEvent, tcpConnectionReadCallback, tcpConnectionWriteCallback, tcpConnectionEventCallback, context)
        // The write callback runs when the output has drained to the low watermark.
        bufferevent_setwatermark(bufferEvent, Int16(EV_WRITE), configuration.outputLowWatermark, 0)
        if let idle = configuration.idleTimeout {
            // Reading: nothing arrived for `idle`. Writing (armed only while output waits for
            // the socket): the peer took none of it for `idle`, so a client that stops reading
            // cannot hold the connection, paused for backpressure, forever.
            var tv = timeval(duration: idle)
            bufferevent_set_timeouts(bufferEvent, &tv, &tv)
        }
        loop.registerForShutdown(self)
        handler.connectionOpened(self)
        if self.bufferEvent != nil {
            bufferevent_enable(bufferEvent, Int16(EV_WRITE))
            updateReading()
        }
    }

    // MARK: - Writing

    /// Appends `bytes` to the output (loop thread only). Returns `false` if the connection is
    /// closed.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        loop.assertInEventLoop()
        guard let bufferEvent, let base = bytes.baseAddress else { return bufferEvent != nil }
        if batching {
            // `readable()` checks the watermark once per window of input it frames.
            evbuffer_add(staging, base, bytes.count)
            return true
        }
        evbuffer_add(bufferevent_get_output(bufferEvent), base, bytes.count)
        applyBackpressure(bufferEvent)
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
        guard let bufferEvent else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bufferEvent)) + evbuffer_get_length(staging)
    }

    /// Sends the writes collected during a read batch. May close the connection (a failed
    /// write): callers check ``isOpen`` afterwards.
    ///
    /// When nothing older is waiting in the output, the batch goes straight to the socket with
    /// one `writev`, and only what the socket does not take moves to the bufferevent's output.
    /// Handing every batch to the bufferevent would register for writability and unregister
    /// again once it is written: two `epoll_ctl` calls per batch for a socket that is almost
    /// always writable.
    private func flushStaging() {
        guard let bufferEvent, evbuffer_get_length(staging) > 0 else { return }
        let output = bufferevent_get_output(bufferEvent)
        if evbuffer_get_length(output) == 0 {
            // Drains what it wrote from `staging`; -1 leaves `staging` whole.
            if evbuffer_write(staging, hot.pointee.socket) < 0 {
                let failure = errno
                if failure != EAGAIN && failure != EWOULDBLOCK && failure != EINTR {
                    // The first write after a reset takes the reset (ECONNRESET); report that
                    // rather than the EPIPE a retry by the bufferevent would see.
                    finish(.error(failure))
                    return
                }
            }
            if evbuffer_get_length(staging) == 0 { return }
        }
        evbuffer_add_buffer(output, staging)
    }

    private func applyBackpressure(_ bufferEvent: OpaquePointer) {
        if !readPausedForBackpressure,
            evbuffer_get_length(bufferevent_get_output(bufferEvent)) + evbuffer_get_length(staging)
                > configuration.outputHighWatermark
        {
            readPausedForBackpressure = true
            updateReading()
        }
    }

    // MARK: - Pausing

    /// Stops handing lines to the handler and reading from the socket until
    /// ``resumeReading()`` (loop thread only); lines already read wait in the input. A handler
    /// pauses, for example, while its requests in flight are at their cap.
    public func pauseReading() {
        loop.assertInEventLoop()
        guard bufferEvent != nil, !hot.pointee.readPausedByHandler else { return }
        hot.pointee.readPausedByHandler = true
        updateReading()
    }

    /// Undoes ``pauseReading()``: lines already read are handed over (from a job of their own,
    /// never from inside this call), then reading goes on.
    public func resumeReading() {
        loop.assertInEventLoop()
        guard bufferEvent != nil, hot.pointee.readPausedByHandler else { return }
        hot.pointee.readPausedByHandler = false
        updateReading()
        frameBufferedInputLater()
    }

    /// Whether the handler paused reading.
    public var isReadingPausedByHandler: Bool { hot.pointee.readPausedByHandler }

    /// Whether reading is paused for any reason: backpressure, the handler, the server's
    /// buffer budget, or closing.
    private var readingPaused: Bool {
        readPausedForBackpressure || hot.pointee.readPausedByHandler || hot.pointee.readPausedForBudget
            || hot.pointee.readPausedForTurn || closeWhenFlushed
    }

    /// Enables `EV_READ` exactly when nothing pauses reading and input has not ended.
    private func updateReading() {
        guard let bufferEvent else { return }
        let wanted = !readingPaused && !inputEnded
        guard wanted != hot.pointee.readEnabled else { return }
        hot.pointee.readEnabled = wanted
        if wanted {
            bufferevent_enable(bufferEvent, Int16(EV_READ))
        } else {
            bufferevent_disable(bufferEvent, Int16(EV_READ))
            // Time paused is not the peer's: the line timer restarts when reading does.
            hot.pointee.partialLineSince = nil
        }
    }

    /// Frames input already buffered, which no read event will announce, from a job of its
    /// own once reading has resumed.
    private func frameBufferedInputLater() {
        guard let bufferEvent, !hot.pointee.resumeQueued,
            evbuffer_get_length(bufferevent_get_input(bufferEvent)) > 0
        else { return }
        hot.pointee.resumeQueued = true
        loop.execute { [self] in
            hot.pointee.resumeQueued = false
            if !readingPaused { readable() }
        }
    }

    // MARK: - The server's buffer budget

    /// Reports this connection's buffer bytes to the server's total; pauses reading while the
    /// total is over the budget, and checks again every few milliseconds until it is not.
    private func accountBuffers() {
        guard let accounting, let bufferEvent else { return }
        let held = evbuffer_get_length(bufferevent_get_input(bufferEvent))
            + evbuffer_get_length(bufferevent_get_output(bufferEvent)) + evbuffer_get_length(staging)
        let delta = held - hot.pointee.reportedBufferBytes
        hot.pointee.reportedBufferBytes = held
        guard accounting.addBufferBytes(delta), !hot.pointee.readPausedForBudget else { return }
        hot.pointee.readPausedForBudget = true
        updateReading()
        recheckBudgetLater()
    }

    private func recheckBudgetLater() {
        _ = loop.schedule(after: .milliseconds(5)) { [self] in
            guard bufferEvent != nil, hot.pointee.readPausedForBudget else { return }
            if accounting?.isOverBufferBudget == true {
                recheckBudgetLater()
                return
            }
            hot.pointee.readPausedForBudget = false
            updateReading()
            frameBufferedInputLater()
        }
    }

    /// Takes this connection's bytes out of the server's total (it closed).
    private func releaseBuffers() {
        guard let accounting, hot.pointee.reportedBufferBytes != 0 else { return }
        _ = accounting.addBufferBytes(-hot.pointee.reportedBufferBytes)
        hot.pointee.reportedBufferBytes = 0
    }

    // MARK: - Line timeout

    /// After a batch: starts timing the incomplete line left in the input (or the overlong
    /// line being skipped), or stops when none is left. `completedLines` says whether the
    /// batch completed any line, so a leftover is a new line.
    private func timeIncompleteLine(completedLines: Bool) {
        guard let lineTimeout = configuration.lineTimeout, let bufferEvent else { return }
        if completedLines { hot.pointee.partialLineSince = nil }
        let incomplete = !readingPaused
            && (framer.isSkipping || evbuffer_get_length(bufferevent_get_input(bufferEvent)) > 0)
        guard incomplete else {
            hot.pointee.partialLineSince = nil
            return
        }
        if hot.pointee.partialLineSince == nil { hot.pointee.partialLineSince = loop.now }
        if !hot.pointee.lineTimerArmed { armLineTimer(after: lineTimeout) }
    }

    private func armLineTimer(after delay: Duration) {
        if lineTimer == nil {
            lineTimer = event_new(loop.base, -1, 0, tcpConnectionLineTimerCallback, Unmanaged.passUnretained(self).toOpaque())
        }
        guard let lineTimer else { return }
        var tv = timeval(duration: delay)
        event_add(lineTimer, &tv)
        hot.pointee.lineTimerArmed = true
    }

    fileprivate func lineTimerFired() {
        hot.pointee.lineTimerArmed = false
        guard bufferEvent != nil, let lineTimeout = configuration.lineTimeout,
            let since = hot.pointee.partialLineSince, !readingPaused
        else { return }
        let waited = EventLoop.monotonicNow() - since
        if waited < lineTimeout {
            armLineTimer(after: lineTimeout - waited)
            return
        }
        hot.pointee.partialLineSince = nil
        handler?.connectionLineTimedOut(self)
        close(afterFlushWith: .lineTimeout)
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

    /// Stops reading and closes the connection once its output has been written. Lines already
    /// read but not yet handed to the handler are dropped, so what is handled does not depend
    /// on how the input happened to be batched.
    public func closeAfterFlush() {
        loop.assertInEventLoop()
        close(afterFlushWith: nil)
    }

    private func close(afterFlushWith reason: CloseReason?) {
        guard bufferEvent != nil else { return }
        closeWhenFlushed = true
        if let reason { hot.pointee.closeReason = reason }
        flushStaging()
        guard let bufferEvent else { return }
        updateReading()
        if evbuffer_get_length(bufferevent_get_output(bufferEvent)) == 0 {
            finish(flushedCloseReason)
        } else {
            bufferevent_setwatermark(bufferEvent, Int16(EV_WRITE), 0, 0)
        }
    }

    /// Why a connection closing after its output was written closes.
    private var flushedCloseReason: CloseReason {
        hot.pointee.closeReason ?? (inputEnded ? .endOfStream : .closedLocally)
    }

    public func closeForShutdown() {
        finish(.shutdown)
    }

    private func finish(_ reason: CloseReason) {
        guard let bufferEvent else { return }
        self.bufferEvent = nil
        evbuffer_drain(staging, evbuffer_get_length(staging))
        releaseBuffers()
        if let lineTimer {
            event_free(lineTimer)
            self.lineTimer = nil
        }
        bufferevent_free(bufferEvent)
        loop.unregisterForShutdown(self)
        let handler = self.handler
        self.handler = nil
        onClose(self)
        handler?.connectionClosed(self, reason: reason)
    }

    // MARK: - Callbacks (loop thread)

    fileprivate func readable() {
        var completedLines = false
        let turnEnds = configuration.turnDuration.map { EventLoop.monotonicNow() + $0 }
        repeat {
            completedLines = frameInput(until: turnEnds) || completedLines
            flushStaging()
        } while resumeReadingIfDrained()
        if !hot.pointee.readPausedForTurn { timeIncompleteLine(completedLines: completedLines) }
        accountBuffers()
    }

    /// Lines handled between two looks at the clock while a turn lasts.
    private static let linesPerClockCheck = 16

    /// The connection's turn is over with input left: reading pauses, and a timer of the
    /// loop's next pass (after it has polled every socket) goes on with the input.
    private func yieldTurn() {
        guard !hot.pointee.readPausedForTurn else { return }
        hot.pointee.readPausedForTurn = true
        updateReading()
        _ = loop.schedule(after: .zero) { [self] in
            guard hot.pointee.readPausedForTurn else { return }
            hot.pointee.readPausedForTurn = false
            guard bufferEvent != nil else { return }
            updateReading()
            if !readingPaused { readable() }
        }
    }

    /// Hands the buffered input's lines to the handler until it runs out, the connection
    /// closes or reading pauses; writes made meanwhile collect in `staging`. Returns whether
    /// any line (or overlong line) was handed over.
    @discardableResult
    private func frameInput(until turnEnds: Instant?) -> Bool {
        guard let bufferEvent else { return false }
        var handed = false
        var sinceClockCheck = 0
        var turnOver = false
        let input = bufferevent_get_input(bufferEvent)
        batching = true
        defer { batching = false }
        // A window of at least one overlong line, so the framer can always make progress, and
        // not the whole buffer, so a huge line is not copied again on every read.
        let window = max(64 << 10, framer.overlongThreshold)
        while handlesInput {
            let available = evbuffer_get_length(input)
            if available == 0 { break }
            let size = min(available, window)
            guard let start = evbuffer_pullup(input, size) else { break }
            let bytes = UnsafeRawBufferPointer(start: start, count: size)
            guard let handler else { break }
            let consumed = framer.consume(bytes) { event in
                handed = true
                switch event {
                case .line(let line):
                    handler.connection(self, received: line)
                case .overlong:
                    handler.connectionReceivedOverlongLine(self)
                }
                if let turnEnds {
                    sinceClockCheck += 1
                    if sinceClockCheck == Self.linesPerClockCheck {
                        sinceClockCheck = 0
                        turnOver = EventLoop.monotonicNow() >= turnEnds
                    }
                }
                return self.handlesInput && !turnOver
            }
            guard self.bufferEvent != nil else { return handed }
            evbuffer_drain(input, consumed)
            applyBackpressure(bufferEvent)
            if turnOver {
                if handlesInput && evbuffer_get_length(input) > 0 { yieldTurn() }
                break
            }
            if consumed == 0 { break }
        }
        return handed
    }

    /// Whether lines read are handed to the handler: open, not paused, and not closing after
    /// ``closeAfterFlush()``.
    private var handlesInput: Bool {
        bufferEvent != nil && !readingPaused
    }

    /// Resumes reading paused for backpressure once the output is at or below the low
    /// watermark. `true` when it resumed and input is already buffered, which no read event
    /// will announce: the caller frames it.
    private func resumeReadingIfDrained() -> Bool {
        guard let bufferEvent, readPausedForBackpressure, !closeWhenFlushed,
            evbuffer_get_length(bufferevent_get_output(bufferEvent)) <= configuration.outputLowWatermark
        else { return false }
        readPausedForBackpressure = false
        updateReading()
        return !readingPaused && evbuffer_get_length(bufferevent_get_input(bufferEvent)) > 0
    }

    fileprivate func writable() {
        guard let bufferEvent else { return }
        if closeWhenFlushed {
            if evbuffer_get_length(bufferevent_get_output(bufferEvent)) == 0 {
                finish(flushedCloseReason)
            }
            return
        }
        if resumeReadingIfDrained() {
            readable()
        } else {
            accountBuffers()
        }
    }

    fileprivate func event(_ what: Int16) {
        let what = Int32(what)
        if what & BEV_EVENT_TIMEOUT != 0 {
            finish(.idleTimeout)
        } else if what & BEV_EVENT_EOF != 0 {
            guard bufferEvent != nil, !inputEnded else { return }
            inputEnded = true
            updateReading()
            handler?.connectionInputEnded(self)
        } else if what & BEV_EVENT_ERROR != 0 {
            finish(.error(errno))
        }
    }
}

extension timeval {
    /// A `timeval` holding `duration` (microsecond resolution).
    init(duration: Duration) {
        let nanoseconds = duration.nanosecondsClamped
        self.init(tv_sec: Int(nanoseconds / 1_000_000_000), tv_usec: Int((nanoseconds % 1_000_000_000) / 1_000))
    }
}

private func tcpConnectionReadCallback(_ bufferEvent: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().readable()
}

private func tcpConnectionWriteCallback(_ bufferEvent: OpaquePointer?, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().writable()
}

private func tcpConnectionLineTimerCallback(_ socket: Int32, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().lineTimerFired()
}

private func tcpConnectionEventCallback(_ bufferEvent: OpaquePointer?, _ what: Int16, _ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TCPConnection>.fromOpaque(context).takeUnretainedValue().event(what)
}
