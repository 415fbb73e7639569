import Synchronization

/// What a server's connections share across its loops: how many are open, and how many bytes
/// their buffers hold together.
///
/// Several servers may share one (the line and HTTP fronts of one process): the cap on open
/// connections then holds for all of them together.
public final class ConnectionAccounting: Sendable {
    /// The cap on open connections, if any.
    let maximumConnections: Int?
    /// The budget of buffer bytes over all connections, if any.
    let bufferBudget: Int?
    private let open = Atomic<Int>(0)
    private let bufferBytes = Atomic<Int>(0)
    private let refusingAccepts = Atomic<Bool>(false)

    /// Accounting with at most `maximumConnections` open connections (`nil`: no cap) and
    /// `bufferBudget` bytes in their buffers together (`nil`: no budget).
    public init(maximumConnections: Int?, bufferBudget: Int? = nil) {
        self.maximumConnections = maximumConnections
        self.bufferBudget = bufferBudget
    }

    convenience init(configuration: TCPConfiguration) {
        self.init(maximumConnections: configuration.maximumConnections, bufferBudget: configuration.connectionBufferBudget)
    }

    /// Counts a new connection in; `false` (and nothing counted) when the cap is reached.
    func admitConnection() -> Bool {
        guard let maximumConnections else {
            open.add(1, ordering: .relaxed)
            return true
        }
        var current = open.load(ordering: .relaxed)
        while current < maximumConnections {
            let (exchanged, original) = open.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Counts an admitted connection out.
    func connectionClosed() {
        open.subtract(1, ordering: .relaxed)
    }

    /// Open connections over all loops and every server sharing this accounting.
    public var openConnections: Int { open.load(ordering: .relaxed) }

    /// Adds `delta` (which may be negative) to the bytes held; returns whether the total is
    /// over the budget.
    func addBufferBytes(_ delta: Int) -> Bool {
        let total = delta == 0 ? bufferBytes.load(ordering: .relaxed) : bufferBytes.add(delta, ordering: .relaxed).newValue
        guard let bufferBudget else { return false }
        return total > bufferBudget
    }

    /// Whether the total is over the budget.
    var isOverBufferBudget: Bool {
        guard let bufferBudget else { return false }
        return bufferBytes.load(ordering: .relaxed) > bufferBudget
    }

    /// Bytes held in every connection's buffers.
    var heldBufferBytes: Int { bufferBytes.load(ordering: .relaxed) }

    /// Marks the start of an episode of refused accepts; `true` for the first listener to see
    /// it (the one that logs it).
    func acceptRefusalsBegan() -> Bool {
        !refusingAccepts.exchange(true, ordering: .relaxed)
    }

    /// Marks the end of an episode; `true` for the first listener to see it.
    func acceptRefusalsEnded() -> Bool {
        refusingAccepts.exchange(false, ordering: .relaxed)
    }
}
