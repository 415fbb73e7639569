/// A hash of a key's bytes that is the same in every process and on every run (unlike
/// `hashValue`, which Swift seeds per process): it picks the loop that owns a key, so a key's
/// owner does not depend on a random seed, and tests and operators can predict it.
///
/// 64-bit FNV-1a over the UTF-8 bytes, then MurmurHash3's 64-bit finaliser, so that every bit of
/// the result (the low bits too, which `hash % loops` reads) depends on every byte.
public enum StableHash {
    /// The stable hash of `key`'s UTF-8 bytes.
    @inlinable
    public static func of(_ key: String) -> UInt64 {
        var key = key
        return key.withUTF8 { of(UnsafeRawBufferPointer($0)) }
    }

    /// The stable hash of `bytes`.
    @inlinable
    public static func of(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return finalize(hash)
    }

    /// MurmurHash3's `fmix64`: spreads every input bit over the whole word.
    @inlinable
    static func finalize(_ value: UInt64) -> UInt64 {
        var hash = value
        hash ^= hash >> 33
        hash &*= 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash &*= 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        return hash
    }
}
