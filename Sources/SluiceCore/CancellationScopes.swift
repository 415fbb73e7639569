/// Names a node of a ``ScopeTree`` (server, connection, key…).
public struct ScopeID: Hashable, Sendable, CustomStringConvertible {
    /// The tree's number for the scope.
    public var rawValue: UInt32

    /// A scope ID with the given number.
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    public var description: String { "scope#\(rawValue)" }
}

/// Names one registered effect in a ``ScopeTree``.
public struct EffectToken: Hashable, Sendable, CustomStringConvertible {
    /// The tree's number for the effect.
    public var rawValue: UInt64

    /// An effect token with the given number.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "effect#\(rawValue)" }
}

/// Cancellation scopes that mirror effect IDs (DESIGN §5): pure bookkeeping.
///
/// Scopes form a tree (server → connection → key). An effect is registered under `(scope, id)`
/// *before* its task starts, and the task calls ``start(_:)`` first thing: if a cancellation reached
/// it in between, `start` answers `false` and the effect does not run — a cancel that arrives before
/// the effect started still wins. Cancelling returns tokens; the runtime turns them into `Task`
/// cancellations. Every registered token must eventually be reported through ``finished(_:)``.
public struct ScopeTree<EffectID: Hashable> {
    /// The lifecycle of one effect.
    public enum EffectState: Hashable, Sendable {
        /// Registered, its task not yet started.
        case pending
        /// Started and not cancelled.
        case running
        /// Cancelled (before or after it started).
        case cancelled
    }

    @usableFromInline
    struct Scope {
        var parent: ScopeID?
        var children: Set<ScopeID> = []
        var effects: Set<EffectToken> = []
    }

    @usableFromInline
    struct Effect {
        var scope: ScopeID
        var id: EffectID
        var state: EffectState
    }

    @usableFromInline var scopes: [ScopeID: Scope]
    @usableFromInline var effects: [EffectToken: Effect] = [:]
    @usableFromInline var nextScope: UInt32 = 1
    @usableFromInline var nextToken: UInt64 = 1

    /// The root scope (the server); it exists until closed.
    public let root = ScopeID(rawValue: 0)

    /// A tree holding only the root scope.
    public init() {
        scopes = [ScopeID(rawValue: 0): Scope(parent: nil)]
    }

    /// Whether `scope` is open.
    public func isOpen(_ scope: ScopeID) -> Bool {
        scopes[scope] != nil
    }

    /// The number of open scopes.
    public var scopeCount: Int { scopes.count }

    /// The number of effects registered and not yet finished.
    public var effectCount: Int { effects.count }

    /// The state of an effect, or `nil` once it has finished (or was never registered).
    public func state(of token: EffectToken) -> EffectState? {
        effects[token]?.state
    }

    /// Whether the effect has been cancelled (and has not yet finished).
    public func isCancelled(_ token: EffectToken) -> Bool {
        effects[token]?.state == .cancelled
    }

    /// Opens a child scope of `parent`.
    ///
    /// - Throws: ``SluiceError/Code/unknownScope`` if `parent` is closed.
    public mutating func openScope(in parent: ScopeID) throws(SluiceError) -> ScopeID {
        guard scopes[parent] != nil else { throw Self.unknown(parent) }
        let scope = ScopeID(rawValue: nextScope)
        nextScope &+= 1
        scopes[scope] = Scope(parent: parent)
        scopes[parent]!.children.insert(scope)
        return scope
    }

    /// Registers a pending effect under `id` in `scope`.
    ///
    /// - Throws: ``SluiceError/Code/unknownScope`` if `scope` is closed.
    public mutating func register(id: EffectID, in scope: ScopeID) throws(SluiceError) -> EffectToken {
        guard scopes[scope] != nil else { throw Self.unknown(scope) }
        let token = EffectToken(rawValue: nextToken)
        nextToken &+= 1
        effects[token] = Effect(scope: scope, id: id, state: .pending)
        scopes[scope]!.effects.insert(token)
        return token
    }

    /// Called by the effect's task before it does anything.
    ///
    /// - Returns: `true` if the effect may run; `false` if it was cancelled before it started (or is
    ///   unknown): the task must not run it, and still reports ``finished(_:)``.
    public mutating func start(_ token: EffectToken) -> Bool {
        guard effects[token]?.state == .pending else { return false }
        effects[token]!.state = .running
        return true
    }

    /// Cancels every effect registered under `id` in `scope` and in all scopes below it.
    ///
    /// - Returns: the effects cancelled by this call (pending and running), in registration order.
    ///   Pending ones will refuse to ``start(_:)``; running ones need their task cancelled.
    public mutating func cancel(id: EffectID, in scope: ScopeID) -> [EffectToken] {
        var cancelled: [EffectToken] = []
        forEachScope(under: scope) { tree, node in
            for token in tree.scopes[node]!.effects where tree.effects[token]!.id == id {
                if tree.effects[token]!.state != .cancelled {
                    tree.effects[token]!.state = .cancelled
                    cancelled.append(token)
                }
            }
        }
        return cancelled.sorted { $0.rawValue < $1.rawValue }
    }

    /// Cancels every effect in `scope` and below, whatever its ID; the scopes stay open.
    public mutating func cancelAll(in scope: ScopeID) -> [EffectToken] {
        var cancelled: [EffectToken] = []
        forEachScope(under: scope) { tree, node in
            for token in tree.scopes[node]!.effects where tree.effects[token]!.state != .cancelled {
                tree.effects[token]!.state = .cancelled
                cancelled.append(token)
            }
        }
        return cancelled.sorted { $0.rawValue < $1.rawValue }
    }

    /// Closes `scope` and every scope below it, cancelling their effects (a connection closed).
    ///
    /// - Returns: the effects cancelled by this call, in registration order.
    public mutating func close(_ scope: ScopeID) -> [EffectToken] {
        guard let node = scopes[scope] else { return [] }
        if node.children.isEmpty && node.effects.isEmpty {
            // A leaf with nothing registered (a key scope whose last effect ended): nothing to
            // cancel or walk.
            scopes[scope] = nil
            if let parent = node.parent { scopes[parent]?.children.remove(scope) }
            return []
        }
        let cancelled = cancelAll(in: scope)
        var doomed: [ScopeID] = []
        forEachScope(under: scope) { _, node in doomed.append(node) }
        if let parent = scopes[scope]!.parent {
            scopes[parent]?.children.remove(scope)
        }
        for node in doomed { scopes[node] = nil }
        return cancelled
    }

    /// The effect ended (completed, failed, cancelled, or refused to start): forget it.
    public mutating func finished(_ token: EffectToken) {
        guard let effect = effects.removeValue(forKey: token) else { return }
        scopes[effect.scope]?.effects.remove(token)
    }

    mutating func forEachScope(under scope: ScopeID, _ body: (inout ScopeTree, ScopeID) -> Void) {
        // Iterative depth-first walk (a deep tree must not overflow the stack).
        guard scopes[scope] != nil else { return }
        var stack = [scope]
        var visited: [ScopeID] = []
        while let node = stack.popLast() {
            visited.append(node)
            stack.append(contentsOf: scopes[node]!.children)
        }
        for node in visited { body(&self, node) }
    }

    static func unknown(_ scope: ScopeID) -> SluiceError {
        SluiceError(code: .unknownScope, message: "The scope is closed or was never opened.", value: scope.description)
    }
}

extension ScopeTree: Sendable where EffectID: Sendable {}
extension ScopeTree.Scope: Sendable {}
extension ScopeTree.Effect: Sendable where EffectID: Sendable {}
