// Package ossresult stores the result objects of a task (docs/design.md §8):
// tasks/<K>/input.json, tasks/<K>/attempt-<NNN>/output.json and
// tasks/<K>/approved/result.md, each written create-once and carrying the
// metadata x-oss-meta-idempotency-key and x-oss-meta-request-id.
//
// Two stores have the same semantics and pass the same suite
// (package resulttest):
//
//   - [Local] keeps objects under a directory (local runs, STATE_DIR/results).
//     An object becomes visible by link(2) of a complete, fsynced temp file,
//     so a reader never sees a partial object and two writers, in goroutines
//     or processes, cannot both win.
//   - [OSSBucket] (from [OSS.With]) writes to Alibaba Cloud OSS with the
//     official SDK and V4 signing, using the per-invocation (STS) credentials
//     that Function Compute passes in; handles are cached per credential triple.
//
// PutOnce writes an object only if it does not exist. Writing the same bytes
// again is a success with the same ref (a retry whose first response was
// lost); different bytes are [ErrConflict]. Failures say whether they are
// worth retrying ([Retryable]); the caller maps them onto its error classes.
//
// # OSS caveats for operators
//
// OSS ignores x-oss-forbid-overwrite on versioned buckets: there a second
// PutOnce silently adds a version instead of failing. Correctness
// never rests on OSS alone: only the worker that holds the fence publishes,
// and attempt objects have per-attempt keys. Prefer an unversioned bucket.
//
// Every object of the layout is tagged with its kind when it is written
// ([TagKind] = [KindInput], [KindAttempt] or [KindApproved], from [KindOf]):
// OSS lifecycle rules select objects by prefix and tag, not by wildcard, so
// a rule on prefix tasks/ with tag idemgate-kind=attempt (or input) can
// expire those and leave approved results alone. Tagging on PUT needs
// oss:PutObjectTagging besides oss:PutObject. Once a task completes,
// approved/result.md is the result; result_ref keeps naming the attempt, so
// pick the age to outlive replays and audits. The local store records the
// kind in its metadata file.
package ossresult
