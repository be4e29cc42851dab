//go:build !linux

// Package sched sets the Linux scheduling policy of this process's
// threads (the services' --sched-batch, loadgen floor's relays).
package sched

import "errors"

// Batch is Linux's; elsewhere the kernel's policy stays.
func Batch() error { return errors.New("sched: SCHED_BATCH is Linux's") }
