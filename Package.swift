// swift-tools-version: 6.1
import PackageDescription

/// Settings every Sluice target shares: Swift 6 mode with strict concurrency, and the
/// upcoming features the project holds itself to.
let sharedSwiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The built-in plugins, for the targets that serve or test all of them.
let builtInPlugins: [Target.Dependency] = ["SluiceButtonTap", "SluicePayment", "SluiceSearch", "SluiceRateLimit", "SluicePage"]

let package = Package(
    name: "Sluice",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SluiceCore", targets: ["SluiceCore"]),
        .library(name: "SluiceTesting", targets: ["SluiceTesting"]),
        .library(name: "SluicePluginTesting", targets: ["SluicePluginTesting"]),
        .library(name: "SluiceLibevent", targets: ["SluiceLibevent"]),
        .library(name: "Sluice", targets: ["Sluice"]),
        .library(name: "SluiceFronts", targets: ["SluiceFronts"]),
        .library(name: "SluiceLineProtocol", targets: ["SluiceLineProtocol"]),
        .library(name: "SluiceHTTPCodec", targets: ["SluiceHTTPCodec"]),
        .library(name: "SluiceHTTP", targets: ["SluiceHTTP"]),
        .library(name: "SluiceButtonTap", targets: ["SluiceButtonTap"]),
        .library(name: "SluicePayment", targets: ["SluicePayment"]),
        .library(name: "SluiceSearch", targets: ["SluiceSearch"]),
        .library(name: "SluiceRateLimit", targets: ["SluiceRateLimit"]),
        .library(name: "SluicePage", targets: ["SluicePage"]),
        .library(name: "SluiceBuiltInCodecs", targets: ["SluiceBuiltInCodecs"]),
        .library(name: "SluiceRedis", targets: ["SluiceRedis"]),
        .library(name: "SluicePaymentRedisLedger", targets: ["SluicePaymentRedisLedger"]),
        .executable(name: "sluice-echo", targets: ["SluiceEcho"]),
        .executable(name: "sluice-load", targets: ["SluiceLoad"]),
        .executable(name: "sluice-embedding", targets: ["SluiceEmbedding"]),
        .library(name: "SluiceHummingbird", targets: ["SluiceHummingbird"]),
        .executable(name: "sluice-hummingbird-app", targets: ["SluiceHummingbirdApp"]),
    ],
    traits: [
        // Hummingbird (and SwiftNIO under it) is built only for packages that ask for it:
        // `SluiceHummingbird`, its tests and its example compile empty without this trait.
        .trait(name: "Hummingbird", description: "Build SluiceHummingbird: Sluice middleware for Hummingbird 2 apps."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Built only with the `Hummingbird` trait; its own default traits (swift-configuration
        // support, full Foundation) are not needed by the middleware.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        // Only for the test that names NIO's loops beside Sluice's (Hummingbird brings it anyway).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
    ],
    targets: [
        // MARK: C layer
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent",
            providers: [.apt(["libevent-dev"]), .brew(["libevent"])]
        ),
        .target(name: "CSluiceShims"),
        .target(name: "CSluiceCacheHints"),
        .systemLibrary(
            name: "CHiredis",
            // No `pkgConfig: "hiredis"`: hiredis.pc passes -D_FILE_OFFSET_BITS=64, which SwiftPM
            // refuses with a warning on every build (and which means nothing on 64-bit). The
            // headers are found as <hiredis/…> on the default include path (Debian's
            // libhiredis-dev); elsewhere, add `-Xcc -I<prefix>/include -Xlinker -L<prefix>/lib`.
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]
        ),

        // MARK: Swift layers
        .target(
            name: "SluiceCore",
            dependencies: ["CSluiceCacheHints", .product(name: "DequeModule", package: "swift-collections")]
        ),
        .target(name: "SluiceTesting", dependencies: ["SluiceCore"]),
        .target(
            name: "SluiceLibevent",
            dependencies: ["CLibevent", "CSluiceShims", "SluiceCore", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "Sluice",
            dependencies: [
                "CSluiceCacheHints",
                "SluiceCore",
                "SluiceLibevent",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        .target(
            name: "SluiceRedis",
            dependencies: [
                "CHiredis",
                "CLibevent",
                "SluiceLibevent",
                "SluiceCore",
                "Sluice",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // MARK: Fronts (machinery that knows no plugin)
        // What every front shares: the echo limit, the listener with its connections and requests
        // counted, the activity a draining server waits on.
        .target(
            name: "SluiceFronts",
            dependencies: [
                "SluiceCore", "SluiceLibevent",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        .target(
            name: "SluiceLineProtocol",
            dependencies: [
                "Sluice", "SluiceFronts",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // The HTTP layer every HTTP front shares (Sluice's server, framework middleware): the
        // strict parser and its request view, the codec protocol, answers, problems and the
        // outcome mapping. No transport.
        .target(
            name: "SluiceHTTPCodec",
            dependencies: [
                "Sluice",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ]
        ),

        .target(
            name: "SluiceHTTP",
            dependencies: [
                "Sluice", "SluiceLibevent", "SluiceFronts", "SluiceHTTPCodec",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // MARK: Plugins (domain only: typed input, typed output)
        .target(name: "SluiceButtonTap", dependencies: ["Sluice"], path: "Plugins/ButtonTap", exclude: ["README.md"]),
        .target(name: "SluicePayment", dependencies: ["Sluice"], path: "Plugins/Payment", exclude: ["README.md"]),
        .target(name: "SluiceSearch", dependencies: ["Sluice"], path: "Plugins/Search", exclude: ["README.md"]),
        .target(name: "SluiceRateLimit", dependencies: ["Sluice"], path: "Plugins/RateLimit", exclude: ["README.md"]),
        .target(name: "SluicePage", dependencies: ["Sluice"], path: "Plugins/Page", exclude: ["README.md"]),
        .target(
            name: "SluicePaymentRedisLedger",
            dependencies: ["Sluice", "SluicePayment", "SluiceRedis", .product(name: "Logging", package: "swift-log")],
            path: "Plugins/PaymentRedisLedger", exclude: ["README.md"]),

        // MARK: The built-in plugins' codecs, one per front (a user's own codec is a peer of these)
        .target(
            name: "SluiceBuiltInCodecs",
            dependencies: builtInPlugins + [
                "Sluice", "SluiceLibevent", "SluiceLineProtocol", "SluiceHTTPCodec",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Plugins/Codecs",
            exclude: ["README.md"]
        ),

        // MARK: Framework middleware (the `Hummingbird` trait)
        .target(
            name: "SluiceHummingbird",
            dependencies: [
                "Sluice", "SluiceHTTPCodec",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
            ]
        ),

        // MARK: Test support for plugin authors (a manual clock, harnesses for the gate and both fronts)
        .target(
            name: "SluicePluginTesting",
            dependencies: [
                "Sluice", "SluiceTesting", "SluiceLineProtocol", "SluiceHTTP",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),

        // MARK: Examples
        .executableTarget(
            name: "SluiceEcho",
            dependencies: builtInPlugins + [
                "Sluice", "SluiceFronts", "SluiceLineProtocol", "SluiceHTTP", "SluiceBuiltInCodecs", "SluiceRedis",
                "SluicePaymentRedisLedger",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            path: "Examples/EchoServer",
            exclude: ["README.md"]
        ),

        .target(
            name: "SluiceEmbeddingExample",
            dependencies: builtInPlugins + ["Sluice"],
            path: "Examples/Embedding/Sources/SluiceEmbeddingExample"
        ),
        .executableTarget(
            name: "SluiceEmbedding",
            dependencies: ["SluiceEmbeddingExample"],
            path: "Examples/Embedding/Sources/sluice-embedding"
        ),

        .executableTarget(
            name: "SluiceHummingbirdApp",
            dependencies: [
                "Sluice", "SluiceHummingbird",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
            ],
            path: "Examples/HummingbirdApp",
            exclude: ["README.md", "bench.sh"]
        ),

        .target(
            name: "SluiceLoadCore",
            dependencies: [
                "CLibevent",
                "SluiceCore",
                "SluiceLibevent",
                "SluiceLineProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "Examples/LoadTest/Sources/SluiceLoadCore"
        ),
        .executableTarget(
            name: "SluiceLoad",
            dependencies: [
                "SluiceLoadCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/LoadTest/Sources/SluiceLoad"
        ),

        // MARK: Tests
        // posix_spawn for child processes and LeakSanitizer's suppression of XCTest's own leak;
        // linked into the test bundle through SluiceTestSupport.
        .target(name: "CSluiceTestSupport", path: "Tests/CSupport"),
        .target(name: "SluiceTestSupport", dependencies: ["CSluiceTestSupport", "SluiceLibevent"], path: "Tests/Support"),
        // Naive models of the policies, shared by the property tests and the fuzz targets.
        .target(name: "SluicePolicyModels", dependencies: ["SluiceCore"], path: "Tests/PolicyModels"),
        .testTarget(
            name: "SluiceCoreTests",
            dependencies: [
                "SluiceCore",
                "SluiceTesting",
                "SluicePolicyModels",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "SluiceLibeventTests",
            dependencies: [
                "SluiceLibevent", "SluiceCore", "SluiceTestSupport",
                // The transport's tests speak lines to it through the line front's framing.
                "SluiceLineProtocol",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "SluiceGateTests",
            // The built-in plugins serve as fixtures, beside plugins the tests write themselves.
            dependencies: builtInPlugins + [
                "Sluice", "SluiceCore", "SluiceLibevent", "SluicePluginTesting", "SluiceTestSupport", "SluiceLineProtocol",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "SluiceLineProtocolTests",
            dependencies: builtInPlugins + [
                "Sluice", "SluiceLineProtocol", "SluiceBuiltInCodecs", "SluicePluginTesting", "SluiceTestSupport",
            ]
        ),
        .testTarget(
            name: "SluiceHTTPTests",
            dependencies: builtInPlugins + [
                "Sluice", "SluiceCore", "SluiceLibevent", "SluiceHTTP", "SluiceHTTPCodec", "SluiceBuiltInCodecs",
                "SluicePluginTesting", "SluiceTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "SluicePluginTests",
            dependencies: [
                "Sluice", "SluiceLibevent", "SluiceLineProtocol", "SluiceBuiltInCodecs", "SluicePluginTesting",
                "SluiceTestSupport", "SluiceButtonTap", "SluicePayment", "SluiceSearch", "SluiceEmbeddingExample",
            ]
        ),
        .testTarget(
            name: "SluiceRedisTests",
            dependencies: [
                "Sluice", "SluiceCore", "SluiceLibevent", "SluiceRedis", "SluicePayment", "SluicePaymentRedisLedger",
                "SluiceTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            // The example server run as a process: draining, port ownership, two instances on
            // one Redis, and the exactly-once faults.
            name: "SluiceEchoTests",
            dependencies: ["SluiceLibevent", "SluiceTestSupport"]
        ),
        .testTarget(
            name: "SluiceHummingbirdTests",
            dependencies: [
                "Sluice", "SluiceHTTP", "SluiceHummingbird", "SluicePluginTesting", "SluiceTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Hummingbird"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
                .product(name: "NIOEmbedded", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Hummingbird"])),
            ]
        ),
        .testTarget(
            name: "SluiceLoadTests",
            dependencies: [
                "SluiceLoadCore",
                "SluiceLibevent",
                "SluiceLineProtocol",
                "SluiceCore",
                "SluiceTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
    ]
)

let cTargets: Set<String> = ["CLibevent", "CSluiceShims", "CHiredis", "CSluiceTestSupport"]
for target in package.targets where !cTargets.contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + sharedSwiftSettings
}
