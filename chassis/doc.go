// Package chassis is the microservice chassis shared by CGW, OCP and ABM.
// It holds no code; its packages are named for what they provide (see
// README.md for the map):
//
//   - chassis/service: a service command: flags (Base), ParseCommand,
//     Run with its start/stop Group, pprof
//   - chassis/server: the HTTP/1.1 server with /healthz, /readyz, /metrics
//   - chassis/peer: the client of a peer service (balancing, ejection,
//     retries, deadlines) and its flags
//   - chassis/batcher: natural batching of concurrent calls
//   - chassis/rpc: the batched internal RPC over peer and batcher
//   - chassis/hop: the deadline and overload headers and a served
//     request's context, shared by server and peer
//   - chassis/route: bounded route labels and per-route latency
//   - chassis/logthrottle: rate-limited log lines on hot paths
//   - chassis/sched: the Go runtime's and the scheduler's settings
//   - chassis/balancer, chassis/discovery, chassis/telemetry,
//     chassis/tlsconfig, chassis/oauth2, chassis/flight, chassis/probe,
//     chassis/h2c, chassis/sighup: as their names say
package chassis
