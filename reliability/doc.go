// Package reliability holds the tests behind RELIABILITY.md: the real slide binary, run as
// separate processes against a Kafka-protocol broker in a process of its own
// (`slide broker`), crashed with SIGKILL, rebalanced, flooded and fed a backlog, with every
// answer compared to an exact oracle of what was produced.
//
// The package has no code of its own; `go test ./reliability/` builds cmd/slide once and
// runs every scenario. Each test logs the figures RELIABILITY.md quotes (run with -v).
package reliability
