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

        // MARK: Gate decisions per second on one loop (package-benchmark)
        .executableTarget(
            name: "GateBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Sluice", package: "Sluice"),
                .product(name: "SluiceButtonTap", package: "Sluice"),
                .product(name: "SluicePayment", package: "Sluice"),
            ],
            path: "Benchmarks/GateBenchmarks",
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
