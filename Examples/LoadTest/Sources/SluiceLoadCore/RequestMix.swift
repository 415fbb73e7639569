/// Which verbs a run sends, with integer weights: `echo=70,tap=10,pay=10,search=10`.
public struct RequestMix: Sendable, Hashable, CustomStringConvertible {
    /// The weight of each verb (0 when absent), indexed by `Verb.rawValue`.
    public let weights: [Int]
    /// The sum of the weights (at least 1).
    public let totalWeight: Int
    private let cumulative: [Int]

    /// The default mix: mostly ECHO, with TAP, PAY and SEARCH.
    public static let standard = try! RequestMix(parsing: "echo=70,tap=10,pay=10,search=10")

    /// Parses `verb=weight` pairs separated by commas. Verbs are `echo`, `tap`, `pay`,
    /// `search` (case-insensitive), each at most once; weights are non-negative integers and at
    /// least one is positive.
    public init(parsing text: String) throws(LoadError) {
        var weights = [Int](repeating: 0, count: Verb.allCases.count)
        var seen = Set<Verb>()
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        for part in parts {
            let pair = part.split(separator: "=", omittingEmptySubsequences: false)
            guard pair.count == 2 else {
                throw LoadError("--mix: each entry must be verb=weight", input: String(part))
            }
            let name = pair[0].trimmingSpaces
            guard let verb = Verb(name: name) else {
                throw LoadError("--mix: unknown verb (use echo, tap, pay, search)", input: String(name))
            }
            guard seen.insert(verb).inserted else {
                throw LoadError("--mix: verb given twice", input: String(name))
            }
            guard let weight = Int(pair[1].trimmingSpaces), weight >= 0 else {
                throw LoadError("--mix: weight must be a non-negative integer", input: String(pair[1]))
            }
            weights[verb.rawValue] = weight
        }
        try self.init(weights: weights, input: text)
    }

    /// A mix with the given weight per verb.
    public init(_ weights: [Verb: Int]) throws(LoadError) {
        var array = [Int](repeating: 0, count: Verb.allCases.count)
        for (verb, weight) in weights {
            guard weight >= 0 else { throw LoadError("--mix: weight must be non-negative", input: "\(verb)=\(weight)") }
            array[verb.rawValue] = weight
        }
        try self.init(weights: array, input: "\(weights)")
    }

    private init(weights: [Int], input: String) throws(LoadError) {
        let total = weights.reduce(0, +)
        guard total > 0 else { throw LoadError("--mix: at least one weight must be positive", input: input) }
        self.weights = weights
        self.totalWeight = total
        var running = 0
        self.cumulative = weights.map { running += $0; return running }
    }

    /// The weight of `verb`.
    public func weight(of verb: Verb) -> Int { weights[verb.rawValue] }

    /// Whether `verb` is ever sent.
    public func includes(_ verb: Verb) -> Bool { weight(of: verb) > 0 }

    /// The verb for a uniform draw `ticket` in `0..<totalWeight`.
    public func verb(forTicket ticket: Int) -> Verb {
        precondition(ticket >= 0 && ticket < totalWeight, "ticket out of range")
        for verb in Verb.allCases where ticket < cumulative[verb.rawValue] {
            return verb
        }
        fatalError("unreachable: cumulative weights end at totalWeight")
    }

    /// Draws a verb with the mix's probabilities.
    public func pick(using random: inout some RandomNumberGenerator) -> Verb {
        verb(forTicket: Int.random(in: 0..<totalWeight, using: &random))
    }

    public var description: String {
        Verb.allCases.filter(includes).map { "\($0.name)=\(weight(of: $0))" }.joined(separator: ",")
    }
}

extension Substring {
    /// The text without leading and trailing spaces.
    var trimmingSpaces: Substring {
        var result = self
        while result.first == " " { result.removeFirst() }
        while result.last == " " { result.removeLast() }
        return result
    }
}
