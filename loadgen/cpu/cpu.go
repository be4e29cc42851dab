// Package cpu measures the CPU time of the components of a run: local
// processes through /proc/<pid>/stat (found by pid or by process name),
// remote services by scraping the
// process_cpu_seconds_total counter of their Prometheus /metrics endpoint,
// and the load generator itself.
//
// A Sampler is safe for use by one goroutine at a time.
package cpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrSource is returned for a CPU source that cannot be set up.
var ErrSource = errors.New("cpu: bad source")

// ErrNoProcess is returned when no process has the name asked for.
var ErrNoProcess = errors.New("cpu: no such process")

// ErrGone is returned when a watched process no longer exists.
var ErrGone = errors.New("cpu: process gone")

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc on every
// architecture Go supports.
const clockTicks = 100

// Source yields the cumulative CPU seconds of one component.
type Source interface {
	Name() string
	// Seconds returns cumulative CPU seconds (user + system).
	Seconds(ctx context.Context) (float64, error)
}

// Sample is cumulative CPU seconds per component at one instant.
// Failed names the components that could not be read (left out of
// Seconds) and Err says why; a caller that sums components must not
// ignore it.
type Sample struct {
	At      time.Time
	Seconds map[string]float64
	Failed  []string
	Err     error
	// Host is the machine's CPU time at the same instant, nil where
	// /proc/stat cannot be read (it is a context, not a component: a
	// failure is no error of the sample).
	Host *Host
}

// Sampler reads every source.
type Sampler struct {
	sources []Source
}

// NewSampler returns a sampler over sources.
func NewSampler(sources ...Source) *Sampler { return &Sampler{sources: sources} }

// Add appends a source.
func (s *Sampler) Add(src Source) { s.sources = append(s.sources, src) }

// Names returns the component names in order.
func (s *Sampler) Names() []string {
	out := make([]string, len(s.sources))
	for i, src := range s.sources {
		out[i] = src.Name()
	}
	return out
}

// Sample reads all sources; a source that fails is left out of Seconds
// and named in Failed and Err.
func (s *Sampler) Sample(ctx context.Context) Sample {
	out := Sample{At: time.Now(), Seconds: make(map[string]float64, len(s.sources))}
	var errs []error
	for _, src := range s.sources {
		v, err := src.Seconds(ctx)
		if err != nil {
			out.Failed = append(out.Failed, src.Name())
			errs = append(errs, err)
			continue
		}
		out.Seconds[src.Name()] += v
	}
	out.Err = errors.Join(errs...)
	if h, err := ReadHost(); err == nil {
		out.Host = &h
	}
	return out
}

// Percent returns per-component CPU percent (100 = one core busy) between
// two samples.
func Percent(a, b Sample) map[string]float64 {
	dt := b.At.Sub(a.At).Seconds()
	out := map[string]float64{}
	if dt <= 0 {
		return out
	}
	for k, vb := range b.Seconds {
		va, ok := a.Seconds[k]
		if !ok {
			continue
		}
		out[k] = 100 * (vb - va) / dt
	}
	return out
}

// Delta returns per-component CPU seconds spent between two samples.
func Delta(a, b Sample) map[string]float64 {
	out := map[string]float64{}
	for k, vb := range b.Seconds {
		if va, ok := a.Seconds[k]; ok {
			out[k] = vb - va
		}
	}
	return out
}

// Proc is a local process (or set of processes) read from /proc.
type Proc struct {
	name string
	pids []int
	root string // /proc, replaceable in tests
}

// NewProc watches the given pids under name.
func NewProc(name string, pids ...int) *Proc { return &Proc{name: name, pids: pids, root: "/proc"} }

// Name returns the component name.
func (p *Proc) Name() string { return p.name }

// Seconds sums utime+stime of the processes. Every process must be
// alive: a sum without one of them would silently be too small.
func (p *Proc) Seconds(context.Context) (float64, error) {
	var total float64
	for _, pid := range p.pids {
		s, err := readStat(p.root, pid)
		if err != nil || s.state == "Z" || s.state == "X" {
			return 0, fmt.Errorf("%w: cannot read the CPU of %s: process %d is gone", ErrGone, p.name, pid)
		}
		total += s.cpu
	}
	return total, nil
}

type stat struct {
	state     string // R, S, D, Z (exited, not reaped), ...
	pid, ppid int
	comm      string
	cpu       float64
}

// readStat parses /proc/<pid>/stat. comm may contain spaces and ')' so the
// fields are read after the last ')'.
func readStat(root string, pid int) (stat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, fmt.Errorf("cannot read process stat: %w", err)
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (stat, error) {
	l := bytes.IndexByte(b, '(')
	r := bytes.LastIndexByte(b, ')')
	if l < 0 || r < l {
		return stat{}, fmt.Errorf("%w: malformed stat of pid %d", ErrSource, pid)
	}
	f := strings.Fields(string(b[r+1:]))
	// f[0]=state(3) f[1]=ppid(4) ... f[11]=utime(14) f[12]=stime(15)
	if len(f) < 13 {
		return stat{}, fmt.Errorf("%w: short stat of pid %d", ErrSource, pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, fmt.Errorf("%w: bad times in stat of pid %d", ErrSource, pid)
	}
	return stat{state: f[0], pid: pid, ppid: ppid, comm: string(b[l+1 : r]), cpu: float64(ut+st) / clockTicks}, nil
}

// Self returns the load generator's own CPU source.
func Self(name string) *Proc { return NewProc(name, os.Getpid()) }

// ByName returns one Proc per distinct process whose comm or first
// argument's base name equals name (every match summed).
func ByName(name string) (*Proc, error) {
	var pids []int
	for _, p := range listProcs("/proc") {
		if p.comm == name || baseArg0("/proc", p.pid) == name {
			if p.pid != os.Getpid() {
				pids = append(pids, p.pid)
			}
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("%w: no process named %q", ErrNoProcess, name)
	}
	return NewProc(name, pids...), nil
}

func listProcs(root string) []stat {
	ents, _ := os.ReadDir(root)
	var out []stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(root, pid); err == nil {
			out = append(out, s)
		}
	}
	return out
}

func cmdline(root string, pid int) []string {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func baseArg0(root string, pid int) string {
	a := cmdline(root, pid)
	if len(a) == 0 {
		return ""
	}
	return filepath.Base(a[0])
}

// Missing is a source that could not be set up (e.g. no process of that
// name): every read fails with its error, so that a sampler reports it
// instead of silently summing without it.
type Missing struct {
	name string
	err  error
}

// NewMissing returns a source named name failing with err.
func NewMissing(name string, err error) *Missing { return &Missing{name: name, err: err} }

// Name returns the component name.
func (m *Missing) Name() string { return m.name }

// Seconds returns the source's error.
func (m *Missing) Seconds(context.Context) (float64, error) { return 0, m.err }

// SpecName returns the component name a --cpu spec gives.
func SpecName(spec string) string {
	if name, _, ok := strings.Cut(spec, "="); ok {
		return name
	}
	return spec
}

// Metrics scrapes process_cpu_seconds_total from a Prometheus endpoint.
type Metrics struct {
	name   string
	url    string
	client *http.Client
}

// NewMetrics scrapes url (e.g. http://10.0.0.5:8080/metrics) as name.
func NewMetrics(name, url string) *Metrics {
	return &Metrics{name: name, url: url, client: &http.Client{Timeout: 2 * time.Second}}
}

// Name returns the component name.
func (m *Metrics) Name() string { return m.name }

// URL returns the scraped /metrics URL.
func (m *Metrics) URL() string { return m.url }

// Seconds returns the scraped counter.
func (m *Metrics) Seconds(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return 0, fmt.Errorf("cannot scrape %s: %w", m.url, err)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot scrape %s: %w", m.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("cannot scrape %s: status %d", m.url, resp.StatusCode)
	}
	return ParseProcessCPU(resp.Body)
}

// ParseProcessCPU finds process_cpu_seconds_total in Prometheus text.
func ParseProcessCPU(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "process_cpu_seconds_total") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse process_cpu_seconds_total %q: %w", f[1], err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cannot read metrics: %w", err)
	}
	return 0, fmt.Errorf("%w: no process_cpu_seconds_total in metrics", ErrSource)
}

// ParseSpec builds a source from a --cpu flag value:
// NAME=pid:PID[,PID...], NAME=proc:PROCESSNAME, NAME=http://host:port/metrics,
// or a bare PROCESSNAME.
func ParseSpec(spec string) (Source, error) {
	name, val, ok := strings.Cut(spec, "=")
	if !ok {
		return ByName(spec)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: %q: empty component name", ErrSource, spec)
	}
	switch {
	case strings.HasPrefix(val, "pid:"):
		var pids []int
		for _, s := range strings.Split(val[4:], ",") {
			pid, err := strconv.Atoi(s)
			if err != nil || pid <= 0 {
				return nil, fmt.Errorf("%w: %q: bad pid %q", ErrSource, spec, s)
			}
			pids = append(pids, pid)
		}
		return NewProc(name, pids...), nil
	case strings.HasPrefix(val, "proc:"):
		p, err := ByName(val[5:])
		if err != nil {
			return nil, err
		}
		p.name = name
		return p, nil
	case strings.HasPrefix(val, "http://"), strings.HasPrefix(val, "https://"):
		return NewMetrics(name, val), nil
	}
	return nil, fmt.Errorf("%w: %q (want NAME=pid:PID, NAME=proc:NAME or NAME=http://HOST:PORT/metrics)", ErrSource, spec)
}
