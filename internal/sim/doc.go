// Package sim is the place for simulators, load generators and the
// replays of the papers' experiments: code that produces data with a known
// truth, so that the algorithms can be measured against it. Nothing here is
// part of the collector or the CLI: production code never imports it (the
// test of this package checks that), only tests, benchmarks and the
// report commands do.
//
//   - loadgen: three-tier spans with known parents, for throughput
//     benchmarks and the end-to-end tests (`make bench-causalpath`).
//   - gradientsim: a discrete-event front/back simulator with injectable
//     delays, for the spectral gradient (paper 000 figure 8,
//     `make bench-gradient`).
//   - tpcwsim: a TPC-W-like system under a changing load, for application
//     signatures (paper 004, `make bench-signature`).
//   - paperexp: the replay of paper 002's work-factor experiments
//     (`make bench-workfactor`).
package sim
