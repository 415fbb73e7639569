// swift-tools-version: 6.1
import PackageDescription

/// Sluice's benchmark suites (package-benchmark), kept in a nested package so the main package
/// does not depend on the benchmark harness.
///
/// Run: `swift package --scratch-path ../../.build-bench benchmark --target PolicyBenchmarks`
/// Memory figures: `swift run --scratch-path ../../.build-bench -c release sluice-keymem`
/// The settings of the targets written to the root package's rules (Swift 6, `ExistentialAny`,
/// `MemberImportVisibility`).
let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "SluiceBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Sluice", path: "../..", traits: ["Hummingbird"]),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // MARK: Policy decisions (package-benchmark)
        .executableTarget(
            name: "PolicyBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "SluiceCore", package: "Sluice"),
            ],
            path: "Benchmarks/PolicyBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),

        // MARK: Event loop throughput (package-benchmark)
        .executableTarget(
            name: "LoopBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "SluiceLibevent", package: "Sluice"),
            ],
            path: "Benchmarks/LoopBenchmarks",
            swiftSettings: strictSwift,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),

        // MARK: SwiftNIO line echo (the load-test baseline)
        .executableTarget(
            name: "nio-echo",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/NIOEcho",
            swiftSettings: strictSwift
        ),

        // MARK: Hummingbird 2 POST /tap/<key> (the HTTP baseline)
        .executableTarget(
            name: "hummingbird-tap",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/HummingbirdTap",
            swiftSettings: strictSwift
        ),

        // MARK: What ThrottleMiddleware adds to a request, in process (no sockets)
        .executableTarget(
            name: "hummingbird-middleware-profile",
            dependencies: [
                .product(name: "Sluice", package: "Sluice"),
                .product(name: "SluiceHummingbird", package: "Sluice"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            path: "Sources/HummingbirdMiddlewareProfile",
            swiftSettings: strictSwift
        ),

        // MARK: The plugins the gate benchmarks and gate-profile share
        .target(
            name: "GateBenchPlugins",
            dependencies: [.product(name: "Sluice", package: "Sluice")],
            path: "Sources/GateBenchPlugins",
            swiftSettings: strictSwift
        ),

        // MARK: Gate decisions per second on one loop (package-benchmark)
        .executableTarget(
            name: "GateBenchmarks",
            dependencies: [
                "GateBenchPlugins",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Sluice", package: "Sluice"),
                .product(name: "SluiceButtonTap", package: "Sluice"),
                .product(name: "SluicePayment", package: "Sluice"),
                .product(name: "SluiceLineProtocol", package: "Sluice"),
                .product(name: "SluiceBuiltInCodecs", package: "Sluice"),
            ],
            path: "Benchmarks/GateBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),

        // MARK: One gate path in a loop, for profilers
        .executableTarget(
            name: "gate-profile",
            dependencies: [
                "GateBenchPlugins",
                .product(name: "Sluice", package: "Sluice"),
                .product(name: "SluiceButtonTap", package: "Sluice"),
                .product(name: "SluicePayment", package: "Sluice"),
            ],
            path: "Sources/GateProfile"
        ),

        // MARK: Key-table memory (RSS measurements)
        .executableTarget(
            name: "sluice-keymem",
            dependencies: [.product(name: "SluiceCore", package: "Sluice")],
            path: "Sources/KeyMemory"
        ),
    ]
)
