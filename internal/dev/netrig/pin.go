package netrig

import (
	"fmt"
	"strconv"
	"strings"
)

// Pin is the CPU list (taskset -c) of each role ("": not pinned).
type Pin map[string]string

// PlanPins places the servers and the caller on different CPUs where the
// machine allows: with 2 CPUs the load generator and the function share
// CPU 0 and Redis, MariaDB and the delay proxies CPU 1; with 3 the
// generator, the function and the servers have one each; with 4 or more
// Redis and MariaDB have one each (each proxy beside its server). With one
// CPU nothing is pinned (ok false).
func PlanPins(ncpu int) (p Pin, ok bool) {
	switch {
	case ncpu <= 1:
		return Pin{}, false
	case ncpu == 2:
		return Pin{RoleGen: "0", RoleFunction: "0", RoleRedis: "1", RoleMySQL: "1"}, true
	case ncpu == 3:
		return Pin{RoleGen: "0", RoleFunction: "1", RoleRedis: "2", RoleMySQL: "2"}, true
	}
	return Pin{RoleGen: "0", RoleFunction: "1", RoleRedis: "2", RoleMySQL: "3"}, true
}

// ParsePins reads -pin: ROLE=CPUS,… (CPUS as taskset -c takes them: 0,
// 1-3, 2:3 …, with ':' for ','), "auto" or "none".
func ParsePins(s string, ncpu int) (Pin, error) {
	switch s {
	case "auto":
		p, _ := PlanPins(ncpu)
		return p, nil
	case "none", "":
		return Pin{}, nil
	}
	p := Pin{}
	for _, item := range strings.Split(s, ",") {
		role, cpus, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !contains(Roles, role) {
			return nil, fmt.Errorf("-pin %q: want ROLE=CPUS with ROLE one of %s", item, strings.Join(Roles, ", "))
		}
		cpus = strings.ReplaceAll(cpus, ":", ",")
		for _, part := range strings.FieldsFunc(cpus, func(r rune) bool { return r == ',' || r == '-' }) {
			if c, err := strconv.Atoi(part); err != nil || c < 0 || c >= ncpu {
				return nil, fmt.Errorf("-pin %q: CPU %q is not one of 0 to %d", item, part, ncpu-1)
			}
		}
		p[role] = cpus
	}
	return p, nil
}

// String is the plan as -pin takes it.
func (p Pin) String() string {
	var parts []string
	for _, r := range Roles {
		if c := p[r]; c != "" {
			parts = append(parts, r+"="+strings.ReplaceAll(c, ",", ":"))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}
