package redisfast

import "testing"

// The oldest version accepted is the oldest the scripts run on: every
// script sets several fields in one HSET (Redis 4.0).
func TestAtLeast(t *testing.T) {
	cases := []struct {
		name, info string
		ok, err    bool
	}{
		{"7.0", "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n", true, false},
		{"5.0", "redis_version:5.0.14\r\n", true, false},
		{"4.0, the first with a multi-field HSET (scripts call replicate_commands)", "redis_version:4.0.0\r\n", true, false},
		{"3.2: HSET takes one field", "redis_version:3.2.12\r\n", false, false},
		{"3.0", "redis_version:3.0.7\r\n", false, false},
		{"2.8", "redis_version:2.8.24\r\n", false, false},
		{"major only", "redis_version:6\r\n", true, false},
		{"garbage", "redis_version:x.y\r\n", false, true},
		{"missing", "# Server\r\nos:Linux\r\n", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ok, err := atLeast(c.info, minMajor, minMinor)
			if ok != c.ok || (err != nil) != c.err {
				t.Fatalf("ok %v err %v", ok, err)
			}
		})
	}
}
