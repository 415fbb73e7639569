#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `Date` field's value (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`),
/// formatted once per second.
struct HTTPDate {
    private var second = -1
    /// The 29 bytes of the current value.
    private(set) var bytes = [UInt8](repeating: 0, count: 29)

    /// Brings the value up to the current second.
    mutating func update() {
        let now = time(nil)
        guard now != second else { return }
        second = now
        var parts = tm()
        var seconds = now
        gmtime_r(&seconds, &parts)
        let days: [StaticString] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months: [StaticString] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        var text: [UInt8] = []
        text.reserveCapacity(29)
        func append(_ name: StaticString) {
            text.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        }
        func two(_ value: Int32) {
            text.append(UInt8(ascii: "0") + UInt8(value / 10 % 10))
            text.append(UInt8(ascii: "0") + UInt8(value % 10))
        }
        append(days[Int(parts.tm_wday) % 7])
        text.append(contentsOf: ", ".utf8)
        two(parts.tm_mday)
        text.append(0x20)
        append(months[Int(parts.tm_mon) % 12])
        text.append(0x20)
        let year = parts.tm_year + 1900
        two(year / 100)
        two(year % 100)
        text.append(0x20)
        two(parts.tm_hour)
        text.append(UInt8(ascii: ":"))
        two(parts.tm_min)
        text.append(UInt8(ascii: ":"))
        two(parts.tm_sec)
        text.append(contentsOf: " GMT".utf8)
        bytes = text
    }
}
