import ArgumentParser
import SluiceCore
import SluiceLoadCore
import Testing

@Suite("sluice-load option parsing")
struct OptionParsingTests {
    @Test("defaults: closed loop, 10 s, the standard mix")
    func defaults() throws {
        let configuration = try LoadOptions.parse([]).configuration()
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 7070)
        #expect(configuration.connections == 16)
        #expect(configuration.depth == 8)
        #expect(configuration.limit == .duration(.seconds(10)))
        #expect(configuration.mix == RequestMix.standard)
        #expect(configuration.keyDistribution == .uniform)
        #expect(configuration.rate == nil)
        #expect(configuration.rawEcho == false)
    }

    @Test("every option reaches the configuration")
    func allOptions() throws {
        let configuration = try LoadOptions.parse([
            "--host", "::1", "--port", "7171", "--connections", "50", "--depth", "4", "--requests", "1000",
            "--mix", "echo=1,pay=3", "--keys", "1000000", "--key-dist", "zipf:1.2", "--dup-ratio", "0.5",
            "--rate", "2500", "--loops", "2", "--drain-timeout", "250ms", "--seed", "9", "--echo-bytes", "32",
        ]).configuration()
        #expect(configuration.host == "::1")
        #expect(configuration.port == 7171)
        #expect(configuration.connections == 50)
        #expect(configuration.depth == 4)
        #expect(configuration.limit == .requests(1000))
        #expect(configuration.mix.weight(of: .echo) == 1)
        #expect(configuration.mix.weight(of: .pay) == 3)
        #expect(configuration.mix.weight(of: .tap) == 0)
        #expect(configuration.keys == 1_000_000)
        #expect(configuration.keyDistribution == .zipf(exponent: 1.2))
        #expect(configuration.dupRatio == 0.5)
        #expect(configuration.rate == 2500)
        #expect(configuration.loops == 2)
        #expect(configuration.drainTimeout == .milliseconds(250))
        #expect(configuration.seed == 9)
        #expect(configuration.echoBytes == 32)
        #expect(configuration.openLoopInterval == .milliseconds(20))
    }

    @Test("--raw-echo without --mix sends echo lines only")
    func rawEcho() throws {
        let configuration = try LoadOptions.parse(["--raw-echo", "--line-bytes", "128"]).configuration()
        #expect(configuration.rawEcho)
        #expect(configuration.lineBytes == 128)
        #expect(configuration.mix.includes(.echo))
        #expect(!configuration.mix.includes(.pay))
    }

    @Test("--verbatim-echo without --mix sends ECHO requests only")
    func verbatimEcho() throws {
        let configuration = try LoadOptions.parse(["--verbatim-echo", "--echo-bytes", "50"]).configuration()
        #expect(configuration.verbatimEcho)
        #expect(!configuration.rawEcho)
        #expect(configuration.echoBytes == 50)
        #expect(configuration.mix.includes(.echo))
        #expect(!configuration.mix.includes(.tap))
    }

    @Test(
        "bad combinations and values are refused",
        arguments: [
            ["--duration", "1s", "--requests", "5"],
            ["--duration", "soon"],
            ["--duration", "0s"],
            ["--requests", "0"],
            ["--connections", "0"],
            ["--depth", "0"],
            ["--port", "70000"],
            ["--dup-ratio", "1.5"],
            ["--rate", "0"],
            ["--key-dist", "normal"],
            ["--mix", "echo=1,ping=2"],
            ["--raw-echo", "--mix", "echo=1,pay=1"],
            ["--raw-echo", "--line-bytes", "1"],
            ["--verbatim-echo", "--raw-echo"],
            ["--verbatim-echo", "--mix", "echo=1,tap=1"],
            ["--keys", "0"],
            ["--loops", "0"],
        ])
    func refused(arguments: [String]) throws {
        let options = try LoadOptions.parse(arguments)
        #expect(throws: LoadError.self) { try options.configuration() }
    }

    @Test(
        "durations",
        arguments: [
            ("10", Duration.seconds(10)), ("2.5s", .milliseconds(2500)), ("500ms", .milliseconds(500)),
            ("1m", .seconds(60)), ("1h", .seconds(3600)), ("250MS", .milliseconds(250)),
        ])
    func durations(text: String, expected: Duration) throws {
        #expect(try parseDuration(text) == expected)
    }

    @Test("bad durations", arguments: ["", "s", "0", "0s", "-5", "1d", "ten", "nan", "inf"])
    func badDurations(text: String) {
        #expect(throws: LoadError.self) { try parseDuration(text) }
    }
}

@Suite("--mix")
struct MixTests {
    @Test("weights and the ticket → verb mapping follow the cumulative weights")
    func tickets() throws {
        let mix = try RequestMix(parsing: "echo=70,tap=10,pay=10,search=10")
        #expect(mix.totalWeight == 100)
        #expect(mix.verb(forTicket: 0) == .echo)
        #expect(mix.verb(forTicket: 69) == .echo)
        #expect(mix.verb(forTicket: 70) == .tap)
        #expect(mix.verb(forTicket: 79) == .tap)
        #expect(mix.verb(forTicket: 80) == .pay)
        #expect(mix.verb(forTicket: 89) == .pay)
        #expect(mix.verb(forTicket: 90) == .search)
        #expect(mix.verb(forTicket: 99) == .search)
    }

    @Test("a zero weight is never drawn; order and case do not matter")
    func zeroWeight() throws {
        let mix = try RequestMix(parsing: " PAY=1 , echo=0,Search=3")
        #expect(mix.weight(of: .pay) == 1)
        #expect(mix.weight(of: .search) == 3)
        #expect(!mix.includes(.echo))
        #expect(!mix.includes(.tap))
        var random = SplitMix64(seed: 3)
        var seen = Set<Verb>()
        for _ in 0..<2000 { seen.insert(mix.pick(using: &random)) }
        #expect(seen == [.pay, .search])
    }

    @Test("draws follow the weights")
    func proportions() throws {
        let mix = try RequestMix(parsing: "echo=70,tap=10,pay=10,search=10")
        var random = SplitMix64(seed: 42)
        var counts = [Verb: Int]()
        let draws = 100_000
        for _ in 0..<draws { counts[mix.pick(using: &random), default: 0] += 1 }
        #expect(abs(Double(counts[.echo, default: 0]) / Double(draws) - 0.70) < 0.01)
        for verb in [Verb.tap, .pay, .search] {
            #expect(abs(Double(counts[verb, default: 0]) / Double(draws) - 0.10) < 0.01)
        }
    }

    @Test(
        "malformed mixes are refused",
        arguments: ["", "echo", "echo=", "echo=-1", "echo=x", "echo=0", "echo=1,echo=2", "ping=1", "echo=1;tap=1", "echo=1=2"])
    func malformed(text: String) {
        #expect(throws: LoadError.self) { try RequestMix(parsing: text) }
    }
}

@Suite("--key-dist")
struct KeyDistributionTests {
    @Test("parsing")
    func parsing() throws {
        #expect(try KeyDistribution(parsing: "uniform") == .uniform)
        #expect(try KeyDistribution(parsing: "UNIQUE") == .unique)
        #expect(try KeyDistribution(parsing: "zipf:0.99") == .zipf(exponent: 0.99))
        for bad in ["zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:x", "zipf:inf", "gauss", ""] {
            #expect(throws: LoadError.self) { try KeyDistribution(parsing: bad) }
        }
    }

    @Test("uniform draws stay in range and cover it")
    func uniform() throws {
        let sampler = try KeySampler(distribution: .uniform, keyCount: 10)
        var random = SplitMix64(seed: 1)
        var seen = Set<UInt64>()
        for _ in 0..<1000 {
            let key = sampler.next(using: &random)
            #expect(key < 10)
            seen.insert(key)
        }
        #expect(seen.count == 10)
    }

    @Test("unique never repeats a key")
    func unique() throws {
        let sampler = try KeySampler(distribution: .unique, keyCount: 1)
        var random = SplitMix64(seed: 1)
        let keys = (0..<10_000).map { _ in sampler.next(using: &random) }
        #expect(Set(keys).count == keys.count)
    }

    @Test("zipf: rank r is drawn about (r+1)^-s / H as often; rank 0 most")
    func zipf() throws {
        let exponent = 1.0
        let keyCount = 100
        let sampler = try KeySampler(distribution: .zipf(exponent: exponent), keyCount: keyCount)
        #expect(sampler.rank(forUniform: 0) == 0)
        #expect(sampler.rank(forUniform: 0.999_999_999) == keyCount - 1)
        var random = SplitMix64(seed: 7)
        var counts = [Int](repeating: 0, count: keyCount)
        let draws = 200_000
        for _ in 0..<draws { counts[Int(sampler.next(using: &random))] += 1 }
        let harmonic = (1...keyCount).reduce(0.0) { $0 + 1 / Double($1) }
        for rank in [0, 1, 2, 9] {
            let expected = 1 / Double(rank + 1) / harmonic
            let observed = Double(counts[rank]) / Double(draws)
            #expect(abs(observed - expected) < expected * 0.05, "rank \(rank): \(observed) vs \(expected)")
        }
        #expect(counts[0] == counts.max())
    }

    @Test("zero keys are refused")
    func zeroKeys() {
        #expect(throws: LoadError.self) { try KeySampler(distribution: .uniform, keyCount: 0) }
    }
}

@Suite("reply lines")
struct ReplyLineTests {
    @Test("id, status and details")
    func fields() throws {
        let reply = try #require(ReplyLine("42 OK hello world"))
        #expect(reply.id == 42)
        #expect(reply.kind == .ok)
        #expect(reply.status == "OK")
        #expect(reply.details == "hello world")
        #expect(!reply.isConnectionError)
    }

    @Test(
        "status words map to reply kinds",
        arguments: [
            ("1 PONG", ReplyKind.pong), ("1 OK tap=3", .ok), ("1 LIMITED retry-after-ms=5", .limited),
            ("1 THROTTLED retry-after-ms=900", .throttled), ("1 OK charge=c9", .ok),
            ("1 OK charge=c9 replayed=true", .okReplayed), ("1 DECLINED reason=amount-limit", .declined),
            ("1 DECLINED reason=amount-limit replayed=true", .declinedReplayed), ("1 MISMATCH", .mismatch),
            ("1 CANCELLED", .cancelled), ("1 SUPERSEDED", .superseded), ("1 ERR unknown-verb", .error),
            ("1 ok", .unknown), ("1 OK replayed=false", .ok), ("1 OK text replayed=truex", .ok),
            ("1 OK xreplayed=true", .ok), ("1 OK replayed=true charge=c1", .okReplayed), ("1 OK replayed=true", .okReplayed),
        ])
    func kinds(text: String, kind: ReplyKind) throws {
        #expect(try #require(ReplyLine(text)).kind == kind)
    }

    @Test("connection-level errors and ids that are not ours")
    func ids() throws {
        let malformed = try #require(ReplyLine("- ERR malformed"))
        #expect(malformed.isConnectionError)
        #expect(malformed.id == nil)
        #expect(malformed.kind == .error)
        #expect(malformed.details == "malformed")
        #expect(try #require(ReplyLine("abc OK")).id == nil)
        #expect(try #require(ReplyLine("99999999999999999999999 OK")).id == nil)
        #expect(try #require(ReplyLine("18446744073709551615 OK")).id == UInt64.max)
        #expect(try #require(ReplyLine("7 PONG")).details == "")
    }

    @Test("lines without a status word are not replies", arguments: ["", "42", "42 ", " OK", "hello"])
    func notReplies(text: String) {
        #expect(ReplyLine(text) == nil)
    }

    @Test("fields are found by name, whole names only")
    func namedFields() throws {
        var text = "5 OK charge=c17 replayed=true"
        try text.withUTF8 { bytes in
            let fields = try #require(ReplyFields(UnsafeRawBufferPointer(bytes)))
            #expect(fields.field("charge").map { String(decoding: $0, as: UTF8.self) } == "c17")
            #expect(fields.field("replayed").map { String(decoding: $0, as: UTF8.self) } == "true")
            #expect(fields.field("char") == nil)
            #expect(fields.field("results") == nil)
        }
    }

    @Test("STATS details become counters")
    func stats() throws {
        let stats = try #require(ServerStats(details: "taps=3 payments=10 declines=1 searches=0 cancelled=0 keys=4 connections=2"))
        #expect(stats.payments == 10)
        #expect(stats.declines == 1)
        #expect(stats.fields["keys"] == 4)
        #expect(ServerStats(details: "no counters here") == nil)
    }
}
