package gctune

import "testing"

func TestGCSettings(t *testing.T) {
	cases := []struct {
		name        string
		env         map[string]string
		wantPercent int
		wantLimit   int64
	}{
		{name: "not in FC: Go's defaults", env: map[string]string{}},
		{name: "FC's memory: a limit under it and a higher GOGC",
			env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "512"}, wantPercent: gcPercent, wantLimit: 429496729},
		{name: "the user's GOGC wins", env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "512", "GOGC": "100"},
			wantLimit: 429496729},
		{name: "the user's GOGC=off wins", env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "512", "GOGC": "off"},
			wantLimit: 429496729},
		{name: "the user's GOMEMLIMIT wins, and makes the higher GOGC safe",
			env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "300MiB"}, wantPercent: gcPercent},
		{name: "the user's GOMEMLIMIT outside FC", env: map[string]string{"GOMEMLIMIT": "1GiB"}, wantPercent: gcPercent},
		{name: "both the user's", env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "512", "GOGC": "200", "GOMEMLIMIT": "1GiB"}},
		{name: "no limit known: GOGC stays", env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "lots"}},
		{name: "zero memory is no memory", env: map[string]string{"FC_FUNCTION_MEMORY_SIZE": "0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			percent, limit := Settings(func(k string) string { return c.env[k] })
			if percent != c.wantPercent || limit != c.wantLimit {
				t.Errorf("Settings = %d, %d; want %d, %d", percent, limit, c.wantPercent, c.wantLimit)
			}
		})
	}
}
