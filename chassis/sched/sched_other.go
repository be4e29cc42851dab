//go:build !linux

// Package sched holds the runtime profiles (--runtime-profile: Profile)
// and what the lab profile does to a process: it sets the Linux
// scheduling policy of the process's threads (Batch) and keeps Go's
// sysmon awake (Reexec). The services (sched.Runtime) and loadgen
// floor's relays use it.
package sched

import "errors"

// Batch is Linux's; elsewhere the kernel's policy stays.
func Batch() error { return errors.New("sched: SCHED_BATCH is Linux's") }
