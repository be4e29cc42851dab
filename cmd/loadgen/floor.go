package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/chf-testbed/testbed/chassis/sched"
	"github.com/chf-testbed/testbed/loadgen/floor"
)

func init() {
	register("floor", "the CPU a chain of processes costs per exchange on this machine, before any CHF code: the light-load floor", floorCmd)
}

var floorHelp = help{
	name:     "floor",
	synopsis: "loadgen floor [--hops 4] [--rate 1000] [--duration 10s] [--size 400] [--relays go,raw] [--runtime-profile production] [--json FILE]",
	text: "Starts --hops relay processes in a chain on loopback TCP (as many as the CHF has processes: cgw, ocp, abm,\n" +
		"aslite), sends one --size-byte exchange at a time through them at --rate, and reads each relay's CPU from /proc:\n" +
		"what the wake-ups, system calls and loopback TCP of the hops cost per exchange before any CHF code runs. At light\n" +
		"load a CHF transaction pays them in full, so compare `SUT CPU µs/transaction` of `loadgen local --rate R` with\n" +
		"this at the same rate. go relays run as the services do (Go netpoller, GOMAXPROCS 1, --runtime-profile); raw relays block in read\n" +
		"and write on one thread (the kernel's and the machine's share). See loadgen/README.md (The light-load floor).",
}

func floorCmd(args []string) error {
	if len(args) > 0 && args[0] == "relay" {
		return floorRelay(args[1:])
	}
	fs := newFlagSet("floor")
	o := floor.Defaults()
	fs.IntVar(&o.Hops, "hops", o.Hops, fmt.Sprintf("relay processes in the chain, 1..%d (the CHF: cgw, ocp, abm and its store)", floor.MaxHops))
	fs.Float64Var(&o.Rate, "rate", o.Rate, "exchanges a second, one at a time (each waits for the previous answer)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "measured window, > 0")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "paced exchanges before the window, >= 0")
	fs.IntVar(&o.Size, "size", o.Size, "bytes of each request and answer (an Nchf request is about 400)")
	relays := fs.String("relays", strings.Join(o.Relays, ","), "relay kinds to measure, in order: go (as the services run: Go netpoller, GOMAXPROCS 1), raw (blocking system calls on one thread)")
	fs.Var(&o.Profile, sched.FlagName, "the relays' runtime profile, as the services take it (chf --runtime-profile): production (the kernel's default policy, Go's sysmon parks when idle) or lab (SCHED_BATCH, sysmon kept awake)")
	fs.BoolFunc("sched-batch", "removed: use --runtime-profile", func(string) error {
		return errors.New("--sched-batch was removed: use --runtime-profile (production: the kernel's default policy; lab: SCHED_BATCH and sysmon kept awake)")
	})
	jsonOut := fs.String("json", "", "also write the results to this file as JSON")
	if err := parseFlags(fs, floorHelp, args); err != nil {
		return err
	}
	o.Relays = strings.Split(*relays, ",")
	if err := o.Validate(); err != nil {
		return usageError{err}
	}
	stop := onSignals()
	defer stop.Stop()
	o.Progress = os.Stderr
	rs, err := floor.Measure(stop.Context(), o)
	if len(rs) > 0 {
		floor.Write(os.Stdout, rs)
		if *jsonOut != "" {
			b, jerr := json.MarshalIndent(rs, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
			}
			if jerr != nil {
				return fmt.Errorf("cannot write %s: %w", *jsonOut, jerr)
			}
		}
	}
	if sig := stop.Signal(); sig != nil {
		return interrupted{sig: sig}
	}
	if errors.Is(err, floor.ErrInput) {
		return usageError{err}
	}
	return err
}

// floorRelay is the hidden `loadgen floor relay`: one relay of the chain.
func floorRelay(args []string) error {
	fs := newFlagSet("floor")
	kind := fs.String("kind", floor.RelayGo, "go or raw")
	next := fs.String("next", "", "host:port of the next relay; empty = answer")
	size := fs.Int("size", 400, "bytes of each message")
	profile := sched.Production
	fs.Var(&profile, sched.FlagName, "production or lab")
	if err := parseFlags(fs, floorHelp, args); err != nil {
		return err
	}
	stop := onSignals()
	defer stop.Stop()
	err := floor.Serve(stop.Context(), *kind, *next, *size, profile, os.Stdout)
	if errors.Is(err, floor.ErrInput) {
		return usageError{err}
	}
	return err
}
