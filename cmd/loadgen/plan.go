package main

import (
	"errors"
	"os"

	"github.com/chf-testbed/testbed/loadgen/plan"
	"github.com/chf-testbed/testbed/loadgen/report"
)

func init() {
	register("plan", "size a deployment for a target TPS from a measured result.json: pods, cores, Aerospike memory", planCmd)
}

var planHelp = help{
	name:     "plan",
	synopsis: "loadgen plan --tps N --from result.json [--utilisation 0.6] [--pod-cores 2] [--subscribers N] ...",
	text: "Scales the CPU µs per transaction each component used in the run (cgw, ocp, abm; aslite or aerospike for the\n" +
		"store) to the target rate at the given utilisation, rounds the services up to pods, and sizes Aerospike's memory\n" +
		"from the accounts, the open sessions (scaled from the run's) and the record size; prints its assumptions.\n" +
		"See loadgen/README.md (Capacity plan).",
}

func planCmd(args []string) error {
	fs := newFlagSet("plan")
	o := plan.Defaults()
	from := fs.String("from", "", "result.json of a measured run (required): loadgen local, or run with a --cpu source per component")
	fs.Float64Var(&o.TPS, "tps", 0, "target transactions per second (required, > 0)")
	fs.Float64Var(&o.Utilisation, "utilisation", o.Utilisation, "share of each core to plan for, (0, 1]")
	fs.Float64Var(&o.PodCores, "pod-cores", o.PodCores, "cores of one CHF pod")
	fs.IntVar(&o.Subscribers, "subscribers", 0, "accounts to size Aerospike for; 0 = the run's subscriber range")
	fs.IntVar(&o.Replication, "replication", o.Replication, "Aerospike replication factor")
	fs.IntVar(&o.RecordBaseBytes, "record-bytes", o.RecordBaseBytes, "an account record's bytes without sessions (key, bins, Aerospike's overheads)")
	fs.IntVar(&o.IndexBytes, "index-bytes", o.IndexBytes, "Aerospike primary index bytes per record and replica")
	fs.Int64Var(&o.NodeMemory, "node-memory", o.NodeMemory, "bytes of memory per Aerospike node for index and data")
	fs.Float64Var(&o.HighWater, "high-water", o.HighWater, "share of a node's memory the plan fills, (0, 1]")
	if err := parseFlags(fs, planHelp, args); err != nil {
		return err
	}
	if *from == "" {
		return usageError{errors.New("need --from result.json")}
	}
	if !setFlags(fs)["tps"] {
		return usageError{errors.New("need --tps N")}
	}
	if err := o.Check(); err != nil {
		return usageError{err}
	}
	r, err := report.ReadJSON(*from)
	if err != nil {
		return err
	}
	p, err := plan.Make(r, *from, o)
	if errors.Is(err, plan.ErrInput) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	p.Write(os.Stdout)
	return nil
}
