package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chf-testbed/testbed/loadgen/report"
)

// soakSample is one sample of one component's resources.
type soakSample struct {
	At         float64 `json:"t_s"` // seconds since the sampler started
	RSSKiB     int64   `json:"rss_kib"`
	OpenFiles  int     `json:"open_files"`
	Goroutines int     `json:"goroutines"` // -1 when unknown (no pprof)
}

// soakReport is what `loadgen local --sample-every` writes to soak.json.
type soakReport struct {
	EveryS     float64                 `json:"every_s"`
	Components map[string][]soakSample `json:"components"`
	// P99Ms is the worst per-second p99 of each sampling interval.
	P99Ms []float64 `json:"p99_ms"`
	// Growth says, per series, how much its median over the last third
	// exceeds the median over the first third; Verdict flags a growth
	// above 20% and 16 MiB (memory), 10 (files), 100 (goroutines), or
	// above 50% and 5 ms (p99).
	Growth  map[string]float64 `json:"growth"`
	Verdict []string           `json:"verdict"`
}

// soakSampler samples the RSS, open files and goroutines of each
// process every interval until stop.
type soakSampler struct {
	every time.Duration
	pids  map[string]int
	pprof map[string]string // component → host:port of its pprof
	start time.Time
	mu    sync.Mutex
	data  map[string][]soakSample
	stop  context.CancelFunc
	done  chan struct{}
}

func startSoak(every time.Duration, pids map[string]int, pprof map[string]string) *soakSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &soakSampler{every: every, pids: pids, pprof: pprof, start: time.Now(), data: map[string][]soakSample{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		s.sample()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *soakSampler) sample() {
	at := time.Since(s.start).Seconds()
	hc := &http.Client{Timeout: 2 * time.Second}
	for name, pid := range s.pids {
		smp := soakSample{At: at, Goroutines: -1}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
					smp.RSSKiB, _ = strconv.ParseInt(f[1], 10, 64)
				}
			}
		}
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			smp.OpenFiles = len(ents)
		}
		if addr := s.pprof[name]; addr != "" {
			if resp, err := hc.Get("http://" + addr + "/debug/pprof/goroutine?debug=1"); err == nil {
				line, _ := bufio.NewReader(io.LimitReader(resp.Body, 256)).ReadString('\n')
				resp.Body.Close()
				// "goroutine profile: total N"
				if i := strings.LastIndex(line, " "); i > 0 {
					smp.Goroutines, _ = strconv.Atoi(strings.TrimSpace(line[i+1:]))
				}
			}
		}
		s.mu.Lock()
		s.data[name] = append(s.data[name], smp)
		s.mu.Unlock()
	}
}

// finish stops sampling and writes soak.json and soak.txt into dir.
func (s *soakSampler) finish(dir string, res *report.Result) error {
	s.stop()
	<-s.done
	rep := soakReport{EveryS: s.every.Seconds(), Components: s.data, Growth: map[string]float64{}}
	if res != nil {
		rep.P99Ms = intervalP99(res, int(s.every/time.Second))
	}
	names := make([]string, 0, len(s.data))
	for n := range s.data {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var rss, files, gs []float64
		for _, x := range s.data[n] {
			rss, files = append(rss, float64(x.RSSKiB)), append(files, float64(x.OpenFiles))
			if x.Goroutines >= 0 {
				gs = append(gs, float64(x.Goroutines))
			}
		}
		rep.growth(n+" rss_kib", rss, 0.2, 16<<10)
		rep.growth(n+" open_files", files, 0.2, 10)
		rep.growth(n+" goroutines", gs, 0.2, 100)
	}
	rep.growth("p99_ms", rep.P99Ms, 0.5, 5)
	if len(rep.Verdict) == 0 {
		rep.Verdict = []string{"flat: no series grew beyond its limit (20% and 16 MiB memory, 10 files, 100 goroutines; 50% and 5 ms p99) from the first third of the run to the last"}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode soak.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), b, 0o644); err != nil {
		return fmt.Errorf("cannot write soak.json: %w", err)
	}
	t := s.text(names, &rep)
	if err := os.WriteFile(filepath.Join(dir, "soak.txt"), []byte(t), 0o644); err != nil {
		return fmt.Errorf("cannot write soak.txt: %w", err)
	}
	fmt.Print("\n" + t)
	return nil
}

// intervalP99 is the worst per-second p99 of each interval of n seconds
// of res's measured window.
func intervalP99(res *report.Result, n int) []float64 {
	var out []float64
	var cur float64
	k := 0
	for _, p := range res.Series {
		if p.Phase != "measure" {
			continue
		}
		cur = max(cur, p.P99)
		if k++; k == n {
			out = append(out, cur)
			cur, k = 0, 0
		}
	}
	return out
}

// growth records the growth of series v: it grows when its last third's
// median exceeds the first third's by more than limit (a share) and
// minAbs (units of the series: per-request goroutines and a warming heap
// move a little anyway).
func (rep *soakReport) growth(name string, v []float64, limit, minAbs float64) {
	if len(v) < 6 {
		return
	}
	third := len(v) / 3
	a, b := report.Median(v[:third]), report.Median(v[len(v)-third:])
	if a <= 0 {
		return
	}
	g := b/a - 1
	rep.Growth[name] = g
	if g > limit && b-a > minAbs {
		rep.Verdict = append(rep.Verdict, fmt.Sprintf("%s GROWS: median %.0f over the first third, %.0f over the last (+%.0f%%)", name, a, b, 100*g))
	}
}

// text is soak.txt: the samples of each component, the p99 per interval
// and the verdict.
func (s *soakSampler) text(names []string, rep *soakReport) string {
	var t strings.Builder
	fmt.Fprintf(&t, "soak: every %s\n", s.every)
	for _, n := range names {
		fmt.Fprintf(&t, "%s:\n  t_s rss_MiB open_files goroutines\n", n)
		for _, x := range s.data[n] {
			fmt.Fprintf(&t, "  %5.0f %7.1f %5d %6d\n", x.At, float64(x.RSSKiB)/1024, x.OpenFiles, x.Goroutines)
		}
	}
	fmt.Fprintf(&t, "p99 ms per interval (worst second):")
	for _, v := range rep.P99Ms {
		fmt.Fprintf(&t, " %.1f", v)
	}
	fmt.Fprintf(&t, "\n")
	for _, v := range rep.Verdict {
		fmt.Fprintf(&t, "%s\n", v)
	}
	return t.String()
}
