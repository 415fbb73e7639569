import Logging
import Sluice
import SluiceLibevent
import SluicePayment
import SluiceRedis

/// The simulated processor's ledger in a Redis of its own (`sluice-echo --processor-ledger`), apart
/// from the Sluice store as a payment provider is apart from its clients: every instance charging
/// through it shares one book of charges, kept by record identity with the greatest fence seen.
///
/// One hash per record, `ledger:<plugin>:<record>` (`fence`, `charge`, `amount`), kept for the
/// payments' retention; one script checks and records in one step. A fence is sent as 20 digits
/// with leading zeros, so that the script compares fences as text (Lua's numbers are doubles
/// and would round a 64-bit fence).
public final class RedisChargeLedger: ChargeLedger {
    private static let script = """
        local e = redis.call('HMGET', KEYS[1], 'fence', 'charge')
        if e[2] then
          if ARGV[1] < e[1] then return {'stale', e[1]} end
          if ARGV[1] > e[1] then redis.call('HSET', KEYS[1], 'fence', ARGV[1]) end
          return {'already', e[2]}
        end
        redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'charge', ARGV[3], 'amount', ARGV[2])
        redis.call('PEXPIRE', KEYS[1], ARGV[4])
        return {'charged', ARGV[3]}
        """

    /// The ledger's Redis server and database.
    public let endpoint: RedisEndpoint
    private let connections: [ObjectIdentifier: RedisConnection]
    private let retentionMilliseconds: Int64

    /// A ledger on `endpoint`, with a connection on each loop of `group`, keeping each charge
    /// `retention`; a call it does not answer within `timeout` is `unavailable`. Call ``start()``.
    public init(
        endpoint: RedisEndpoint, group: SluiceLoopGroup, retention: Duration, timeout: Duration = .seconds(1),
        logger: Logger = Logger(label: "sluice.ledger")
    ) {
        self.endpoint = endpoint
        self.retentionMilliseconds = max(1, retention.nanosecondsClamped / 1_000_000)
        var connections: [ObjectIdentifier: RedisConnection] = [:]
        for loop in group.loops {
            connections[ObjectIdentifier(loop)] = RedisConnection(
                endpoint: endpoint, loop: loop, timeout: timeout, logger: logger)
        }
        self.connections = connections
    }

    /// Connects every loop's connection (they reconnect by themselves from then on).
    public func start() {
        for connection in connections.values { connection.start() }
    }

    /// Closes every connection on its loop (before the loops stop).
    public func shutdown() async {
        for connection in connections.values {
            await connection.loop.submit { connection.close() }
        }
    }

    public func charge(_ call: LedgerCall, on caller: any StoreCaller) async throws(ChargeLedgerError) -> LedgerAnswer {
        guard let connection = connections[ObjectIdentifier(caller)] ?? connections.values.first else {
            throw ChargeLedgerError(code: .unavailable, message: "no ledger connection", value: call.record)
        }
        let reply = await connection.call([
            "EVAL", Self.script, "1", "ledger:\(call.record)", call.fence.paddedDecimal, String(call.amount), call.chargeID,
            String(retentionMilliseconds),
        ])
        switch reply {
        case .failure(let error):
            throw ChargeLedgerError(code: .unavailable, message: error.message, value: "\(endpoint)")
        case .success(let reply):
            guard let fields = reply.array, fields.count == 2, let kind = fields[0].text, let value = fields[1].text else {
                throw ChargeLedgerError(code: .protocolError, message: "unexpected reply from the ledger", value: "\(reply)")
            }
            switch kind {
            case "charged": return .charged(value)
            case "already": return .alreadyCharged(value)
            case "stale":
                guard let newest = UInt64(value) else { break }
                return .stale(newest: FencingToken(value: newest))
            default: break
            }
            throw ChargeLedgerError(code: .protocolError, message: "unexpected reply from the ledger", value: "\(reply)")
        }
    }
}
