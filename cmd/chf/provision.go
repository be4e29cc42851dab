package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/chf-testbed/testbed/abm"
	"github.com/chf-testbed/testbed/abm/provision"
	"github.com/chf-testbed/testbed/chassis/service"
)

// provisionConfig is the configuration of `chf provision`: one field per flag.
type provisionConfig struct {
	provision.Config
	Aerospike string
	Quiet     bool
	Buckets   bucketFlag
}

// bucketFlag collects repeated --bucket plans.
type bucketFlag []string

func (b *bucketFlag) String() string { return strings.Join(*b, ",") }
func (b *bucketFlag) Set(v string) error {
	if _, err := provision.ParseBucket(v); err != nil {
		return err
	}
	*b = append(*b, v)
	return nil
}

func (c *provisionConfig) RegisterFlags(fs *flag.FlagSet) {
	abm.RegisterAerospikeFlags(fs, &c.Aerospike, &c.Namespace)
	fs.IntVar(&c.Count, "accounts", c.Count, "number of accounts to create, from --first upward")
	fs.Int64Var(&c.Balance, "balance", c.Balance, "balance of each account in minor units (100000000 = 1,000,000.00)")
	fs.StringVar(&c.First, "first", c.First, "first SUPI (imsi- and up to 15 digits; the next ones count up)")
	fs.StringVar(&c.Currency, "currency", c.Currency, "ISO 4217 currency of the accounts")
	fs.BoolVar(&c.Overwrite, "overwrite", c.Overwrite, "replace existing accounts (balance reset, sessions dropped); default: leave them alone and count them as skipped")
	fs.IntVar(&c.Workers, "workers", c.Workers, "parallel writers")
	fs.IntVar(&c.Batch, "batch", c.Batch, "accounts per batch write request (1 = one request per account)")
	fs.BoolVar(&c.Quiet, "quiet", c.Quiet, "no progress lines, only the summary")
	fs.Int64Var(&c.CreditLimit, "credit-limit", c.CreditLimit, "provision postpaid accounts: the balance may go below zero down to minus this many minor units (0 = prepaid)")
	fs.Var(&c.Buckets, "bucket", "an allowance every account starts with, consumed before the balance: SERVICE:UNITS[:VALIDITY], SERVICE data (octets), voice (seconds) or sms (messages), VALIDITY a duration or N days (30d), none when omitted; repeatable (data:10000000000:30d)")
}

// The bounds of --workers and --batch: each worker holds a batch of
// records in memory.
const (
	maxProvisionWorkers = 1024
	maxProvisionBatch   = 5000
)

func (c *provisionConfig) Validate() error {
	if _, err := provision.ParseHosts(c.Aerospike); err != nil {
		return err
	}
	switch {
	case c.Count < 0:
		return fmt.Errorf("cannot use --accounts %d: must not be negative", c.Count)
	case c.Balance < 0:
		return fmt.Errorf("cannot use --balance %d: must not be negative", c.Balance)
	case c.Workers < 1 || c.Workers > maxProvisionWorkers:
		return fmt.Errorf("cannot use --workers %d: want 1..%d", c.Workers, maxProvisionWorkers)
	case c.Batch < 1 || c.Batch > maxProvisionBatch:
		// Aerospike's default batch-max-requests is 5,000.
		return fmt.Errorf("cannot use --batch %d: want 1..%d", c.Batch, maxProvisionBatch)
	}
	if c.CreditLimit < 0 {
		return errors.New("cannot use --credit-limit: must not be negative")
	}
	c.Config.Buckets = c.Config.Buckets[:0]
	for _, spec := range c.Buckets {
		b, err := provision.ParseBucket(spec)
		if err != nil {
			return fmt.Errorf("cannot use --bucket: %w", err)
		}
		c.Config.Buckets = append(c.Config.Buckets, b)
	}
	if len(c.Currency) != 3 {
		return fmt.Errorf("cannot use --currency %q: want a 3-letter ISO 4217 code", c.Currency)
	}
	if c.Count > 0 {
		if _, err := provision.SUPI(c.First, c.Count-1); err != nil {
			return fmt.Errorf("cannot use --first/--accounts: %w", err)
		}
	}
	return nil
}

const provisionAbout = "Creates accounts imsi-…001 upward with a balance."

func runProvision(args []string) error {
	c := provisionConfig{Aerospike: "127.0.0.1:3000", Config: provision.Config{
		Namespace: "chf", Count: 100000, Balance: 100000000, First: "imsi-001010000000001",
		Currency: "EUR", Workers: 16, Batch: 256,
	}}
	if run, err := service.ParseCommand("chf provision", provisionAbout, &c, args); !run {
		return err
	}
	hosts, _ := provision.ParseHosts(c.Aerospike) // validated
	cl, err := abm.Dial(hosts)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var progress func(done, total int)
	tty := false
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		tty = true
	}
	if !c.Quiet {
		lastTenth := -1
		progress = func(done, total int) {
			line := progressBar(done, total, time.Since(start))
			if tty {
				fmt.Fprintf(os.Stderr, "\r%s", line)
			} else if tenth := 10 * done / max(total, 1); tenth != lastTenth { // a line per 10%
				lastTenth = tenth
				fmt.Fprintln(os.Stderr, line)
			}
		}
	}
	res, err := provision.Run(ctx, cl, c.Config, progress)
	if progress != nil && tty {
		fmt.Fprintln(os.Stderr)
	}
	el := time.Since(start)
	fmt.Printf("provisioned %d accounts (%d created, %d already there) from %s with %d minor units %s in %s (%.0f accounts/s)\n",
		res.Created+res.Skipped, res.Created, res.Skipped, c.First, c.Balance, c.Currency, el.Round(time.Millisecond), float64(res.Created+res.Skipped)/el.Seconds())
	return err
}

// progressBar renders provisioning progress: a bar, the count, the rate
// and the time left at that rate.
func progressBar(done, total int, el time.Duration) string {
	const width = 30
	frac := float64(done) / float64(max(total, 1))
	n := int(frac * width)
	rate := float64(done) / max(el.Seconds(), 1e-9)
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] %3.0f%% %d/%d accounts, %.0f/s, %s left",
		strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac, done, total, rate, eta)
}
