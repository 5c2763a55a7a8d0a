// Package idemhttp is the API level of idempotency: net/http middleware
// that makes a POST (or PATCH, PUT, DELETE) safe to retry with the
// Idempotency-Key header of draft-ietf-httpapi-idempotency-key-header, on
// the same engine and stores as the event entry, and a client
// RoundTripper that sends one key per logical request and retries with it.
//
// Server side, per route (docs/api.md is the client's page):
//
//   - The header is an RFC 8941 sf-string; a malformed, empty or overlong
//     one is 400 naming it. A route requires it (missing: 400) or not
//     (Optional: missing runs without idempotency).
//   - The key is scoped by the principal (WithPrincipal), the method and
//     the route; the fingerprint is the target and the body (WithFingerprint
//     chooses the body's part, never the target): reuse with another
//     request is 422.
//   - The first request runs under the key's lease; its response (status,
//     the stored headers, body — large ones by reference in the engine's
//     blob store) is stored when it is the outcome (2xx, 3xx, final 4xx)
//     and replayed exactly to every repeat with Idempotency-Replayed: true.
//     A body over WithMaxResponse streams to the client as written and is
//     not stored: every repeat is response-not-stored, never a second run.
//     A retryable answer (5xx, 408, 425, 429) is sent but not stored: the
//     retry runs again, within the engine's attempt budget.
//   - A repeat while the first runs is 409 with Retry-After, or waits
//     (idempotency.WithWaitInFlight on the engine).
//   - Every refusal is application/problem+json (RFC 9457) with a type
//     per case (the Type constants), and changes nothing.
package idemhttp
