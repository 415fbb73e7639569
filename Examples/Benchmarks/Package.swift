// swift-tools-version: 6.1
import PackageDescription

/// Sluice's benchmark suites (package-benchmark), kept in a nested package so the main package
/// does not depend on the benchmark harness.
///
/// Run: `swift package --scratch-path ../../.build-bench benchmark --target PolicyBenchmarks`
/// Memory figures: `swift run --scratch-path ../../.build-bench -c release sluice-keymem`
let package = Package(
    name: "SluiceBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Sluice", path: "../.."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
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
            swiftSettings: [
                .swiftLanguageMode(.v6),
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),

        // MARK: Key-table memory (RSS measurements)
        .executableTarget(
            name: "sluice-keymem",
            dependencies: [.product(name: "SluiceCore", package: "Sluice")],
            path: "Sources/KeyMemory"
        ),
    ]
)
