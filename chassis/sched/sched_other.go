//go:build !linux

// Package sched holds the Go runtime's and the schedulers' settings of a
// process: Runtime, every service's --gomaxprocs, --gogc and
// --runtime-profile, applied by ApplyRuntime (with Go's memory limit
// from the cgroup's); the runtime profiles (Profile); and what the lab
// profile does to a process: it sets the Linux scheduling policy of the
// process's threads (Batch) and keeps Go's sysmon awake (Reexec). The
// services (chassis/service) and loadgen floor's relays use it.
package sched

import "errors"

// Batch is Linux's; elsewhere the kernel's policy stays.
func Batch() error { return errors.New("sched: SCHED_BATCH is Linux's") }
