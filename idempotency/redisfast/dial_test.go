package redisfast_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/idempotency/redisfast"
)

func TestDial(t *testing.T) {
	cases := []struct {
		name    string
		url     string
		tls     bool
		cluster bool
		wantErr bool
	}{
		{"plain", "redis://127.0.0.1:6379/0", false, false, false},
		{"TLS (Tair with SSL)", "rediss://:pw@r-x.redis.rds.aliyuncs.com:6380/0", true, false, false},
		{"cluster nodes", "redis://:pw@10.0.0.1:6379?addr=10.0.0.2:6379&addr=10.0.0.3:6379", false, true, false},
		// A replica may lag behind a reset written to the master: every
		// command, the claim's HMGET too, goes to a master.
		{"cluster nodes asking for replica reads", "redis://:pw@10.0.0.1:6379?addr=10.0.0.2:6379&read_only=true" +
			"&route_by_latency=true&route_randomly=true", false, true, false},
		{"not a URL", "tcp://:hunter2@x", false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rdb, err := redisfast.Dial(c.url, 4)
			if c.wantErr {
				if err == nil || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			switch cl := rdb.(type) {
			case *redis.Client:
				o := cl.Options()
				if c.cluster || (o.TLSConfig != nil) != c.tls || !o.ContextTimeoutEnabled || o.MaxRetries != 0 /* -1 normalised: no retries */ || o.PoolSize != 4 {
					t.Fatalf("options %+v", o)
				}
			case *redis.ClusterClient:
				o := cl.Options()
				if !c.cluster || !o.ContextTimeoutEnabled || o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
					t.Fatalf("cluster options %+v", o)
				}
			}
		})
	}
}
