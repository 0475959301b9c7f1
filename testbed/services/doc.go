// Package services is the testbed's tiers: web, app, db, queue and worker, real HTTP
// servers instrumented by hand with the OpenTelemetry SDK (W3C trace context only).
//
// Span shapes, the contract the tests hold the tiers to (testbed/README.md):
//   - web: SERVER "GET /txn/{Name}"; a CLIENT "POST /op/{op}" per app call; a
//     PRODUCER "publish {topic}" per publish, which is also the HTTP call to the
//     queue and so carries server.address, server.port and url.full.
//   - app: SERVER "POST /op/{op}"; a CLIENT "POST /query/{name}" per db call.
//   - db: SERVER "POST /query/{name}"; an INTERNAL span named by db.query.summary
//     ("SELECT items") around the SQL and its busy work; on the primary, for a
//     write, a CLIENT "POST /query/{name}" to the backup: inside the SERVER span
//     (sync) or started after it has ended (async).
//   - worker: CONSUMER "process {topic}", child of the PRODUCER whose context the
//     message carries; a CLIENT per db call.
//
// Opt-in (testbed/stitch.yaml, README): app ops over gRPC (span names
// "tierscope.testbed.v1.AppService/{Method}" on both sides), cache calls to a
// RESP cache tier (CLIENT "GET"), async tasks (INTERNAL) and publishes
// (PRODUCER) that may outlive the op's SERVER span, in-process clients reporting
// under their own service.name (StackOptions.Reporter), and the legacy
// attribute names per service (semconv.go).
//
// Busy work is calibrated: Burn spins on the thread's CPU clock, so a contended
// machine shows longer response times but the same work. A hop named in
// drop_context is still a CLIENT/PRODUCER span at the caller; only the context is
// not sent, so the callee starts a new trace.
package services
