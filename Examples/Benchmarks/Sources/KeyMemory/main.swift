// sluice-keymem: measures what key tables cost in resident memory (RSS from /proc/self/statm).
//
//   sluice-keymem keys [count]   track `count` (default 1,000,000) throttle keys `user:<n>`;
//                                prints the RSS delta per key.
//   sluice-keymem flood [count]  send `count` (default 10,000,000) unique keys into a throttle table
//                                with a 64 MiB budget; prints peak RSS delta, entries kept/evicted.
//
// Exit status 1 if a figure misses its target (≤ 96 bytes/key; flood peak ≤ 64 MiB).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SluiceCore

/// The throttle the tables hold: one event a second per key (a button tap's).
let oneASecond = try! ThrottleOptions(interval: .seconds(1))

/// Resident set size in bytes (Linux: /proc/self/statm, second field, in pages).
func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let length = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard length > 0 else { return 0 }
    let fields = buffer[..<length].split(separator: UInt8(ascii: " "))
    guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func mib(_ bytes: Int) -> String {
    let tenths = bytes * 10 / (1 << 20)
    return "\(tenths / 10).\(tenths % 10) MiB"
}

/// Makes `user:<n>` without going through string interpolation's temporary buffers.
@inline(__always)
func userKey(_ n: Int) -> String {
    "user:" + String(n)
}

func trackKeys(_ count: Int) -> Bool {
    let before = residentBytes()
    var table = try! ThrottleTable<String>(options: oneASecond, budget: .entries(count))
    for n in 0..<count {
        _ = try? table.event(EventToken(UInt64(n)), key: userKey(n), now: Instant(nanoseconds: Int64(n)))
    }
    let after = residentBytes()
    let perKey = Double(after - before) / Double(count)
    let estimate = KeyTable<String, ThrottleState>.estimatedBytes(capacity: count) / count
    print("keys: \(table.table.count) throttle keys user:<n> tracked")
    print("keys: RSS before \(mib(before)), after \(mib(after)), delta \(mib(after - before))")
    print("keys: \(Int(perKey.rounded())) bytes/key (RSS delta / keys); table estimate \(estimate) bytes/key")
    withExtendedLifetime(table) {}
    return perKey <= 96
}

func flood(_ count: Int) -> Bool {
    let budget = 64 << 20
    let before = residentBytes()
    var table = try! ThrottleTable<String>(options: oneASecond, budget: .bytes(budget))
    var peak = residentBytes()
    for n in 0..<count {
        _ = try? table.event(EventToken(UInt64(n)), key: userKey(n), now: Instant(nanoseconds: Int64(n) * 100))
        if n & 0xFFFF == 0 { peak = max(peak, residentBytes()) }
    }
    peak = max(peak, residentBytes())
    let stats = table.table.stats
    let estimate = KeyTable<String, ThrottleState>.estimatedBytes(capacity: table.table.capacity)
    print("flood: \(count) unique keys into a \(mib(budget)) budget (capacity \(table.table.capacity) entries, estimated \(mib(estimate)) when full)")
    print("flood: kept \(table.table.count), evicted \(stats.evicted), expired \(stats.expired), inserted \(stats.inserted)")
    print("flood: RSS before \(mib(before)), peak delta \(mib(peak - before)), final delta \(mib(residentBytes() - before))")
    withExtendedLifetime(table) {}
    return peak - before <= budget
}

let arguments = CommandLine.arguments.dropFirst()
let mode = arguments.first ?? "all"
let count = arguments.dropFirst().first.flatMap { Int($0) }
var ok = true
if mode == "keys" || mode == "all" { ok = trackKeys(count ?? 1_000_000) && ok }
if mode == "flood" || mode == "all" { ok = flood(count ?? 10_000_000) && ok }
print(ok ? "OK: within targets" : "MISSED a target")
exit(ok ? 0 : 1)
