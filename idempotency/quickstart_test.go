package idempotency_test

// docs/library.md's Quick start quotes this file (TestLibraryGoBlocksAreQuoted
// in docs/); Example_quickStart runs it.

import (
	"context"
	"encoding/json"
	"os"

	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/keys"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/idempotency/redisfast"
)

// newEngine runs once per process (an FC instance): the store, the optional
// fast layer, the engine.
func newEngine(ctx context.Context) (*idempotency.Engine, error) {
	store, err := mysqlstore.Open(os.Getenv("MYSQL_DSN"), mysqlstore.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx); err != nil { // once per deployment: the template's `main migrate`
		return nil, err
	}
	rdb, err := redisfast.Dial(os.Getenv("REDIS_URL"), 0)
	if err != nil {
		return nil, err
	}
	// The prefix keeps apart the users of one Redis database ("": none).
	fast, err := redisfast.New(rdb, redisfast.MaxTTL, redisfast.WithKeyPrefix(os.Getenv("REDIS_KEY_PREFIX")))
	if err != nil {
		return nil, err
	}
	return idempotency.New(store, idempotency.WithFastLayer(fast)), nil
}

// chargeOnce runs per delivery: a business key, then the action through Do
// (or Run, typed). fcRequestID and retryCount are FC's (fccontext).
func chargeOnce(ctx context.Context, eng *idempotency.Engine, tenant string, input map[string]any,
	fcRequestID string, retryCount int) (idempotency.Outcome, error) {
	raw, err := json.Marshal(input) // keys.Fields.Input is the input's JSON (a json.RawMessage)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	k, err := keys.Derive(keys.Fields{TenantID: tenant, TaskType: "charge", Operation: "charge", Input: raw})
	if err != nil {
		return idempotency.Outcome{}, err
	}
	req := idempotency.ClaimRequest{Key: k.Key, PayloadHash: k.PayloadHash, Owner: fcRequestID, Try: retryCount}
	return eng.Do(ctx, req, func(ctx context.Context, l *idempotency.Lease) (string, error) {
		return chargeCard(ctx, input) // runs at most once per effective result; its return value is stored
	})
}
