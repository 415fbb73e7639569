// swift-tools-version: 6.1
import PackageDescription

/// libFuzzer targets for Sluice, in a package of their own so the root package is untouched.
///
/// They use only the public API of `SluiceCore`, `SluiceLibevent`, `SluiceLineProtocol` and
/// `SluiceHTTP`.
/// Build them with the fuzzer (and address) sanitizer on every module, so that the library code
/// is instrumented for coverage too (see `README.md` and `../scripts/fuzz.sh`):
///
///     swift build -c release --scratch-path ../.build-fuzz --sanitize fuzzer --sanitize address
let settings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// Each fuzz target is one file defining `LLVMFuzzerTestOneInput` and no `main`: libFuzzer
/// brings the entry point.
let fuzzTargetSettings = settings + [.unsafeFlags(["-parse-as-library"])]

/// Linked with lld: gold warns about a symbol of the address sanitizer's runtime.
let fuzzTargetLinking: [LinkerSetting] = [.unsafeFlags(["-use-ld=lld"], .when(platforms: [.linux]))]

let sluiceCore: Target.Dependency = .product(name: "SluiceCore", package: "Sluice")

/// A fuzz target: `FuzzSupport` plus `dependencies`, built as described above.
func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["FuzzSupport"] + dependencies,
        swiftSettings: fuzzTargetSettings,
        linkerSettings: fuzzTargetLinking
    )
}

let package = Package(
    name: "SluiceFuzz",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fuzz-line", targets: ["FuzzLine"]),
        .executable(name: "fuzz-timed", targets: ["FuzzTimed"]),
        .executable(name: "fuzz-ratelimit", targets: ["FuzzRateLimit"]),
        .executable(name: "fuzz-idempotency", targets: ["FuzzIdempotency"]),
        .executable(name: "fuzz-flight", targets: ["FuzzFlight"]),
        .executable(name: "fuzz-tables", targets: ["FuzzTables"]),
        .executable(name: "fuzz-http", targets: ["FuzzHTTP"]),
    ],
    dependencies: [
        .package(name: "Sluice", path: ".."),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .target(name: "FuzzSupport", dependencies: [], swiftSettings: settings),
        // The naive policy models of the root package's property tests (`Sources/FuzzModels` is a
        // link to `Tests/PolicyModels`), so both check against the same reference.
        .target(name: "FuzzModels", dependencies: [sluiceCore], swiftSettings: settings),
        fuzzTarget("FuzzLine", [
            .product(name: "SluiceLibevent", package: "Sluice"),
            .product(name: "SluiceLineProtocol", package: "Sluice"),
        ]),
        fuzzTarget("FuzzTimed", ["FuzzModels", sluiceCore]),
        fuzzTarget("FuzzRateLimit", ["FuzzModels", sluiceCore]),
        fuzzTarget("FuzzIdempotency", [sluiceCore]),
        fuzzTarget("FuzzFlight", ["FuzzModels", sluiceCore]),
        fuzzTarget("FuzzTables", ["FuzzModels", sluiceCore]),
        fuzzTarget("FuzzHTTP", [
            .product(name: "SluiceHTTP", package: "Sluice"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ]),
    ]
)
