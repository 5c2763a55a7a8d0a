//go:build !linux

package boltstore

// holderOf cannot name the process holding the lock off Linux.
func holderOf(string) string { return "another process" }
